"""Every command that evaluates (`run`, `eval`, `validate`, `tune`) uses the dataset's own
index, never the job's default one that `plm ingest` fills with a user's documents, also
when the dataset comes from the config's `[job].dataset` rather than `--dataset`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_corpus"

COMMANDS = {
    "run": ["run", "--queries", "test"],
    "eval": ["eval", "--queries", "test", "--resamples", "100", "--bootstrap", "100", "--no-chart"],
    "validate": ["validate", "--cases", "cases.yaml"],
    "tune": ["tune", "--param", "query.retrieve.retrievers.bm25.k1=1.2", "--queries", "test", "--metric", "nDCG@10"],
}


def plm(*args: str, data_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


# `eval` in the fast subset; the other three commands (3-5 s each) in the full suite.
@pytest.mark.parametrize(
    "command", [c if c == "eval" else pytest.param(c, marks=pytest.mark.slow) for c in sorted(COMMANDS)]
)
def test_evaluating_without_dataset_leaves_the_users_index_alone(command: str, tmp_path: Path) -> None:
    config = tmp_path / "exp_bm25_stemmed.toml"  # named after its job, as configs/recommended.toml is
    text = (REPO / "configs" / "experiments" / "bm25_stemmed.toml").read_text()
    config.write_text(text.replace('dataset = "../../examples/sample_corpus"', f'dataset = "{SAMPLE}"'))
    mine = tmp_path / "my_docs"
    mine.mkdir()
    (mine / "runbook.md").write_text("# Rotating the pager\n\nHand the pager to the next engineer on Monday.\n")
    (tmp_path / "cases.yaml").write_text(
        "cases:\n  - name: dr\n    query: disaster recovery\n    expect: {doc_id: disaster-recovery}\n"
    )
    data = tmp_path / "data"
    ingested = plm("ingest", str(mine), "--config", str(config), data_dir=data, cwd=tmp_path)
    assert ingested.returncode == 0, ingested.stderr[-3000:]

    res = plm(*COMMANDS[command], "--config", str(config), data_dir=data, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]

    stats = plm("index", "stats", "--config", str(config), "--json", data_dir=data, cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr[-3000:]
    assert json.loads(stats.stdout)["documents"] == 1
