"""backend = "onnx": the transformer exported once into the data folder and run by ONNX
Runtime, with a tiny BERT sentence-transformer built here (and MiniLM where installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from plm_core.errors import MissingDependencyError, PlmUserError
from plm_core.settings import Settings
from plm_index.cache import CachedEmbedder, open_cache
from plm_plugins.embedders import onnx_backend
from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder

# find_spec, not importorskip: importing sentence-transformers at collection costs every
# run of the suite seconds of torch import, selected tests or not.
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("sentence_transformers", "onnxruntime")),
    reason="needs sentence-transformers and onnxruntime: pip install 'plm[onnx]'",
)

WORDS = "the a pod node deploy scale cluster service volume secret gold cat dog runs fast slow".split()
TEXTS = ["the pod runs", "scale the cluster fast " * 30, "gold", "a dog and a cat", "secret volume service node"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local sentence-transformers folder: a random 2-layer BERT, mean pooling."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-bert")
    hf = folder / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizer.from_pretrained(str(hf), model_max_length=128)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(hf))
    tokenizer.save_pretrained(str(hf))
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(hf), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(folder / "st"))
    return str(folder / "st")


def _embedder(model: str, data_dir: Path, **config: Any) -> SentenceTransformerEmbedder:
    settings = Settings(offline=True, device="cpu", data_dir=str(data_dir), progress=False)
    return SentenceTransformerEmbedder(model=model, settings=settings, **config)


def test_onnx_vectors_equal_torch_and_the_export_happens_once(tiny_model: str, tmp_path: Path) -> None:
    torch_vectors = _embedder(tiny_model, tmp_path).embed(TEXTS)
    first = _embedder(tiny_model, tmp_path, backend="onnx")
    vectors = first.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == torch_vectors.shape
    assert np.abs(vectors - torch_vectors).max() < 1e-5
    assert np.abs(first.embed_query(TEXTS[2]) - torch_vectors[2]).max() < 1e-5
    # the transformer really is ONNX Runtime's, not torch's
    assert type(first._model[0].model).__name__ == "OnnxTransformer"
    exported = sorted((tmp_path / "models" / "onnx").glob("*/model.onnx"))
    assert len(exported) == 1
    stamp = exported[0].stat().st_mtime_ns
    again = _embedder(tiny_model, tmp_path, backend="onnx")
    again.ensure_warm()  # the full path (unwarmed, documents take the torch-free one: below)
    assert np.array_equal(again.embed(TEXTS), vectors)
    assert exported[0].stat().st_mtime_ns == stamp  # loaded, not exported again
    assert not list(exported[0].parent.glob(".*.tmp"))


def test_int8_is_smaller_and_close(tiny_model: str, tmp_path: Path) -> None:
    fp32 = _embedder(tiny_model, tmp_path, backend="onnx").embed(TEXTS)
    int8 = _embedder(tiny_model, tmp_path, backend="onnx", quantize="int8").embed(TEXTS)
    folder = next((tmp_path / "models" / "onnx").iterdir())
    assert (folder / "model_int8.onnx").stat().st_size < (folder / "model.onnx").stat().st_size
    assert not np.array_equal(int8, fp32)  # quantised arithmetic, not the fp32 model again
    cosine = (int8 * fp32).sum(1) / (np.linalg.norm(int8, axis=1) * np.linalg.norm(fp32, axis=1))
    assert cosine.min() > 0.95


def test_a_failed_export_leaves_nothing_to_load(
    tiny_model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(model: Any, target: Path) -> None:
        target.write_bytes(b"half a model")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr(onnx_backend, "_export", crash)
    with pytest.raises(PlmUserError, match="exporting the model failed.*killed mid-export"):
        _embedder(tiny_model, tmp_path, backend="onnx").ensure_warm()
    assert not [p for p in (tmp_path / "models").rglob("*") if p.is_file()]
    monkeypatch.undo()
    assert _embedder(tiny_model, tmp_path, backend="onnx").embed(["gold"]).shape == (1, 32)


def test_backends_never_share_cached_vectors(tiny_model: str, tmp_path: Path) -> None:
    cache = open_cache(tmp_path)
    torch_side = CachedEmbedder(_embedder(tiny_model, tmp_path), cache)
    torch_side.embed(TEXTS)
    onnx_side = CachedEmbedder(_embedder(tiny_model, tmp_path, backend="onnx", quantize="int8"), cache)
    onnx_side.embed(TEXTS)
    assert onnx_side.cached == 0 and onnx_side.computed == len(TEXTS)


def test_bad_settings_and_missing_runtime(tiny_model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="needs backend"):
        _embedder(tiny_model, tmp_path, quantize="int8")
    with pytest.raises(ValidationError):
        _embedder(tiny_model, tmp_path, backend="tensorrt")
    with pytest.raises(ValidationError, match="runs on the CPU"):
        _embedder(tiny_model, tmp_path, backend="onnx", device="cuda")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"plm\[onnx\]"):
        _embedder(tiny_model, tmp_path, backend="onnx").ensure_warm()


@pytest.mark.slow
def test_minilm_onnx_matches_torch(minilm_path: str, tmp_path: Path) -> None:
    texts = ["How do I scale a deployment?", "kubectl scale", "pods " * 400]
    torch_vectors = _embedder(minilm_path, tmp_path).embed(texts)
    onnx_vectors = _embedder(minilm_path, tmp_path, backend="onnx").embed(texts)
    assert np.abs(onnx_vectors - torch_vectors).max() < 1e-5


def test_queries_need_no_torch_once_exported_and_match_the_full_path(tiny_model: str, tmp_path: Path) -> None:
    full = _embedder(tiny_model, tmp_path, backend="onnx")
    full.ensure_warm()  # exports the model, then embeds through sentence-transformers
    expected = [full.embed_query(t) for t in TEXTS]
    light = _embedder(tiny_model, tmp_path, backend="onnx")
    assert light._light_encoder() is not None
    got = [light.embed_query(t) for t in TEXTS]  # the long one is cut at max_seq_length, as above
    assert not light._warm and light.model_name == full.model_name  # no model was loaded
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_allclose(have, want, atol=1e-5)
    # not exported yet (another data folder): the full path, which exports
    fresh = _embedder(tiny_model, tmp_path / "other", backend="onnx")
    assert fresh._light_encoder() is None
    np.testing.assert_allclose(fresh.embed_query(TEXTS[0]), expected[0], atol=1e-5)
    assert fresh._warm


@pytest.mark.parametrize("batch_size", [1, 2, 32])
def test_documents_need_no_torch_once_exported_and_match_the_full_path(
    tiny_model: str, tmp_path: Path, batch_size: int
) -> None:
    """The same length-sorted batches, padding and pooling as sentence-transformers' encode,
    through the same export: vectors within 1e-6 (issue 46 item 1), in the input's order."""
    texts = [*TEXTS, "", "  the gold  ", TEXTS[1], "dog " * 100, "cat"]
    full = _embedder(tiny_model, tmp_path, backend="onnx", batch_size=batch_size)
    full.ensure_warm()
    expected = full.embed(texts)
    light = _embedder(tiny_model, tmp_path, backend="onnx", batch_size=batch_size)
    got = light.embed(texts)
    assert not light._warm and light.dimension == full.dimension == 32
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() < 1e-6
    assert light.embed([]).shape == (0, 32)


