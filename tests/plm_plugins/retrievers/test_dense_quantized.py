"""`dense` with `quantize` (issue 46 item 4): candidates from int8 or binary codes, scored
exactly on the float32 rows. Where every live row is a candidate (fewer than 100), the
hits must be the exact search's, scores and all, through random adds, edits, deletes,
merges and filters; on a larger set with structure, most of the exact top 10. (Up to
EXACT_UP_TO rows the stage scores every row exactly; the tests lower it to 0.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from plm_core.records import Chunk, Document, EmbeddedQuery
from plm_index import segments
from plm_index.corpus import CorpusSnapshot
from plm_plugins.retrievers import dense
from plm_plugins.retrievers.dense import DenseRetriever, approximate, quantized
from plm_plugins.stores.sqlite import SQLiteStore
from tests.plm_index.test_segments import DIM, QUERIES, _step


def _snapshot(store: SQLiteStore, index_dir: Path) -> CorpusSnapshot:
    return CorpusSnapshot(store, index_dir, "toy")


@pytest.mark.parametrize("kind", ["int8", "binary"])
def test_with_every_row_a_candidate_the_hits_are_the_exact_ones(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments.merge, "MERGE_FACTOR", 3)
    monkeypatch.setattr(segments.merge, "FLOOR_ROWS", 4)
    monkeypatch.setattr(dense, "EXACT_UP_TO", 0)
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    rng, live, counter = random.Random(3), set(), [0]
    index_dir = tmp_path / "index"
    quant = DenseRetriever(label="q", quantize=kind, oversample=50)  # 5,000 candidates: every row
    for i in range(240):
        _step(store, rng, live, counter)
        if i % 8 != 7:
            continue
        with store.snapshot():
            quant.refresh(_snapshot(store, index_dir), index_dir)
        if i % 40 == 39:
            segments.wait_for_merges()
            with store.snapshot():
                snap = _snapshot(store, index_dir)
                exact = DenseRetriever(label="q")
                exact.build(snap, None)
                reader = DenseRetriever(label="q", quantize=kind, oversample=50)
                reader.load(snap, index_dir)  # another process: the saved codes
                assert 30 < snap.n_chunks <= 100 * 50
                even = store.filter_mask({"even": True})
                for text in QUERIES:
                    seed = int.from_bytes(text.encode()[:4], "little")  # not hash(): it changes per process
                    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
                    every = snap.n_chunks  # no cut inside a group of equal scores (whose order is a sort's own)
                    query = EmbeddedQuery(text=text, k=every, vector=vector)
                    for allowed in (None, even):
                        want = [(h.score, h.chunk_id) for h in exact.search(query, every, allowed)]
                        for index in (quant, reader):
                            got = [(h.score, h.chunk_id) for h in index.search(query, every, allowed)]
                            assert [s for s, _ in got] == [s for s, _ in want] and sorted(got) == sorted(want)
    assert len(quant.state.segments) > 1
    base = quant.stage_base(index_dir)
    assert "quantize" in base.name or base != DenseRetriever(label="q").stage_base(index_dir)
    assert all((base / "segments" / s.name / "codes.npy").is_file() for s in quant.state.segments)
    segments.wait_for_merges()
    store.close()


@pytest.mark.parametrize(("kind", "oversample", "least"), [("int8", 10, 0.95), ("binary", 40, 0.8)])
def test_on_clustered_vectors_most_of_the_exact_top_10_are_found(
    kind: str, oversample: int, least: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 rows in 60 clusters (as embeddings cluster by topic), 384 dimensions."""
    monkeypatch.setattr(dense, "EXACT_UP_TO", 0)
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(60, 384)).astype(np.float32)
    matrix = centres[rng.integers(0, 60, 3000)] + 0.8 * rng.normal(size=(3000, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    store = SQLiteStore(SQLiteStore.Config())
    store.open(tmp_path / "store")
    docs = [Document(id=f"d{i}", text="x") for i in range(3000)]
    chunks = [Chunk(id=f"d{i}#0", doc_id=f"d{i}", text="x") for i in range(3000)]
    store.replace_documents(docs, chunks, matrix, "toy", ["x"] * 3000)
    with store.snapshot():
        snap = _snapshot(store, tmp_path / "index")
        exact, quant = DenseRetriever(label="q"), DenseRetriever(label="q", quantize=kind, oversample=oversample)
        exact.build(snap, None)
        quant.build(snap, None)
    found = 0
    for j in range(50):
        vector = matrix[j * 7] + 0.3 * rng.normal(size=384).astype(np.float32)
        query = EmbeddedQuery(text="q", k=10, vector=vector)
        want, got = exact.search(query, 10), quant.search(query, 10)
        scores = {h.chunk_id: h.score for h in exact.search(query, 3000)}
        assert all(h.score == scores[h.chunk_id] for h in got)  # exact scores, whatever the codes
        found += len({h.chunk_id for h in got} & {h.chunk_id for h in want})
    assert found / 500 >= least, found / 500
    store.close()


def test_codes() -> None:
    matrix = np.array([[0.5, -0.25, 0.0, 1.0, -1.0, 0.1, 0.2, -0.3, 0.9]], dtype=np.float32)
    binary = quantized(matrix, "binary")
    assert binary.codes.shape == (1, 2) and binary.codes.dtype == np.uint8
    assert np.unpackbits(binary.codes, axis=1)[0, :9].tolist() == [1, 0, 0, 1, 0, 1, 1, 0, 1]
    # the Hamming distance of signs, negated: the row itself is nearest, its opposite farthest
    assert approximate(binary, matrix[0]).tolist() == [0.0] and approximate(binary, -matrix[0]).tolist() == [-8.0]
    int8 = quantized(matrix, "int8")
    assert int8.codes.dtype == np.int8 and int8.codes[0, 3] == 127 and int8.codes[0, 4] == -127
    np.testing.assert_allclose(int8.codes[0] * int8.scales[0], matrix[0], atol=1 / 254)
    assert abs(float(approximate(int8, matrix[0])[0]) - float(matrix[0] @ matrix[0])) < 0.02
