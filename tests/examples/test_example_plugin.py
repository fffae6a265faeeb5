"""The third-party example plugin, installed as its own package, seen and used by plm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plm_core.records import Query

REPO = Path(__file__).resolve().parents[2]

example = pytest.importorskip(
    "plm_example_plugin", reason="install it: pip install -e examples/plm-example-plugin (CI does)"
)


def test_plm_plugins_lists_the_example_plugin() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ},
        timeout=60,
    )
    rows = [r for r in json.loads(res.stdout) if r["name"] == "question_normalizer"]
    assert len(rows) == 1
    assert rows[0]["package"] == "plm-example-plugin" and rows[0]["version"] == "0.1.0"


def test_normalizer_drops_boilerplate() -> None:
    stage = example.QuestionNormalizer()
    out = stage.run(Query(text="How do I rotate the API keys?", k=3))
    assert out.text == "rotate api keys" and out.k == 3


TOKENIZER_JOB = """
[job]
name = "ngrams"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
method = "lucene"
tokenizer = "{tokenizer}"
"""


def test_a_third_party_tokenizer_from_toml(tmp_path: Path) -> None:
    from plm_core.settings import Settings
    from plm_index.job import Job

    pytest.importorskip("bm25s")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "hpa.md").write_text("# Autoscaling\n\nThe horizontal pod autoscaler scales replicas on CPU.\n")
    (docs / "backup.md").write_text("# Backups\n\nSnapshots are taken nightly and kept for a week.\n")
    found = {}
    for tokenizer in ("char_ngrams", "bm25s_stem"):
        config = tmp_path / f"{tokenizer}.toml"
        config.write_text(TOKENIZER_JOB.format(tokenizer=tokenizer))
        settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
        job = Job.from_config(config, index_dir=tmp_path / tokenizer, settings=settings)
        if tokenizer == "char_ngrams":
            (retrieve,) = job.query_stages
            assert type(retrieve.retriever.tokenizer).__name__ == "CharNgramTokenizer"
        job.ingest([docs])
        found[tokenizer] = [h.doc_id for h in job.search("autoscalr", k=2)[0].hits]
        job.close()
    assert found == {"char_ngrams": ["hpa"], "bm25s_stem": []}  # the misspelling only matches as n-grams


def test_the_package_passes_its_own_contract_tests() -> None:
    """Its tests/ (one call of plm.testing per stage), as its author would run them."""
    tests = REPO / "examples" / "plm-example-plugin" / "tests"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", str(tests)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert res.returncode == 0 and "3 passed" in res.stdout, res.stdout + res.stderr
