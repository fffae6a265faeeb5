"""`faiss` with quantizer = "binary" (issue 46 item 4): a faiss binary index of the vectors'
sign bits per segment, asked for `oversample` x n candidates by Hamming distance, which are
scored exactly on the float32 rows. The hits carry exact scores in `dense`'s tie order; with
candidates enough they are the exact top n; filters, deletions, segments and merges keep
working; an index saved with another quantizer is never served as this one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plm_needs import needs

from plm_core.errors import StaleIndexError, StoreError
from plm_core.records import CorpusVersion
from plm_index import segments
from plm_plugins.retrievers import dense
from plm_plugins.stores.sqlite import SQLiteStore
from tests.plm_index.test_segments import QUERIES, _snapshot, _step
from tests.plm_plugins.retrievers.test_faiss import _clustered, _dense, _ids, _pairs, _q, _random, _snap

pytestmark = needs("faiss", extra="ann")
from plm_plugins.retrievers import faiss as faiss_module  # noqa: E402
from plm_plugins.retrievers.faiss import BINARY_FILE, INDEX_FILE, FaissRetriever, sign_bits  # noqa: E402

KINDS = ["flat", "hnsw", "ivf"]
V1 = CorpusVersion("s", 1, "a")


def _binary(snap: Any, index_dir: Path | None = None, **config: Any) -> FaissRetriever:
    retriever = FaissRetriever(**{"quantizer": "binary", "exact_below": 0, **config})  # the index answers
    retriever.build(snap, index_dir)
    return retriever


def _segment_data(retriever: FaissRetriever) -> Any:
    assert retriever.state is not None
    (segment,) = retriever.state.segments
    return segment.data


def _recall(retriever: FaissRetriever, exact: Any, queries: Any, allowed: Any = None) -> float:
    found = [
        len(set(_ids(retriever.search(_q(q), 10, allowed))) & set(_ids(exact.search(_q(q), 10, allowed))))
        for q in queries
    ]
    return sum(found) / (10 * len(queries))


# ---------------------------------------------------------------------- the index
@pytest.mark.parametrize("kind", KINDS)
def test_the_index_holds_a_bit_a_dimension_the_signs(kind: str) -> None:
    points = _random(3000)
    data = _segment_data(_binary(_snap(points), index=kind))
    faiss = pytest.importorskip("faiss")
    assert isinstance(data.index, faiss.IndexBinary) and data.index.d == 64 and data.index.code_size == 8
    assert data.index.ntotal == 3000
    np.testing.assert_array_equal(data.codes, dense.quantized(points, "binary").codes)  # dense's binary codes
    assert (
        FaissRetriever(index=kind, quantizer="binary").factory(3000)
        == {
            "flat": "BFlat",
            "hnsw": "BHNSW32",
            "ivf": "BIVF76",
        }[kind]
    )


def test_sign_bits_pad_an_odd_dimension_with_zeros() -> None:
    matrix = np.array([[0.5, -1.0, 0.0, 2.0, -0.1, 0.3, 0.3, -0.2, 0.9, -0.9]], dtype=np.float32)
    codes = sign_bits(matrix)
    assert codes.shape == (1, 2) and codes.dtype == np.uint8
    assert np.unpackbits(codes[0]).tolist() == [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    many = np.random.default_rng(1).normal(size=(70_000, 12)).astype(np.float32)  # over one block of rows
    np.testing.assert_array_equal(sign_bits(many), np.packbits(many > 0, axis=1))


# ---------------------------------------------------------------------- ranking
@pytest.mark.parametrize("kind", KINDS)
def test_hits_carry_exact_scores_best_first(kind: str) -> None:
    points, queries = _clustered(3000, 10)
    snap = _snap(points)
    retriever, exact = _binary(snap, index=kind), _dense(snap)
    for q in queries:
        hits = retriever.search(_q(q), 10)
        scores = {h.chunk_id: h.score for h in exact.search(_q(q), 3000)}
        assert len(hits) == 10 and [h.score for h in hits] == [scores[h.chunk_id] for h in hits]  # bit for bit
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert [(h.rank, h.source) for h in hits] == [(r, "faiss") for r in range(10)]


@pytest.mark.parametrize("kind", KINDS)
def test_oversample_x_n_rows_are_rescored(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    points, queries = _clustered(3000, 1)
    retriever = _binary(_snap(points), index=kind, oversample=20, nprobe=1000)
    rescored: list[int] = []

    def counting(matrix: Any, vector: Any) -> Any:
        rescored.append(len(matrix))
        return dense.similarities(matrix, vector)

    monkeypatch.setattr(faiss_module, "similarities", counting)
    retriever.search(_q(queries[0]), 10)
    assert rescored == [200]  # 20 x 10 candidates, not the segment's 3,000 rows
    retriever.search(_q(queries[0]), 2)
    assert rescored[1:] == [100]  # at least 100


@pytest.mark.parametrize("kind", KINDS)
def test_recall_on_clustered_vectors_and_exact_with_candidates_enough(kind: str) -> None:
    points, queries = _clustered(3000, 40)
    snap = _snap(points)
    exact = _dense(snap)
    assert _recall(_binary(snap, index=kind, oversample=40), exact, queries) >= 0.95
    # 2,000 candidates of 3,000 rows, still through the index: the exact hits, ties and all
    wide = _binary(snap, index=kind, oversample=200, nprobe=1000)
    for q in queries[:10]:
        assert _pairs(wide.search(_q(q), 10)) == _pairs(exact.search(_q(q), 10))


def test_recall_measure_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    # One candidate per hit, chosen on 64 sign bits: far from the exact top 10.
    monkeypatch.setattr(faiss_module, "MIN_CANDIDATES", 0)
    points, queries = _clustered(3000, 40)
    snap = _snap(points)
    assert _recall(_binary(snap, index="flat", oversample=1), _dense(snap), queries) < 0.8


@pytest.mark.parametrize("kind", KINDS)
def test_ties_put_the_later_chunk_first(kind: str) -> None:
    matrix = _random(300)
    matrix[[10, 50, 200]] = matrix[7]  # duplicated chunks tie exactly
    snap = _snap(matrix)
    for exact_below in (0, 1000):  # from the index, or scanned exactly
        hits = _binary(snap, index=kind, exact_below=exact_below).search(_q(matrix[7]), 4)
        assert _ids(hits) == ["c200", "c50", "c10", "c7"]
    unit = _binary(snap, index=kind, score="unit").search(_q(matrix[7]), 5)
    cosine = _binary(snap, index=kind).search(_q(matrix[7]), 5)
    assert _ids(unit) == _ids(cosine) and [h.score for h in unit] == pytest.approx([(1 + h.score) / 2 for h in cosine])


# ---------------------------------------------------------------------- filters
@pytest.mark.parametrize("kind", KINDS)
def test_filters_give_n_allowed_hits(kind: str) -> None:
    points, queries = _clustered(3000, 20)
    snap = _snap(points)
    retriever, exact = _binary(snap, index=kind, oversample=40), _dense(snap)
    rng = np.random.default_rng(6)
    few_out = np.ones(3000, dtype=bool)
    few_out[rng.choice(3000, 50, replace=False)] = False  # binary IVF: asked for 50 more, dropped
    tight = np.zeros(3000, dtype=bool)
    tight[[3, 400, 999, 1500, 2999]] = True
    for allowed in (rng.random(3000) < 0.3, few_out):
        for q in queries:
            hits = retriever.search(_q(q), 10, allowed)
            assert len(hits) == 10 and all(allowed[int(h.chunk_id[1:])] for h in hits)
        assert _recall(retriever, exact, queries, allowed) >= 0.9
    assert sorted(_ids(retriever.search(_q(queries[0]), 10, tight))) == ["c1500", "c2999", "c3", "c400", "c999"]
    assert retriever.search(_q(queries[0]), 10, np.zeros(3000, dtype=bool)) == []


def test_binary_ivf_under_a_filter_scans_the_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """faiss's binary IVF takes no row filter: a wide one is a popcount scan of the allowed
    rows' codes, a few rows left out are asked for on top and dropped."""
    points, queries = _clustered(3000, 1)
    retriever = _binary(_snap(points), index="ivf")
    calls: list[str] = []
    scan, ann = faiss_module._hamming_top, retriever._ann

    def scanning(*args: Any) -> Any:
        calls.append("codes")
        return scan(*args)

    def asking(index: Any, vector: Any, m: int, mask: Any) -> Any:
        calls.append(f"faiss {m} {mask}")
        return ann(index, vector, m, mask)

    monkeypatch.setattr(faiss_module, "_hamming_top", scanning)
    monkeypatch.setattr(retriever, "_ann", asking)
    half = np.arange(3000) % 2 == 0
    hits = retriever.search(_q(queries[0]), 10, half)
    assert calls == ["codes"] and all(int(h.chunk_id[1:]) % 2 == 0 for h in hits)
    best = int(retriever.search(_q(queries[0]), 1)[0].chunk_id[1:])
    three_out = np.ones(3000, dtype=bool)
    three_out[[best, 1, 2]] = False
    calls.clear()
    hits = retriever.search(_q(queries[0]), 10, three_out)
    assert calls == ["faiss 103 None"] and len(hits) == 10 and best not in {int(h.chunk_id[1:]) for h in hits}


