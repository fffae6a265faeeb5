from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from plm_needs import needs

from plm_core.errors import StaleIndexError, StoreError
from plm_core.records import Chunk, CorpusVersion, ExpandedQuery
from plm_index.corpus import CorpusSnapshot
from plm_index.segments import manifest_name

pytestmark = needs("bm25s", extra="bm25")
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


# The old string version tokens: "" (no store, counter 0), "s.1", "s.2" (store "s"), "t.1".
V0 = CorpusVersion("", 0)
S1, S2, T1 = CorpusVersion("s", 1), CorpusVersion("s", 2), CorpusVersion("t", 1)


def _chunks(texts: list[str] = TEXTS) -> list[Chunk]:
    # index_text is the enriched text when there is one
    return [Chunk(id=f"c{i}", doc_id=f"d{i // 2}", text="raw", enriched=t) for i, t in enumerate(texts)]


def _snap(chunks: list[Chunk] | None = None, version: CorpusVersion = V0) -> CorpusSnapshot:
    return CorpusSnapshot.of(_chunks() if chunks is None else chunks, version=version)


def _bm25(**config: object) -> BM25Retriever:
    # label "bm25": the config table name these tests use (ScoredChunk.source); the POC's
    # tokenizer and scoring unless a test says otherwise (the defaults are the stemmed setup).
    return BM25Retriever(label="bm25", **{"tokenizer": "whitespace_lower", "method": "rank_bm25_okapi", **config})


def test_a_bare_bm25s_is_the_recommended_stemmed_setup() -> None:
    config = BM25Retriever(label="bm25").config
    assert (config.tokenizer, config.method, config.k1, config.b) == ("bm25s_stem", "lucene", 1.5, 0.75)


def _built(tmp_path: Path, **config: object) -> BM25Retriever:
    retriever = _bm25(**config)
    retriever.build(_snap(), tmp_path)
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


def test_save_load_round_trip(tmp_path: Path) -> None:
    built = _built(tmp_path)
    base = _bm25().index_base(tmp_path)
    assert (base / "manifests" / manifest_name(V0)).is_file()
    (segment,) = (base / "segments").iterdir()
    assert (segment / "plm_segment.json").is_file() and (segment / "vocab.json").is_file()
    assert not [p for p in segment.parent.iterdir() if p.name.startswith(".")]  # temp folder renamed away
    loaded = _bm25()
    loaded.load(_snap(), tmp_path)
    # Read into memory, read-only, never a map of the file: a file truncated under a reader
    # would be a SIGBUS at the first page it touched.
    rows = loaded.state.segments[0].data.rows
    assert not isinstance(rows, np.memmap) and not isinstance(rows.base, np.memmap) and not rows.flags.writeable
    for query in ["the pod on the node", "cpu autoscaler"]:
        assert np.array_equal(loaded.scores(query), built.scores(query))
        assert loaded.search(_q(query), 7) == built.search(_q(query), 7)
    assert loaded.is_current(V0, tmp_path)
    assert not loaded.is_current(S1, tmp_path)
    # Scoring settings apply at query time: the same segments serve another k1 or method.
    assert _bm25(k1=1.2).is_current(V0, tmp_path)
    assert not _bm25(tokenizer="bm25s_stem").is_current(V0, tmp_path)


def test_versions_stale_builds_and_cleanup(tmp_path: Path) -> None:
    first = _bm25()
    first.build(_snap(version=S1), tmp_path)
    with pytest.raises(StaleIndexError):  # another tokenizer: another index
        _bm25(tokenizer="bm25s_stem").load(_snap(version=S1), tmp_path)
    with pytest.raises(StaleIndexError):  # another store with the same counter
        _bm25().load(_snap(version=T1), tmp_path)
    with pytest.raises(StaleIndexError):  # nothing saved there
        _bm25().load(_snap(_chunks()[:1], S2), tmp_path / "nowhere")
    # A version with no saved build of its own is the newest saved one advanced in memory
    # by the store's change feed (here: nothing changed); one the feed cannot reach is not.
    advanced = _bm25()
    advanced.load(_snap(version=S2), tmp_path)
    assert advanced.state is not None and advanced.state.version == S2
    with pytest.raises(StaleIndexError):
        _bm25().load(_snap(_chunks(TEXTS[:3]), S2), tmp_path)
    _bm25().build(_snap(_chunks(TEXTS[:3]), S2), tmp_path)
    manifests = sorted(p.name for p in (_bm25().index_base(tmp_path) / "manifests").iterdir())
    assert manifests == sorted([manifest_name(S1), manifest_name(S2)])  # kept a while for readers
    loaded = _bm25()
    loaded.load(_snap(_chunks()[:3], S2), tmp_path)
    assert loaded.state is not None and loaded.state.n_live == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove"])
