"""When an ingest is skipped and when it is not (fast: BM25-only and a tiny MiniLM job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm_core.errors import ConfigError, StoreError
from plm_core.settings import Settings
from plm_index.job import Job

REPO = Path(__file__).resolve().parents[2]
BM25 = REPO / "configs" / "experiments" / "bm25_stemmed.toml"
POC = REPO / "configs" / "poc_parity.toml"

PAGE = "---\ntitle: Alpha\nversion: {v}\n---\n# Alpha\n\n" + "Alpha clusters replicate data nightly. " * 20


def _docs(tmp_path: Path, version: int) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "alpha.md").write_text(PAGE.format(v=version))
    (docs / "beta.md").write_text("# Beta\n\n" + "Beta tokens expire after one hour. " * 20)
    return docs


def _job(config: Path, tmp_path: Path, overrides: list[str] = ()) -> Job:
    return Job.from_config(config, overrides, index_dir=tmp_path / "index", settings=Settings(progress=False))


def test_unchanged_files_skip_and_metadata_changes_do_not(tmp_path: Path) -> None:
    docs = _docs(tmp_path, 1)
    assert not _job(BM25, tmp_path).ingest([docs]).skipped
    assert _job(BM25, tmp_path).ingest([docs]).skipped
    _docs(tmp_path, 2)  # only front matter changes: chunk metadata must follow
    job = _job(BM25, tmp_path)
    assert not job.ingest([docs]).skipped
    hits = job.retrieve("alpha clusters", k=1)
    assert hits[0].metadata["version"] == 2


def test_force_recomputes_through_the_cache(tmp_path: Path) -> None:
    docs = _docs(tmp_path, 1)
    overrides = ['index.keywords.use="yake"']
    first = _job(BM25, tmp_path, overrides).ingest([docs])
    again = _job(BM25, tmp_path, overrides).ingest([docs], force=True)
    assert first.work["keywords"]["computed"] == 2 and again.work["keywords"] == {"computed": 2, "cached": 0}


@pytest.mark.slow
def test_vectors_from_another_model_are_never_used(tmp_path: Path) -> None:
    docs = _docs(tmp_path, 1)
    overrides = ["index.entities.use=yake"]  # spaCy is slow and beside the point here
    job = _job(POC, tmp_path, overrides)
    job.ingest([docs])
    job.store.set_meta("model", "some-other-model")  # as if indexed by another embedder
    fresh = _job(POC, tmp_path, overrides)
    with pytest.raises(StoreError, match="some-other-model"):
        fresh.retrieve("alpha", k=1)
    assert not _job(POC, tmp_path, overrides).ingest([docs]).skipped  # re-embeds instead of skipping


def test_fuser_weights_must_name_the_retrievers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown \\['lexical'\\]"):
        _job(POC, tmp_path, ["query.retrieve.fuser.default.weights.lexical=1.0"])
