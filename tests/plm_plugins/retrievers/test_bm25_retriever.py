from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from plm_core.errors import StaleIndexError, StoreError
from plm_core.records import Chunk, ExpandedQuery

pytest.importorskip("bm25s")
from plm_plugins.retrievers.bm25s import BM25Retriever  # noqa: E402

TEXTS = [
    "the pod is pending because the node has no memory",
    "the node is ready and the pod runs",
    "a deployment manages replica sets of the pod",
    "the service routes traffic to the pod on the node",
    "configure the horizontal pod autoscaler for cpu utilization",
    "the the the node",
    "",
]


def _chunks(texts: list[str] = TEXTS) -> list[Chunk]:
    # index_text is the enriched text when there is one
    return [Chunk(id=f"c{i}", doc_id=f"d{i // 2}", text="raw", enriched=t) for i, t in enumerate(texts)]


def _built(tmp_path: Path, **config: object) -> BM25Retriever:
    retriever = BM25Retriever(**config)
    retriever.build(_chunks(), None, tmp_path)
    return retriever


def _q(text: str, k: int = 5) -> ExpandedQuery:
    return ExpandedQuery(text=text, k=k, original=text)


@pytest.mark.parametrize("query", ["the pod on the node", "memory pending", "the the pod pod", "unknown words"])
def test_scores_equal_rank_bm25_okapi_bit_for_bit(tmp_path: Path, query: str) -> None:
    rank_bm25 = pytest.importorskip("rank_bm25")
    reference = rank_bm25.BM25Okapi([t.lower().split() for t in TEXTS])
    expected = reference.get_scores(query.lower().split())
    retriever = _built(tmp_path)
    got = retriever.scores(query)
    assert got.dtype == np.float64
    assert np.array_equal(got, expected)  # "the"/"pod"/"node" have negative IDF: floored, not clipped
    hits = retriever.search(_q(query), 4)
    assert [h.chunk_id for h in hits] == [f"c{i}" for i in np.argsort(expected)[::-1][:4]]
    assert [h.rank for h in hits] == [0, 1, 2, 3] and {h.source for h in hits} == {"bm25"}


def test_negative_idf_floor_differs_from_robertson_clipping(tmp_path: Path) -> None:
    okapi = _built(tmp_path / "a")
    robertson = _built(tmp_path / "b", method="robertson")
    # "the" is in more than half the chunks: rank_bm25 gives it 0.25 x mean IDF, bm25s 0.
    assert okapi.scores("the").max() > 0
    assert robertson.scores("the").max() == 0


def test_save_load_mmap_round_trip(tmp_path: Path) -> None:
    built = _built(tmp_path)
    folder = built.index_path(tmp_path, "")
    assert folder.parent == tmp_path / "bm25_bm25"
    assert (folder / "params.index.json").is_file() and (folder / "plm_bm25.json").is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # temp folder renamed away
    loaded = BM25Retriever()
    loaded.load(tmp_path, [c.id for c in _chunks()], None)
    assert isinstance(loaded._retriever.scores["data"], np.memmap)
    for query in ["the pod on the node", "cpu autoscaler"]:
        assert np.array_equal(loaded.scores(query), built.scores(query))
        assert loaded.search(_q(query), 7) == built.search(_q(query), 7)
    assert loaded.index_matches(tmp_path, "")
    assert not loaded.index_matches(tmp_path, "s.1")
    assert not BM25Retriever(k1=1.2).index_matches(tmp_path, "")


def test_versions_stale_builds_and_cleanup(tmp_path: Path) -> None:
    first = BM25Retriever()
    first.build(_chunks(), None, tmp_path, "s.1")
    with pytest.raises(StaleIndexError, match="corpus version s.2"):
        BM25Retriever().load(tmp_path, [c.id for c in _chunks()], None, "s.2")
    with pytest.raises(StaleIndexError):  # same version, other settings
        BM25Retriever(k1=1.2).load(tmp_path, [c.id for c in _chunks()], None, "s.1")
    with pytest.raises(StaleIndexError):  # another store with the same counter
        BM25Retriever().load(tmp_path, [c.id for c in _chunks()], None, "t.1")
    BM25Retriever().build(_chunks(TEXTS[:3]), None, tmp_path, "s.2")
    builds = sorted(p.name for p in (tmp_path / "bm25_bm25").iterdir())
    assert len(builds) == 1 and builds[0].startswith("v2-")  # the older build was removed
    # a reader at an older version rebuilding never removes a newer build
    BM25Retriever().build(_chunks(), None, tmp_path, "s.1")
    assert len(list((tmp_path / "bm25_bm25").iterdir())) == 2
    BM25Retriever().load(tmp_path, [c.id for c in _chunks()[:3]], None, "s.2")
    with pytest.raises(StoreError, match="holds 3 chunks"):
        BM25Retriever().load(tmp_path, [c.id for c in _chunks()], None, "s.2")
    with pytest.raises(StaleIndexError):
        BM25Retriever().load(tmp_path / "nowhere", ["c0"], None, "s.2")


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove"])
def test_corrupt_files_are_detected(tmp_path: Path, damage: str) -> None:
    built = _built(tmp_path)
    folder = built.index_path(tmp_path, "")
    victim = max((p for p in folder.iterdir() if p.name != "plm_bm25.json"), key=lambda p: p.stat().st_size)
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        victim.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        victim.unlink()
    with pytest.raises(StoreError, match=r"corrupt.*plm index rebuild") as info:
        BM25Retriever().load(tmp_path, [c.id for c in _chunks()], None)
    assert not isinstance(info.value, StaleIndexError) and victim.name in str(info.value)
    BM25Retriever().build(_chunks(), None, tmp_path)  # a rebuild replaces the damaged build
    BM25Retriever().load(tmp_path, [c.id for c in _chunks()], None)


