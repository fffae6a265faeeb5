from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from plm_core.errors import ConfigError, StaleIndexError, StoreError
from plm_core.records import Chunk, CorpusVersion, EmbeddedQuery, ExpandedQuery, StoreProblem
from plm_index.corpus import CorpusSnapshot
from plm_plugins.retrievers.dense import DenseRetriever

# Hand-made unit vectors: row 2 and row 3 are identical (a duplicated page), so they tie.
MATRIX = np.array(
    [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float64
)
CHUNKS = [Chunk(id=f"c{i}", doc_id="d", text=f"t{i}") for i in range(len(MATRIX))]
VERSION = CorpusVersion("s", 1)


class FakeEmbedder:
    def __init__(self, vector: list[float]) -> None:
        self.vector = np.array(vector, dtype=np.float32)
        self.calls: list[str] = []

    def ensure_warm(self) -> None:
        pass

    def embed_query(self, text: str) -> Any:
        self.calls.append(text)
        return self.vector


def _retriever(embedder: Any = None) -> DenseRetriever:
    retriever = DenseRetriever(embedder=embedder)
    retriever.build(CorpusSnapshot.of(CHUNKS, MATRIX, VERSION), None)
    return retriever


def _q(vector: list[float] | None = None, k: int = 5) -> ExpandedQuery:
    if vector is None:
        return ExpandedQuery(text="q", k=k)
    return EmbeddedQuery(text="q", k=k, vector=np.array(vector, dtype=np.float32))


def test_dot_product_scores_and_order() -> None:
    retriever = _retriever()
    assert retriever._matrix.dtype == np.float32 and retriever._matrix.flags["C_CONTIGUOUS"]
    hits = retriever.search(_q([0.6, 0.8, 0.0]), 3)
    assert [h.chunk_id for h in hits][0] == "c1"
    assert hits[0].score == pytest.approx(1.0)
    # c2 and c3 tie at 0.8: numpy.argsort(scores)[::-1] decides, as in the POC
    scores = MATRIX.astype(np.float32) @ np.array([0.6, 0.8, 0.0], dtype=np.float32)
    expected = [f"c{i}" for i in np.argsort(scores)[::-1][:3]]
    assert [h.chunk_id for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.8])
    assert [(h.rank, h.source) for h in hits] == [(0, "dense"), (1, "dense"), (2, "dense")]


def test_k_larger_than_corpus_and_mask() -> None:
    retriever = _retriever()
    assert len(retriever.search(_q([1.0, 0.0, 0.0]), 100)) == len(CHUNKS)
    allowed = np.array([False, True, False, True, True])
    hits = retriever.search(_q([0.0, 1.0, 0.0]), 100, allowed=allowed)
    assert [h.chunk_id for h in hits] == ["c3", "c1", "c4"]


def test_query_embedded_by_context_embedder_when_no_vector() -> None:
    embedder = FakeEmbedder([0.0, 0.0, 1.0])
    retriever = _retriever(embedder)
    assert retriever.search(_q(None), 1)[0].chunk_id == "c4"
    assert embedder.calls == ["q"]
    retriever.search(_q([1.0, 0.0, 0.0]), 1)  # an EmbeddedQuery's vector is used as is
    assert embedder.calls == ["q"]


def _fake_store(chunk_ids: list[str], vector_ids: list[str], matrix: Any) -> Any:
    """The parts of a Store a CorpusSnapshot reads: chunks, vectors (row i for vector_ids[i])
    and the consistency check, which reports chunks without a vector as the contract says."""

    def problems() -> list[StoreProblem]:
        n = len(set(chunk_ids) - set(vector_ids))
        if vector_ids and n:
            return [StoreProblem(StoreProblem.MISSING_VECTORS, n, f"{n} chunks have no vector")]
        return []

    def vectors_since(position: int) -> tuple[list[int], Any, str | None]:
        seqs = [chunk_ids.index(i) + 1 for i in vector_ids]
        return seqs[position:], None if matrix is None else matrix[position:], "m" if matrix is not None else None

    return SimpleNamespace(
        version=lambda: VERSION,
        chunk_ids=lambda: list(chunk_ids),
        vectors=lambda: (list(vector_ids), matrix, "m" if matrix is not None else None),
        consistency_problems=problems,
        get_meta=lambda key: "m" if key == "model" and matrix is not None else None,
        # the change feed: chunk i has seq i + 1 and order key i
        feed_position=lambda: len(chunk_ids),
        rows_since=lambda p: (
            list(range(p + 1, len(chunk_ids) + 1)),
            chunk_ids[p:],
            list(range(p, len(chunk_ids))),
            [""] * (len(chunk_ids) - p),
        ),
        vectors_since=vectors_since,
    )


