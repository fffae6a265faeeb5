from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from plm_core.corpus import CorpusSnapshot, CorpusVersion, StoreProblem
from plm_core.errors import ConfigError, StoreError
from plm_core.records import Chunk, EmbeddedQuery, ExpandedQuery
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

    return SimpleNamespace(
        version=lambda: VERSION,
        chunk_ids=lambda: list(chunk_ids),
        vectors=lambda: (list(vector_ids), matrix, "m" if matrix is not None else None),
        consistency_problems=problems,
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
        DenseRetriever().load(CorpusSnapshot(_fake_store(["a"], [], None), "x"), Path("x"))
    with pytest.raises(StoreError, match="2 vectors for 1 chunks"):
        DenseRetriever().load(CorpusSnapshot.of(CHUNKS[:1], MATRIX[:2], VERSION), Path("x"))


def test_load_from_store_vectors_and_index_matches() -> None:
    ids = [c.id for c in CHUNKS]
    store = _fake_store(ids, ids, MATRIX)
    retriever = DenseRetriever()
    retriever.load(CorpusSnapshot(store, "x"), Path("x"))
    assert retriever.search(_q([0.0, 0.0, 1.0]), 1)[0].chunk_id == "c4"
    # nothing is saved beside the store's vectors: the index is always current...
    assert retriever.is_current(VERSION, Path("x"))
    # ...and a store with a chunk without a vector is refused when the vectors are read
    torn = _fake_store([*ids, "c5"], ids, MATRIX)
    with pytest.raises(StoreError, match="no vector"):
        retriever.load(CorpusSnapshot(torn, "x"), Path("x"))
