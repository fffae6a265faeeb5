from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from plm_core.component import ComponentConfig
from plm_core.interfaces import ChunkTransform, Embedder
from plm_core.records import Chunk
from plm_index.cache import CachedEmbedder, CachedStage, SQLiteContentCache, content_key, stage_identity


class CountingKeywords(ChunkTransform):
    name = "counting"
    cache_fields = ("keywords",)

    class Config(ComponentConfig):
        upper: bool = False

    calls: list[int] = []

    def run(self, data: list[Chunk]) -> list[Chunk]:
        type(self).calls.append(len(data))
        return [
            replace(c, keywords=tuple((w.upper() if self.config.upper else w) for w in c.text.split())) for c in data
        ]


def _chunks(*texts: str) -> list[Chunk]:
    return [Chunk(id=f"c{i}", doc_id="d", text=t) for i, t in enumerate(texts)]


def test_only_uncached_texts_reach_the_stage(tmp_path) -> None:
    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    CountingKeywords.calls = []
    stage = CachedStage(CountingKeywords(), "counting", cache)
    first = stage.run(_chunks("a b", "c d"))
    second = stage.run(_chunks("a b", "e f", "c d"))
    assert CountingKeywords.calls == [2, 1]
    assert (stage.hits, stage.misses) == (2, 3)
    assert [c.keywords for c in second] == [("a", "b"), ("e", "f"), ("c", "d")]
    assert [c.id for c in second] == ["c0", "c1", "c2"]  # cached fields land on the new chunk
    assert first[0].keywords == second[0].keywords


def test_different_settings_do_not_share_entries(tmp_path) -> None:
    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    CountingKeywords.calls = []
    CachedStage(CountingKeywords(), "counting", cache).run(_chunks("a b"))
    out = CachedStage(CountingKeywords(upper=True), "counting", cache).run(_chunks("a b"))
    assert CountingKeywords.calls == [1, 1] and out[0].keywords == ("A", "B")


def test_keys_depend_on_identity_and_text() -> None:
    ident = stage_identity("x", CountingKeywords.Config())
    assert content_key(ident, "t") == content_key(ident, "t")
    assert content_key(ident, "t") != content_key(ident, "u")
    assert content_key(ident, "t") != content_key(stage_identity("x", CountingKeywords.Config(upper=True)), "t")


def test_cache_persists_across_processes_opening_it(tmp_path) -> None:
    SQLiteContentCache(tmp_path / "c.sqlite").put_many([("k", b"v")])
    assert SQLiteContentCache(tmp_path / "c.sqlite").get_many(["k", "missing"]) == {"k": b"v"}


class ToyEmbedder(Embedder):
    """Three-dimensional vectors from letter counts; counts its calls."""

    name = "toy"

    class Config(ComponentConfig):
        pass

    texts: list[str] = []

    @property
    def model_name(self) -> str:
        return "toy"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        import numpy as np

        type(self).texts.extend(texts)
        return np.array([[t.count("a"), t.count("b"), len(t)] for t in texts], dtype=np.float32)


def test_cached_vectors_of_the_wrong_size_are_recomputed_not_returned(tmp_path) -> None:
    import numpy as np

    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    embedder = CachedEmbedder(ToyEmbedder(), cache)
    texts = ["aab", "bbb", "ab"]
    first = embedder.embed(texts)
    # Damage: every cached vector replaced by 100 float32s (what another model or a bad
    # write could leave under the same key).
    cache.db.execute("UPDATE cache SET value = ?", (np.zeros(100, dtype=np.float32).tobytes(),))
    ToyEmbedder.texts.clear()
    again = CachedEmbedder(ToyEmbedder(), cache).embed(texts)
    assert again.shape == (3, 3) and np.array_equal(again, first)
    assert [t for t in ToyEmbedder.texts if t != "size probe"] == texts  # recomputed, and the cache repaired
    ToyEmbedder.texts.clear()
    assert np.array_equal(CachedEmbedder(ToyEmbedder(), cache).embed(texts), first)
    assert [t for t in ToyEmbedder.texts if t != "size probe"] == []


def test_a_long_embedding_without_a_terminal_says_what_it_does_first(tmp_path, capsys, monkeypatch) -> None:
    """In a log or a pipe the model's bar is not shown: one line before the call says how
    many chunks it embeds, so a minute of silence has a reason; with a bar, no line."""
    from plm_index import cache as cache_module

    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    CachedEmbedder(ToyEmbedder(), cache).embed(["ab"])
    CachedEmbedder(ToyEmbedder(), cache).embed(["ab", "abb", "bbb"], progress=True)
    assert capsys.readouterr().err == "embed: 2 chunks in one call, 1 from the cache\n"
    monkeypatch.setattr(cache_module, "on_terminal", lambda: True)
    CachedEmbedder(ToyEmbedder(), cache).embed(["aaa"], progress=True)
    assert "embed:" not in capsys.readouterr().err
