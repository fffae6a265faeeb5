"""GLiNER entities, end to end on a tiny untrained model built here (no downloads)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from plm_core.errors import ModelNotFoundError
from plm_core.records import Chunk
from plm_core.registry import Registry
from plm_plugins.enrichers import gliner_entities
from plm_plugins.enrichers.gliner_entities import DEFAULT_LABELS, GlinerEntityExtractor

TEXT = "Google runs the Kubernetes control plane in Paris and London, and Ann runs the API server."
LABELS = ["organization", "location", "person"]


@pytest.fixture(scope="module")
def tiny_gliner(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A GLiNER on a 1-layer, 32-wide BERT with a 30-word vocabulary, saved to a folder."""
    pytest.importorskip("gliner")
    torch = pytest.importorskip("torch")
    from gliner import GLiNER, GLiNERConfig
    from transformers import BertConfig, BertModel, BertTokenizer

    root = tmp_path_factory.mktemp("gliner")
    bert = root / "bert"
    bert.mkdir()
    words = "the a runs in and google kubernetes control plane paris london ann api server".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s", ".", ","]
    (bert / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(bert / "vocab.txt")).save_pretrained(bert)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(bert)
    model = GLiNER.from_config(
        GLiNERConfig(model_name=str(bert), hidden_size=32, max_width=4, max_len=64, dropout=0.0),
        backbone_from_pretrained=True,
    )
    model.save_pretrained(root / "model")
    return str(root / "model")


def test_defaults() -> None:
    cfg = GlinerEntityExtractor().config
    assert cfg.model == "urchade/gliner_multi-v2.1"
    assert cfg.labels == DEFAULT_LABELS and cfg.labels[:4] == ["organization", "product", "location", "person"]
    assert (cfg.threshold, cfg.batch_size, cfg.max_per_label, cfg.device) == (0.5, 8, 5, "cpu")


def test_runs_end_to_end_with_the_spacy_shape(tiny_gliner: str) -> None:
    # An untrained model scores every span near 0.5; threshold 0 makes it return some.
    ex = GlinerEntityExtractor(model=tiny_gliner, labels=LABELS, threshold=0.0, max_per_label=2, batch_size=2)
    chunks = [
        Chunk(id="a", doc_id="d", text=TEXT),
        Chunk(id="b", doc_id="d", text="too short"),
        Chunk(id="c", doc_id="d", text=TEXT.upper()),
    ]
    out = ex.run(chunks)
    assert [c.id for c in out] == ["a", "b", "c"]
    assert out[1].entities == {}
    ents = out[0].entities
    assert ents and set(ents) <= set(LABELS)
    for values in ents.values():
        assert isinstance(values, tuple) and 1 <= len(values) <= 2
        assert len(set(values)) == len(values)
        assert all(isinstance(v, str) and v in TEXT for v in values)
    # Labels come in the order their first value appears in the text.
    firsts = [TEXT.index(values[0]) for values in ents.values()]
    assert firsts == sorted(firsts)


def test_missing_hub_model_fails_fast_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ex = GlinerEntityExtractor(model="no-such-org/no-such-gliner")
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="no-such-org/no-such-gliner") as info:
        ex.run([Chunk(id="a", doc_id="d", text=TEXT)])
    assert time.perf_counter() - start < 5
    assert "offline" in str(info.value)


def test_missing_local_folder_fails_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = str(tmp_path / "nope")
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="nope"):
        GlinerEntityExtractor(model=missing).warm_up()
    assert time.perf_counter() - start < 5


def test_plm_offline_setting_skips_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    ex = GlinerEntityExtractor(model="no-such-org/no-such-gliner", settings=SimpleNamespace(offline=True))
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError, match="skipped"):
        ex.warm_up()
    assert time.perf_counter() - start < 5


def test_registers_as_gliner_entities() -> None:
    registry = Registry()
    gliner_entities.plm_register_components(registry=registry)
    assert registry.get("gliner_entities").cls is GlinerEntityExtractor


def test_keeps_the_enrichers_contract(tiny_gliner: str) -> None:
    import plm.testing

    ex = GlinerEntityExtractor(model=tiny_gliner, labels=LABELS, threshold=0.0, max_per_label=2, batch_size=2)
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i // 2}", text=t) for i, t in enumerate([TEXT, "too short", TEXT.upper()])]
    plm.testing.check_chunk_transform(ex, [*chunks, Chunk(id="again", doc_id="d9", text=TEXT)])
