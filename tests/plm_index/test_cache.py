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


class BarEmbedder(ToyEmbedder):
    """An embedder that draws its own tqdm bar when asked for progress, as sentence-transformers does."""

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        import time

        from tqdm import tqdm

        for _ in tqdm(range(4), desc="Batches", disable=not progress):
            time.sleep(0.15)  # longer than tqdm's own 0.1 s between updates
        return super().embed(texts)


def test_the_models_bar_becomes_lines_in_a_log(tmp_path, capsys, monkeypatch) -> None:
    # in a log the bar would be one endless line of carriage returns: a line every interval, one at the end
    from plm_index import progress

    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", 0.08)
    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    CachedEmbedder(BarEmbedder(), cache).embed(["ab", "abb"], progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert lines[0] == "embed: 2 chunks in one call, 0 from the cache"
    assert all(line.startswith("embed: Batches: ") for line in lines[1:]) and len(lines) >= 3
    assert "4/4" in lines[-1] and sum("4/4" in line for line in lines) == 1  # the end, once


class Fallback(Embedder):
    """Expects model "a" (found without loading) but, once loaded, is "b": the first of a
    preference list failed to load. "a" gives 2 dimensions, "b" 3; `loaded` says which loads."""

    name = "toy_fallback"

    class Config(ComponentConfig):
        pass

    loaded = "b"

    @property
    def expected_model_name(self) -> str:
        return "a"

    @property
    def model_name(self) -> str:
        self.ensure_warm()
        return type(self).loaded

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        import numpy as np

        self.ensure_warm()
        dim = 2 if type(self).loaded == "a" else 3
        return np.array([[len(t) + 1.0] * dim for t in texts], dtype=np.float32)


def test_a_fallback_model_never_files_its_vectors_under_the_model_expected(tmp_path) -> None:
    import numpy as np

    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    Fallback.loaded = "a"
    a_vectors = CachedEmbedder(Fallback(), cache).embed(["t1"])  # the model expected: "a", 2 dims
    assert a_vectors.shape == (1, 2)
    # A cache written before the size was kept beside the vectors: sizing the cached vector
    # loads the model, and here that is the fallback "b", whose vectors must carry its name.
    cache.db.execute("DELETE FROM cache WHERE key = ?", (content_key(_identity("a"), "\0row bytes"),))
    Fallback.loaded = "b"
    mixed = CachedEmbedder(Fallback(), cache).embed(["t1", "t2"])
    assert mixed.shape == (2, 3)  # both from "b", none of "a"'s cached vectors
    Fallback.loaded = "a"
    again = CachedEmbedder(Fallback(), cache)
    assert np.array_equal(again.embed(["t1", "t2"]), np.array([[3.0, 3.0], [3.0, 3.0]], dtype=np.float32))
    assert again.computed == 1 and again.cached == 1  # t2 was never filed under "a"


def _identity(model: str) -> str:
    return stage_identity(f"embed:{model}:", Fallback.Config().model_dump(mode="json", exclude={"model"}))


def test_a_cache_whose_texts_are_all_there_loads_no_model_and_a_wrong_size_is_put_right(tmp_path) -> None:
    cache = SQLiteContentCache(tmp_path / "cache.sqlite")
    Fallback.loaded = "a"
    CachedEmbedder(Fallback(), cache).embed(["t1"])
    cold = Fallback()
    assert CachedEmbedder(cold, cache).embed(["t1"]).shape == (1, 2) and not cold.is_warm
    size_key = content_key(_identity("a"), "\0row bytes")
    cache.put_many([(size_key, b"12")])  # a wrong size: every cached vector looks damaged
    fixing = CachedEmbedder(Fallback(), cache)
    assert fixing.embed(["t1"]).shape == (1, 2) and fixing.computed == 1
    assert cache.get_many([size_key]) == {size_key: b"8"}  # written again from the vectors computed
    assert CachedEmbedder(Fallback(), cache).embed(["t1"]).shape == (1, 2)
