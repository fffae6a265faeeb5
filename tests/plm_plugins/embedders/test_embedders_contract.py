"""The sentence-transformers embedder keeps the embedders contract
(`plm.testing.check_embedder`) with the packaged all-MiniLM-L6-v2, offline, on torch and,
where onnxruntime is installed, on ONNX."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import plm
import plm.testing
from plm_core.settings import Settings


@pytest.mark.slow  # loads MiniLM (torch)
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_sentence_transformers_keeps_the_contract(backend: str, minilm_path: str, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    if backend == "onnx" and importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("needs onnxruntime: pip install 'plm[onnx]'")
    cls = plm.default_registry().get("sentence_transformers", "embedders").cls
    settings = Settings(offline=True, device="cpu", data_dir=str(tmp_path))
    plm.testing.check_embedder(cls(model="all-MiniLM-L6-v2", backend=backend, settings=settings))
