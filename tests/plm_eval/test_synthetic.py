"""`plm eval --synthetic N`: queries made from the corpus, saved as a query set with qrels,
evaluated on a corpus whose indexed text holds no copy of any query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plm.synthetic import found_in
from plm_core.config import load_job
from plm_core.settings import Settings
from plm_eval import synthetic
from plm_eval.dataset import load_query_set
from plm_eval.eval_command import run_configs
from plm_index.job import Job
from plm_index.plugins import default_registry

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "configs" / "experiments"
DOCS = REPO / "examples" / "sample_corpus" / "docs"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("synthetic")
    registry = default_registry()
    cfg = load_job(EXPERIMENTS / "bm25_stemmed.toml", registry)
    settings = Settings(data_dir=str(tmp / "data"), progress=False)
    return synthetic.build(cfg, DOCS, tmp / "set", 30, synthetic.DEFAULT_GENERATORS, registry, settings, seed=3)


def test_the_set_is_a_beir_folder_with_qrels_and_says_how_it_was_made(made: tuple[Path, dict]) -> None:
    folder, summary = made
    qset = load_query_set(folder, synthetic.SET_NAME)
    assert len(qset.queries) == summary["queries"] == 30
    assert all(len(rel) == 1 for rel in qset.qrels.values())
    assert len({next(iter(rel)) for rel in qset.qrels.values()}) == 30  # one query per target document
    about = json.loads((folder / "synthetic.json").read_text())
    assert about["seed"] == 3 and set(about["by_generator"]) <= set(synthetic.DEFAULT_GENERATORS)
    assert "synthetic judgments" in about["how"]


def test_the_same_seed_makes_the_same_set(made: tuple[Path, dict], tmp_path: Path) -> None:
    registry = default_registry()
    cfg = load_job(EXPERIMENTS / "bm25_stemmed.toml", registry)
    settings = Settings(data_dir=str(tmp_path / "data"), progress=False)
    again, _ = synthetic.build(cfg, DOCS, tmp_path / "set", 30, synthetic.DEFAULT_GENERATORS, registry, settings, 3)
    for name in ("queries/synthetic.jsonl", "qrels/synthetic.tsv", "corpus.jsonl"):
        assert (again / name).read_text() == (made[0] / name).read_text()


def test_no_query_is_in_the_indexed_text_of_its_target(made: tuple[Path, dict], tmp_path: Path) -> None:
    """The leakage test on what is really indexed: the chunks' index text after an ingest of
    the synthetic corpus with the recipe's own chunker, as `plm eval --synthetic` runs it."""
    folder, _ = made
    registry = default_registry()
    cfg = load_job(EXPERIMENTS / "bm25_stemmed.toml", registry, [synthetic.LOADER_OVERRIDE])
    job = Job(cfg, tmp_path / "index", Settings(data_dir=str(tmp_path / "data"), progress=False), registry)
    try:
        job.ingest([str(folder / "corpus.jsonl")])
        by_doc: dict[str, list[str]] = {}
        for chunk in job.store.chunks():
            by_doc.setdefault(chunk.doc_id, []).append(chunk.index_text + "\n" + " ".join(chunk.heading_path))
    finally:
        job.close()
    qset = load_query_set(folder, synthetic.SET_NAME)
    assert set(by_doc) >= {next(iter(r)) for r in qset.qrels.values()}
    for qid, text in qset.queries.items():
        target = next(iter(qset.qrels[qid]))
        assert not any(found_in(text, t) for t in by_doc[target]), (qid, text, target)
        assert not any(found_in(text, t) for texts in by_doc.values() for t in texts), (qid, text)


def test_eval_runs_on_the_synthetic_set_like_a_judged_one(made: tuple[Path, dict], tmp_path: Path) -> None:
    folder, _ = made
    runs = run_configs(
        [EXPERIMENTS / "bm25_stemmed.toml", EXPERIMENTS / "bm25_whitespace.toml"],
        folder,
        "corpus.jsonl",
        [synthetic.SET_NAME],
        [synthetic.LOADER_OVERRIDE],
        settings=Settings(data_dir=str(tmp_path / "data"), progress=False),
    )
    for _, run in runs:
        (s,) = run["sets"]
        assert s["set"] == "synthetic" and len(s["per_query"]) == 30
        assert 0.2 < s["metrics"]["nDCG@10"] <= 1.0


def test_the_command_says_the_judgments_are_synthetic(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp_path / "data")}
    out = tmp_path / "report"
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "eval", "-c", str(EXPERIMENTS / "bm25_stemmed.toml"),
         "-c", str(EXPERIMENTS / "bm25_whitespace.toml"), "--synthetic", "12", "--no-chart",
         "--resamples", "200", "--bootstrap", "200", "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=180,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr + res.stdout
    assert "synthetic judgments: 12 queries" in " ".join(res.stdout.split())
    assert "**Synthetic judgments**: 12 queries" in (out / "report.md").read_text()
    assert "synthetic choice: bm25_" in " ".join(res.stdout.split())
    assert "Synthetic choice: bm25_" in (out / "report.md").read_text()
    assert json.loads((out / "summary.json").read_text())["judgments"]["queries"] == 12
    assert (out / "synthetic" / "qrels" / "synthetic.tsv").is_file()
    bad = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "eval", "-c", str(EXPERIMENTS / "bm25_stemmed.toml"),
         "--synthetic", "5", "--queries", "test", "--out", str(tmp_path / "r2")],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=180,
    )  # fmt: skip
    assert bad.returncode != 0 and "leave out --queries" in bad.stdout + bad.stderr


def test_tune_on_synthetic_queries_writes_a_config_for_the_real_corpus(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "PLM_DATA_DIR": str(tmp_path / "data")}
    tuned = tmp_path / "tune" / "t.toml"
    res = subprocess.run(
        [sys.executable, "-m", "plm_index.cli", "tune", "-c", str(EXPERIMENTS / "bm25_stemmed.toml"),
         "-p", "query.retrieve.retrievers.bm25.k1=0.9,1.5", "--synthetic", "12", "--out", str(tuned)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=180,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr + res.stdout
    assert load_job(tuned, default_registry()).raw["index"]["load"] == {"use": "markdown_dir"}  # not the rewrite
    assert "synthetic judgments: 12 queries" in tuned.read_text()
    report = json.loads((tuned.parent / "tune.json").read_text())
    assert report["judgments"]["queries"] == 12 and report["tuning_set"] == "synthetic"
    assert (tuned.parent / "synthetic" / "qrels" / "synthetic.tsv").is_file()
