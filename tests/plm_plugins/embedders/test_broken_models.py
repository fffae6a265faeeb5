"""A model is refused unless it can tokenize: a folder without its tokenizer files (which
transformers loads as a tokenizer of five special tokens, so that every text gets the same
vector) is an error naming the folder and the files, on the torch path and the ONNX one."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from plm_core.errors import ModelNotFoundError, PlmUserError
from plm_core.settings import Settings
from plm_plugins.embedders import onnx_backend
from plm_plugins.embedders.sentence_transformers import SentenceTransformerEmbedder

pytest.importorskip("sentence_transformers")

WORDS = "the a cat dog run over river bank pod node deploy scale cluster".split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local sentence-transformers folder: a random 2-layer BERT, mean pooling."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    hf = folder / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text("\n".join([*SPECIALS, *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(str(hf / "vocab.txt"), model_max_length=128)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(hf))
    tokenizer.save_pretrained(str(hf))
    transformer = Transformer(str(hf), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(folder / "st"))
    assert (folder / "st" / "tokenizer.json").is_file()
    return folder / "st"


def copy_of(model: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(model, target)
    return target


def load(model: Path, tmp_path: Path) -> SentenceTransformerEmbedder:
    settings = Settings(offline=True, device="cpu", data_dir=str(tmp_path / "data"), progress=False)
    embedder = SentenceTransformerEmbedder(model=str(model), settings=settings)
    embedder.warm_up()
    return embedder


def test_a_sound_tiny_model_loads_and_tells_texts_apart(tiny_model: Path, tmp_path: Path) -> None:
    vectors = load(tiny_model, tmp_path).embed(["the cat", "river bank deploy"])
    assert float(abs(vectors[0] - vectors[1]).max()) > 1e-3


@pytest.mark.parametrize(
    "damage",
    ["no tokenizer files", "vocab of special tokens only", "vocab of one word", "empty vocab"],
)
def test_a_model_that_cannot_tokenize_is_refused(tiny_model: Path, tmp_path: Path, damage: str) -> None:
    model = copy_of(tiny_model, tmp_path)
    for name in TOKENIZER_FILES:
        (model / name).unlink(missing_ok=True)
    if damage == "vocab of special tokens only":
        (model / "vocab.txt").write_text("\n".join(SPECIALS) + "\n")
    elif damage == "empty vocab":
        (model / "vocab.txt").write_text("")
    elif damage == "vocab of one word":
        (model / "vocab.txt").write_text("\n".join([*SPECIALS, "the"]) + "\n")
    with pytest.raises(ModelNotFoundError) as caught:
        load(model, tmp_path)
    message = str(caught.value)
    assert f"the model in {model} cannot tokenize" in message
    assert "tokenizer.json" in message and "vocab.txt" in message and "download it again" in message


def _onnx_load(model: Path) -> object:
    # The tokenizer is checked before the export is opened: no export is needed to see it refused.
    return onnx_backend.Encoder.load(model, model / "no-export.onnx", None, 1)


def test_the_onnx_query_encoder_refuses_a_damaged_tokenizer_json(tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    model = copy_of(tiny_model, tmp_path)
    (model / "tokenizer.json").write_text('{"version": "1.0", "model": ')
    with pytest.raises(PlmUserError, match=r"tokenizer\.json is damaged"):
        _onnx_load(model)
    spec = json.loads((tiny_model / "tokenizer.json").read_text())
    spec["model"]["vocab"] = {t: i for i, t in enumerate(SPECIALS)}
    (model / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(PlmUserError, match="cannot tokenize: its tokenizer holds only 5 special tokens"):
        _onnx_load(model)
    spec["model"]["vocab"] = {t: i for i, t in enumerate([*SPECIALS, *WORDS])}
    (model / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(Exception) as opened:  # the tokenizer passes; the (missing) export is opened next
        _onnx_load(model)
    assert "cannot tokenize" not in str(opened.value)


TEXTS = ["the cat", "river bank deploy", "a dog runs over the node"]


def onnx_embedder(model: Path, data: Path) -> SentenceTransformerEmbedder:
    settings = Settings(offline=True, device="cpu", data_dir=str(data), progress=False)
    return SentenceTransformerEmbedder(model=str(model), backend="onnx", settings=settings)


def damage(path: Path, how: str) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 3] if how == "truncated" else bytes(b ^ 0x5A for b in raw[:4096]) + raw[4096:])


@pytest.mark.parametrize("how", ["truncated", "garbled"])
def test_a_damaged_onnx_export_is_exported_again_with_a_warning(
    tiny_model: Path, tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("onnxruntime")
    import numpy as np

    data = tmp_path / "data"
    first = onnx_embedder(tiny_model, data)
    want, want_query = first.embed(TEXTS), first.embed_query("the cat")
    (export,) = (data / "models" / "onnx").glob("*/model.onnx")
    size = export.stat().st_size

    damage(export, how)
    with pytest.raises(onnx_backend.DamagedExportError, match=f"exported model {export} is damaged"):
        onnx_backend.session_for(export, 1)
    with caplog.at_level(logging.WARNING):
        query = onnx_embedder(tiny_model, data).embed_query("the cat")  # the torch-free path meets it first
    assert np.allclose(query, want_query, atol=1e-5)
    assert any(
        f"{export} is damaged" in r.getMessage() and "exporting it again" in r.getMessage() for r in caplog.records
    )
    assert export.stat().st_size == size
    onnx_backend.session_for(export, 1)  # sound again

    damage(export, how)
    assert np.allclose(onnx_embedder(tiny_model, data).embed(TEXTS), want, atol=1e-5)  # the ingest path too
    onnx_backend.session_for(export, 1)
