"""End to end on the bundled sample corpus with the real POC config and MiniLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from plm_core.settings import Settings
from plm_eval.runner import run_job
from plm_index.job import Job

REPO = Path(__file__).resolve().parents[2]
POC = REPO / "configs" / "poc_parity.toml"
SAMPLE = REPO / "examples" / "sample_corpus"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def own_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A content cache of this module's own: the first ingest must compute (and time) every
    stage, the model's loading among them, whatever ran before in this process."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLM_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        yield


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("index")


@pytest.fixture(scope="module")
def report(index_dir: Path) -> dict:
    job = Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False))
    result = run_job(job)
    job.close()
    return result


def test_run_ingests_and_evaluates_sample(report: dict) -> None:
    assert report["ingest"]["documents"] == 40 and not report["ingest"]["skipped"]
    assert report["model"].startswith("all-MiniLM-L6-v2")
    timings = report["ingest"]["timings_s"]
    for stage in ("read", "chunk", "keywords", "entities", "enrich", "load model", "embed", "store"):
        assert stage in timings
    assert sum(timings.values()) == pytest.approx(report["ingest"]["seconds"], abs=0.01)
    (test_set,) = report["sets"]
    assert test_set["queries"] == 30
    # The sample questions are written against single pages; a working hybrid finds most.
    assert test_set["metrics"]["Hit@5"] >= 0.7
    assert 0 < test_set["metrics"]["nDCG@10"] <= 1


def test_second_run_skips_ingest_and_gives_same_results(report: dict, index_dir: Path) -> None:
    job = Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False))
    again = run_job(job)
    assert again["ingest"]["skipped"]
    assert again["sets"][0]["metrics"] == report["sets"][0]["metrics"]


def test_new_process_queries_persisted_index_without_reembedding(report: dict, index_dir: Path) -> None:
    # A fresh interpreter opens the index and answers; embedding chunks there would be a bug.
    script = f"""
import json, sys
from plm_core.interfaces import Embedder
from plm_index.job import Job
from plm_core.settings import Settings
calls = []
import plm_plugins.embedders.sentence_transformers as st
orig = st.SentenceTransformerEmbedder.embed
def spy(self, texts, progress=False):
    calls.append(len(texts))
    return orig(self, texts, progress)
st.SentenceTransformerEmbedder.embed = spy
job = Job.from_config({str(POC)!r}, index_dir={str(index_dir)!r}, settings=Settings(progress=False))
hits = job.retrieve("What RPO do Vault snapshots give?", k=5)
print(json.dumps({{"calls": calls, "docs": [h.doc_id for h in hits]}}))
"""
    res = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert all(n <= 1 for n in out["calls"])  # only the query itself may be embedded
    assert len(out["docs"]) == 5


def test_hits_carry_sources_and_fields(report: dict, index_dir: Path) -> None:
    job = Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False))
    hits = job.retrieve("How long is a JWT valid before it expires?", k=5)
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]  # hits count from 1
    assert hits[0].doc_id == "jwt-authentication"
    assert all(h.text and h.chunk_id.startswith(h.doc_id) for h in hits)
    assert all(set(h.sources) <= {"dense", "bm25"} and h.sources for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_example_plugin_stage_changes_results(report: dict, index_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("plm_example_plugin", reason="pip install -e examples/plm-example-plugin (CI does)")
    text = (
        POC.read_text()
        .replace('dataset = "../examples/sample_corpus"', f'dataset = "{SAMPLE}"')
        .replace("[query.expand]", '[query.normalize]\nuse = "question_normalizer"\n\n[query.expand]', 1)
    )
    cfg = tmp_path / "with_plugin.toml"
    cfg.write_text(text)
    base = Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False))
    plugged = Job.from_config(cfg, index_dir=index_dir, settings=Settings(progress=False))
    assert [type(s).__name__ for s in plugged.query_stages][0] == "QuestionNormalizer"
    q = "How do I know what the purpose of the audit log is?"
    a = base.search(q, k=5)[0]
    b = plugged.search(q, k=5)[0]
    assert b.query.original != a.query.original
    assert [h.chunk_id for h in a.hits] != [h.chunk_id for h in b.hits] or a.hits[0].score != b.hits[0].score


def test_changing_a_retriever_setting_rebuilds_only_its_index(report: dict, index_dir: Path) -> None:
    overrides = ["query.retrieve.retrievers.bm25.tokenizer=bm25s_stem", "query.retrieve.retrievers.bm25.method=lucene"]
    job = Job.from_config(POC, overrides, index_dir=index_dir, settings=Settings(progress=False))
    again = run_job(job)
    assert again["ingest"]["skipped"]  # no re-chunking, re-enrichment or re-embedding
    assert "index:bm25" in again["ingest"]["timings_s"]
    assert (
        again["sets"][0]["metrics"] != report["sets"][0]["metrics"]
        or again["sets"][0]["per_query"] != report["sets"][0]["per_query"]
    )
    # and the original settings find their index stale again and rebuild it the same way
    back = run_job(Job.from_config(POC, index_dir=index_dir, settings=Settings(progress=False)))
    assert back["ingest"]["skipped"] and back["sets"][0]["metrics"] == report["sets"][0]["metrics"]


def test_cli_query_and_stats_read_the_persisted_index(report: dict, index_dir: Path) -> None:
    def plm(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PLM_PROGRESS": "0"}
        return subprocess.run(
            [sys.executable, "-m", "plm_index.cli", *args, "--config", str(POC), "--index", str(index_dir)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=REPO,
        )

    res = plm("query", "How long is a JWT valid before it expires?", "-k", "3", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    hits = json.loads(res.stdout)["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3] and hits[0]["doc_id"] == "jwt-authentication"
    res = plm("query", "How long is a JWT valid before it expires?", "-k", "2")
    assert res.returncode == 0 and "1. " in res.stdout and "jwt-authentication" in res.stdout
    res = plm("index", "stats")
    assert res.returncode == 0 and "chunks: 177" in res.stdout and "all-MiniLM-L6-v2" in res.stdout