def test_errors_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="embedder"):
        _retriever(None).search(_q(None), 1)
    with pytest.raises(ConfigError, match="embedder"):  # found when the job is assembled, too
        _retriever(None).check()
    _retriever(FakeEmbedder([1.0, 0.0, 0.0])).check()
    with pytest.raises(StoreError, match="dimensions"):
        _retriever().search(_q([1.0, 0.0]), 1)
    with pytest.raises(StoreError, match="ingest"):  # the store has chunks but no vectors
        DenseRetriever().build(CorpusSnapshot(_fake_store(["a"], [], None), "x"), None)
    with pytest.raises(StoreError, match="2 vectors for 1 chunks"):
        DenseRetriever().build(CorpusSnapshot.of(CHUNKS[:1], MATRIX[:2], VERSION), None)


def test_build_from_store_vectors_and_index_matches() -> None:
    ids = [c.id for c in CHUNKS]
    store = _fake_store(ids, ids, MATRIX)
    retriever = DenseRetriever()
    retriever.build(CorpusSnapshot(store, "x"), None)
    assert retriever.search(_q([0.0, 0.0, 1.0]), 1)[0].chunk_id == "c4"
    # a store with a chunk without a vector is refused when the vectors are read
    torn = _fake_store([*ids, "c5"], ids, MATRIX)
    with pytest.raises(StoreError, match="no vector"):
        retriever.build(CorpusSnapshot(torn, "x"), None)


def _saved(tmp_path: Path, model: str | None = "m") -> DenseRetriever:
    snapshot = CorpusSnapshot.of(CHUNKS, MATRIX, VERSION)
    snapshot.model = snapshot.__dict__["vectors_model"] = model
    DenseRetriever().build(snapshot, tmp_path)
    return DenseRetriever()


def _opened(n_chunks: int = len(CHUNKS), model: str | None = "m", stored: str | None = "m") -> CorpusSnapshot:
    """What a new process sees: a version, a chunk count, the model the job loads and the
    one the store records; no ids, no vectors."""
    snap = CorpusSnapshot.__new__(CorpusSnapshot)
    snap.store, snap.location, snap.model, snap.version = None, "x", model, VERSION  # type: ignore[assignment]
    snap.__dict__.update(n_chunks=n_chunks, vectors_model=stored)
    return snap


def test_saved_vectors_are_memory_mapped_by_a_new_process(tmp_path: Path) -> None:
    retriever = _saved(tmp_path)
    assert retriever.is_current(VERSION, tmp_path)
    assert not retriever.is_current(CorpusVersion("s", 2), tmp_path)
    retriever.load(_opened(), tmp_path)  # reads no id and no vector from the store
    assert isinstance(retriever._matrix, np.memmap) and not retriever._matrix.flags.writeable
    built = _retriever()
    for vector in ([0.6, 0.8, 0.0], [0.0, 1.0, 0.0], [0.1, 0.2, 0.9]):
        expected = built.search(_q(vector), 5)
        assert retriever.search(_q(vector), 5) == expected
    allowed = np.array([False, True, False, True, True])
    assert retriever.search(_q([0.0, 1.0, 0.0]), 5, allowed) == built.search(_q([0.0, 1.0, 0.0]), 5, allowed)


def test_saved_vectors_are_refused_when_they_do_not_fit(tmp_path: Path) -> None:
    retriever = _saved(tmp_path)
    with pytest.raises(StaleIndexError, match="come from 'm'"):  # rebuilt from the store, never used
        retriever.load(_opened(model="other"), tmp_path)
    with pytest.raises(StaleIndexError, match="the store says 'other'"):
        retriever.load(_opened(stored="other"), tmp_path)
    with pytest.raises(StoreError, match="holds 5 chunks .* has 4"):
        retriever.load(_opened(n_chunks=4), tmp_path)
    with pytest.raises(StaleIndexError):  # no build for this version
        retriever.load(_opened(), tmp_path / "elsewhere")
    (vectors,) = tmp_path.glob("vectors-*/segments/*/vectors.npy")
    data = bytearray(vectors.read_bytes())
    data[-1] ^= 0xFF
    vectors.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged|corrupt|rebuild"):
        retriever.load(_opened(), tmp_path)


def test_dense_keeps_the_retriever_and_segmented_index_contracts(tmp_path: Path) -> None:
    import plm.testing

    plm.testing.check_retriever(lambda: DenseRetriever(label="dense"), tmp_path / "built")
    plm.testing.check_segmented_index(lambda: DenseRetriever(label="dense"), tmp_path / "segments")