# ---------------------------------------------------------------------- segments
@pytest.mark.parametrize("kind", KINDS)
def test_random_changes_deletions_and_merges(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adds, edits, deletes and merges into a real store, every segment with its binary index;
    10 candidates per hit asked (MIN_CANDIDATES lowered), so bigger segments are answered by
    their index: never a deleted or filtered-out row, exact scores, n hits when n rows match;
    with candidates enough, the exact search's hits."""
    monkeypatch.setattr(segments.merge, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)
    monkeypatch.setattr(faiss_module, "MIN_CANDIDATES", 0)
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(5), set[str](), [0]
    index_dir = tmp_path / "index"
    config: dict[str, Any] = {"label": "b", "index": kind, "quantizer": "binary", "exact_below": 0}
    ann = FaissRetriever(**config, oversample=2)
    for i in range(200):
        _step(store, rng, live, counter)
        if i % 8 != 7:
            continue
        with store.snapshot():
            ann.refresh(_snapshot(store, index_dir), index_dir)
        if i % 40 != 39:
            continue
        segments.wait_for_merges()
        with store.snapshot():
            snap = _snapshot(store, index_dir)
            exact = FaissRetriever(label="b", exact_below=10**9)  # today's exact scan, its tie order
            exact.build(snap, None)
            reader, wide = FaissRetriever(**config, oversample=2), FaissRetriever(**config, oversample=1000)
            reader.load(snap, index_dir)  # another process: the saved segments and their indexes
            wide.load(snap, index_dir)
            even = store.filter_mask({"even": True})
            for text in QUERIES:
                vector = np.random.default_rng(int.from_bytes(text.encode()[:4], "little")).normal(size=8)
                query = _q(vector)
                for allowed in (None, even):
                    n_ok = snap.n_chunks if allowed is None else int(allowed.sum())
                    scores = {h.chunk_id: h.score for h in exact.search(query, snap.n_chunks, allowed)}
                    for index in (ann, reader):
                        hits = index.search(query, 10, allowed)
                        assert len(hits) == min(10, n_ok) and all(h.chunk_id in scores for h in hits)
                        assert [h.score for h in hits] == [scores[h.chunk_id] for h in hits]
                    assert _pairs(wide.search(query, 10, allowed)) == _pairs(exact.search(query, 10, allowed))
    assert ann.state is not None and len(ann.state.segments) > 1
    assert any("-m" in seg.name for seg in ann.state.segments)  # merged segments got their own index
    assert max(seg.n for seg in ann.state.segments) > 20  # more rows than 10 hits' candidates: the index answered
    for seg in ann.state.segments:
        folder = ann.stage_base(index_dir) / "segments" / seg.name
        assert (folder / BINARY_FILE).is_file() and (folder / dense.CODES_FILE).is_file()
    segments.wait_for_merges()
    store.close()


@pytest.mark.parametrize("kind", KINDS)
def test_binary_keeps_the_retriever_and_segmented_index_contracts(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import plm.testing

    make: dict[str, Any] = {"label": "ann", "index": kind, "quantizer": "binary"}
    plm.testing.check_retriever(lambda: FaissRetriever(**make), tmp_path / "exact")
    plm.testing.check_segmented_index(lambda: FaissRetriever(**make, exact_below=0), tmp_path / "segments")
    # n candidates for n hits: the kit's small corpus answered by the index itself
    monkeypatch.setattr(faiss_module, "MIN_CANDIDATES", 0)
    approximate = {**make, "exact_below": 0, "oversample": 1}
    plm.testing.check_retriever(lambda: FaissRetriever(**approximate), tmp_path / "ann", exact=False)


# ---------------------------------------------------------------------- saved indexes
def test_saved_binary_index_loads_and_another_quantizer_is_rebuilt(tmp_path: Path) -> None:
    points, queries = _clustered(2000, 5)
    snap = _snap(points)
    built = _binary(snap, tmp_path, index="hnsw")
    (folder,) = (built.index_base(tmp_path) / "segments").iterdir()
    assert (folder / BINARY_FILE).is_file() and (folder / dense.CODES_FILE).is_file()
    assert not (folder / INDEX_FILE).exists()
    loaded = FaissRetriever(index="hnsw", quantizer="binary", exact_below=0, oversample=30)  # search-time: no rebuild
    assert loaded.is_current(V1, tmp_path)
    loaded.load(snap, tmp_path)
    data = _segment_data(loaded)
    assert type(data.index).__name__ == "IndexBinaryHNSW" and isinstance(data.vectors, np.memmap)
    for q in queries:
        assert _pairs(_binary(snap, index="hnsw", oversample=30).search(_q(q), 10)) == _pairs(loaded.search(_q(q), 10))
    # a float32 or sq8 build is another folder: never read as binary, nor binary as them
    for other in ({"quantizer": "none"}, {"quantizer": "sq8"}, {"index": "ivf", "quantizer": "binary"}):
        changed = FaissRetriever(**{"index": "hnsw", **other})
        assert changed.index_base(tmp_path) != built.index_base(tmp_path)
        assert not changed.is_current(V1, tmp_path)
        with pytest.raises(StaleIndexError):
            changed.load(snap, tmp_path)
    _binary(snap, tmp_path, index="hnsw", quantizer="none")
    binary = FaissRetriever(index="hnsw", quantizer="binary", exact_below=0)
    binary.load(snap, tmp_path)  # the binary build is still there beside the float32 one
    assert _segment_data(binary).codes is not None


@pytest.mark.parametrize("victim", [BINARY_FILE, dense.CODES_FILE])
def test_a_damaged_binary_segment_is_a_store_error(tmp_path: Path, victim: str) -> None:
    snap = _snap(_random(500))
    built = _binary(snap, tmp_path)
    (folder,) = (built.index_base(tmp_path) / "segments").iterdir()
    (folder / victim).unlink()
    with pytest.raises(StoreError, match=r"corrupt.*plm index rebuild") as info:
        FaissRetriever(quantizer="binary").load(snap, tmp_path)
    assert not isinstance(info.value, StaleIndexError) and victim in str(info.value)
    _binary(snap, tmp_path)  # a rebuild replaces it
    FaissRetriever(quantizer="binary").load(snap, tmp_path)


def test_a_binary_file_faiss_cannot_read_is_named(tmp_path: Path) -> None:
    retriever = _binary(_snap(_random(50)), tmp_path)
    (folder,) = (retriever.index_base(tmp_path) / "segments").iterdir()
    (folder / BINARY_FILE).write_bytes(b"not a faiss index")
    with pytest.raises(ValueError, match=r"faiss cannot read binary.faiss"):
        retriever._read(folder, BINARY_FILE)