def test_corrupt_files_are_detected(tmp_path: Path, damage: str) -> None:
    _built(tmp_path)
    (folder,) = (_bm25().index_base(tmp_path) / "segments").iterdir()
    victim = max((p for p in folder.iterdir() if p.name != "plm_segment.json"), key=lambda p: p.stat().st_size)
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        victim.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        victim.unlink()
    with pytest.raises(StoreError, match=r"corrupt.*plm index rebuild") as info:
        _bm25().load(_snap(), tmp_path)
    assert not isinstance(info.value, StaleIndexError) and victim.name in str(info.value)
    _bm25().build(_snap(), tmp_path)  # a rebuild replaces the damaged build
    _bm25().load(_snap(), tmp_path)


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
    loaded = _bm25(method=method, dtype="float32")
    loaded.load(_snap(), tmp_path)
    assert loaded.search(_q("pod memory"), 3) == built.search(_q("pod memory"), 3)
    assert built.search(_q("pod memory"), 1)[0].chunk_id == "c0"


def test_stemming_tokenizer(tmp_path: Path) -> None:
    retriever = _built(tmp_path, tokenizer="bm25s_stem")
    assert retriever.tokenize(["The Pods are running"]) == [["pod", "run"]]
    assert retriever.search(_q("Configuring autoscalers"), 1)[0].chunk_id == "c4"


def test_empty_corpus_vocabulary(tmp_path: Path) -> None:
    retriever = _bm25()
    retriever.build(_snap(_chunks(["", " "])), tmp_path)
    assert [h.score for h in retriever.search(_q("pod"), 5)] == [0.0, 0.0]
    loaded = _bm25()
    loaded.load(_snap(_chunks(["", " "])), tmp_path)
    assert len(loaded.search(_q("pod"), 5)) == 2


@pytest.mark.dataset
def test_top10_agrees_with_rank_bm25_on_poc_queries(
    reference_enriched: list[dict], poc_needle: Path, tmp_path: Path
) -> None:
    """Our Okapi mode vs rank_bm25.BM25Okapi on the real corpus: same scores, same top 10."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    chunks = [Chunk(id=r["chunk_id"], doc_id=r["doc_id"], text=r["enriched"]) for r in reference_enriched]
    retriever = _bm25()
    retriever.build(CorpusSnapshot.of(chunks, version=V0), tmp_path)
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

    base = _bm25().index_base(tmp_path) / "segments"
    dead = base / ".tmp-999999999-aaaa"  # no such pid
    stale = base / f".tmp-{os.getpid()}-bbbb"  # a live pid (as in a container), but hours old
    live = base / f".tmp-{os.getpid()}-cccc"  # being written right now
    for folder in (dead, stale, live):
        folder.mkdir(parents=True)
    hours_ago = time.time() - 7200
    os.utime(stale, (hours_ago, hours_ago))
    _bm25().build(_snap(version=S1), tmp_path)
    assert not dead.exists() and not stale.exists() and live.exists()


@pytest.mark.parametrize("tokenizer", ["bm25s_stem", "whitespace_lower"])
@pytest.mark.parametrize("method", ["lucene", "rank_bm25_okapi"])
def test_bm25s_keeps_the_retriever_and_segmented_index_contracts(tmp_path: Path, tokenizer: str, method: str) -> None:
    import plm.testing

    def make() -> BM25Retriever:
        return BM25Retriever(label="bm25", tokenizer=tokenizer, method=method)

    plm.testing.check_retriever(make, tmp_path / "built")
    plm.testing.check_segmented_index(make, tmp_path / "segments")