def test_k_larger_than_corpus_and_mask(tmp_path: Path) -> None:
    retriever = _built(tmp_path)
    hits = retriever.search(_q("pod"), 1000)
    assert len(hits) == len(TEXTS)  # zero-score chunks are kept, as in the POC
    assert hits[-1].score == 0.0
    allowed = np.array([i % 2 == 1 for i in range(len(TEXTS))])
    masked = retriever.search(_q("pod"), 1000, allowed=allowed)
    assert [h.chunk_id for h in masked] == [h.chunk_id for h in hits if int(h.chunk_id[1:]) % 2 == 1]
    assert [h.rank for h in masked] == list(range(len(masked)))
    dropped = _built(tmp_path / "z", drop_zero_scores=True).search(_q("memory"), 1000)
    assert [h.chunk_id for h in dropped] == ["c0"]


@pytest.mark.parametrize("method", ["robertson", "lucene", "atire", "bm25l", "bm25+"])
def test_bm25s_methods_build_save_and_load(tmp_path: Path, method: str) -> None:
    built = _built(tmp_path, method=method, dtype="float32")
    loaded = BM25Retriever(method=method, dtype="float32")
    loaded.load(tmp_path, [c.id for c in _chunks()], None)
    assert loaded.search(_q("pod memory"), 3) == built.search(_q("pod memory"), 3)
    assert built.search(_q("pod memory"), 1)[0].chunk_id == "c0"


def test_stemming_tokenizer(tmp_path: Path) -> None:
    retriever = _built(tmp_path, tokenizer="bm25s_stem")
    assert retriever.tokenize(["The Pods are running"]) == [["pod", "run"]]
    assert retriever.search(_q("Configuring autoscalers"), 1)[0].chunk_id == "c4"


def test_empty_corpus_vocabulary(tmp_path: Path) -> None:
    retriever = BM25Retriever()
    retriever.build(_chunks(["", " "]), None, tmp_path)
    assert [h.score for h in retriever.search(_q("pod"), 5)] == [0.0, 0.0]
    loaded = BM25Retriever()
    loaded.load(tmp_path, ["c0", "c1"], None)
    assert len(loaded.search(_q("pod"), 5)) == 2


@pytest.mark.dataset
def test_top10_agrees_with_rank_bm25_on_poc_queries(
    reference_enriched: list[dict], poc_needle: Path, tmp_path: Path
) -> None:
    """Our Okapi mode vs rank_bm25.BM25Okapi on the real corpus: same scores, same top 10."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    chunks = [Chunk(id=r["chunk_id"], doc_id=r["doc_id"], text=r["enriched"]) for r in reference_enriched]
    retriever = BM25Retriever()
    retriever.build(chunks, None, tmp_path)
    reference = rank_bm25.BM25Okapi([c.text.lower().split() for c in chunks])
    ids = np.array([c.id for c in chunks])
    checked = 0
    for name in ("needle", "informed", "realistic50"):
        expected_lists = json.loads((poc_needle / "reference" / f"{name}.json").read_text())
        for qid, ref in expected_lists.items():
            text = ref["expanded"]
            expected = reference.get_scores(text.lower().split())
            got = retriever.scores(text)
            assert np.array_equal(got, expected), qid
            top10 = [h.chunk_id for h in retriever.search(_q(text), 10)]
            assert top10 == list(ids[np.argsort(expected)[::-1][:10]]), qid
            # and the POC's own BM25 top 5
            assert top10[:5] == ref["bm25_only_chunks"], qid
            checked += 1
    assert checked == 120


def test_leftovers_of_dead_or_stuck_writers_are_removed(tmp_path: Path) -> None:
    import os
    import time

    base = tmp_path / "bm25_bm25"
    dead = base / ".tmp-999999999-aaaa"  # no such pid
    stale = base / f".tmp-{os.getpid()}-bbbb"  # a live pid (as in a container), but hours old
    live = base / f".tmp-{os.getpid()}-cccc"  # being written right now
    for folder in (dead, stale, live):
        folder.mkdir(parents=True)
    hours_ago = time.time() - 7200
    os.utime(stale, (hours_ago, hours_ago))
    BM25Retriever().build(_chunks(), None, tmp_path, "s.1")
    assert not dead.exists() and not stale.exists() and live.exists()