def _ingested_onnx_job(tiny_model: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A hybrid (dense + bm25) ONNX job over TEXTS, ingested by `plm ingest` in a subprocess
    (which exports the model): its config and the environment to run it in."""
    import json
    import os
    import subprocess
    import sys

    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(TEXTS):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\n{text}\n")
    config = tmp_path / "job.toml"
    config.write_text(
        f'[job]\nname = "cold"\n[embedder]\nuse = "sentence_transformers"\nmodel = {json.dumps(tiny_model)}\n'
        'backend = "onnx"\n[index.load]\nuse = "markdown_dir"\n[index.chunk]\nuse = "markdown_semantic"\n'
        '[query.embed]\nuse = "embed_query"\n[query.retrieve]\nuse = "hybrid"\n'
        '[query.retrieve.retrievers.dense]\nuse = "dense"\n[query.retrieve.retrievers.bm25]\nuse = "bm25s"\n'
        '[query.retrieve.fuser]\nuse = "rrf"\n'
    )
    env = {**os.environ, "PLM_DATA_DIR": str(tmp_path / "data"), "PLM_PROGRESS": "0", "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "plm_index.cli"]
    res = subprocess.run([*cli, "ingest", str(docs), "-c", str(config)], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return config, env


@pytest.mark.slow
def test_a_cold_hybrid_query_imports_no_torch(tiny_model: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    config, env = _ingested_onnx_job(tiny_model, tmp_path)
    probe = (
        "import sys\nfrom plm_index.job import Job\n"
        f"hits = Job.from_config({str(config)!r}).retrieve('gold', k=2)\n"
        "print(hits[0].doc_id, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["d2", "False", "False"]


@pytest.mark.slow
def test_a_one_file_ingest_imports_no_torch(tiny_model: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    config, env = _ingested_onnx_job(tiny_model, tmp_path)
    new = tmp_path / "docs" / "new.md"
    new.write_text("# New\n\ngold cat runs\n")
    probe = (
        "import sys\nfrom plm_index import cli\n"
        f"sys.argv = ['plm', 'ingest', {str(new)!r}, '-c', {str(config)!r}]\n"
        "try:\n    cli.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules, file=sys.stderr)"
    )
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "added 1" in res.stdout and res.stderr.split()[-2:] == ["False", "False"], res.stdout + res.stderr


@pytest.mark.slow
def test_a_server_over_an_exported_model_is_ready_and_writes_without_torch(tiny_model: str, tmp_path: Path) -> None:
    """`plm serve` and `plm mcp` warm only what embedding needs: with the model exported, no
    torch, for queries and for written documents alike (issue 46: a first save cost a model load)."""
    import subprocess
    import sys

    pytest.importorskip("fastapi")
    config, env = _ingested_onnx_job(tiny_model, tmp_path)
    probe = f"""
import sys
from plm_core.records import Query
from plm_index.job import Job
from plm_serve.mcp_server import warm
from plm_serve.service import Service

warm(Job.from_config({str(config)!r})).close()
print("mcp", "torch" in sys.modules)
service = Service(Job.from_config({str(config)!r}))
service.start()
print("serve", service.search(Query(text="gold", k=1))[0][0].hits[0].doc_id, "torch" in sys.modules)
report = service.apply(lambda job: job.sync([{{"id": "d9", "text": "gold gold cat"}}]))
print("write", len(report.added), service.writer.embedder._warm, "torch" in sys.modules)
service.stop()
"""
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["mcp", "False", "serve", "d2", "False", "write", "1", "False", "False"], res.stdout
