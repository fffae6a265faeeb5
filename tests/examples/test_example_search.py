"""A third-party retriever and reranker (examples/plm-example-search), each one file plus an
entry point, installed from their own package into a fresh folder and used from TOML: bm25
and the new retriever fused by `rrf` with no fuser keys, then the new reranker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "examples" / "plm-example-search"
DOCS = REPO / "examples" / "sample_corpus" / "docs"

CONFIG = """
[job]
name = "third_party"

[index.load]
use = "markdown_dir"

[index.chunk]
use = "markdown_semantic"

[query.retrieve]
use = "hybrid"

[query.retrieve.retrievers.bm25]
use = "bm25s"

[query.retrieve.retrievers.overlap]
use = "word_overlap"

[query.retrieve.fuser]
use = "rrf"

[query.rerank]
use = "title_boost"
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The package built and installed (not editable) into its own folder, as pip would
    for a user, and an environment whose plm sees it."""
    tmp = tmp_path_factory.mktemp("third_party")
    target = tmp / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    res = subprocess.run(
        [*cmd, "--target", str(target), str(PACKAGE)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert res.returncode == 0, res.stderr
    assert (target / "plm_example_search" / "word_overlap.py").is_file()  # a copy, not a link to the repo
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]),
        "PLM_DATA_DIR": str(tmp / "data"),
        "PLM_PROGRESS": "0",
        "PLM_DISABLE_PLUGIN_AUTOLOAD": "",
    }
    config = tmp / "third_party.toml"
    config.write_text(CONFIG)
    return {"env": env, "config": config, "tmp": tmp}


def plm(installed: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plm_index.cli", *args],
        capture_output=True,
        text=True,
        env=installed["env"],
        cwd=installed["tmp"],
        timeout=300,
    )


def test_the_installed_stages_are_listed_with_their_package(installed: dict[str, Any]) -> None:
    res = plm(installed, "plugins", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["word_overlap"]["family"] == "retrievers" and rows["title_boost"]["family"] == "rerankers"
    assert rows["word_overlap"]["package"] == rows["title_boost"]["package"] == "plm-example-search"


def test_fused_with_bm25_by_rrf_with_no_fuser_keys_then_reranked(installed: dict[str, Any]) -> None:
    config = str(installed["config"])
    res = plm(installed, "config", "check", config)
    assert res.returncode == 0, res.stdout + res.stderr
    res = plm(installed, "ingest", str(DOCS), "--config", config)
    assert res.returncode == 0, res.stdout + res.stderr
    # the new retriever's build was saved by the runtime under its own folder
    (folder,) = (installed["tmp"] / "data" / "third_party").glob("word_overlap-*")
    assert [p.name[:2] for p in folder.iterdir()] == ["v1"]

    res = plm(installed, "query", "alerting rules", "--config", config, "-k", "5", "--json")
    assert res.returncode == 0, res.stderr
    assert "rebuilt in memory" not in res.stderr  # a new process opened the saved build
    hits = json.loads(res.stdout)["hits"]
    assert len(hits) == 5 and hits[0]["doc_id"] == "alerting"
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
    top = hits[0]["sources"]
    # both retrievers found it, rrf fused them (the rank before reranking), the reranker moved it
    assert {"bm25", "overlap", "fused", "rerank"} <= set(top)
    assert top["rerank"]["score"] > top["fused"]["score"]  # the title words were added


def test_the_installed_package_passes_its_own_contract_tests(installed: dict[str, Any]) -> None:
    """Its tests/ (one call of plm.testing per stage), run against the installed copy."""
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", str(PACKAGE / "tests")],
        capture_output=True,
        text=True,
        env=installed["env"],
        cwd=installed["tmp"],
        timeout=300,
    )
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr
