"""`dense_rocchio`: dense retrieval with Rocchio feedback keeps the retriever contracts, is
plain dense at beta = 0, and moves the query toward its best chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import plm.testing
from plm_core.records import Chunk
from plm_plugins.retrievers.dense import DenseRetriever
from plm_plugins.retrievers.dense_rocchio import DenseRocchioRetriever


def test_dense_rocchio_keeps_the_retriever_and_segmented_index_contracts(tmp_path: Path) -> None:
    def make() -> DenseRocchioRetriever:
        return DenseRocchioRetriever(label="dense", fb_docs=2, beta=0.7)

    plm.testing.check_retriever(make, tmp_path / "built")
    plm.testing.check_segmented_index(make, tmp_path / "segments")


TEXTS = [
    "pod memory limits",
    "pod memory limits pending",
    "memory limits pending cpu",  # shares one word with the query, three with its best chunks
    "node ready",
    "pod node",  # shares one word with the query, nothing else with its best chunks
]


def _built(cls: type[DenseRetriever], **config: object) -> DenseRetriever:
    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(TEXTS)]
    retriever = cls(label="dense", **config)
    retriever.build(plm.testing.snapshot_of(chunks), None)
    return retriever


def test_beta_zero_is_plain_dense() -> None:
    q = plm.testing.query("pod memory")
    np.testing.assert_array_equal(_built(DenseRetriever).scores(q), _built(DenseRocchioRetriever, beta=0.0).scores(q))


def test_feedback_moves_the_query_toward_its_best_chunks() -> None:
    q = plm.testing.query("pod memory")
    plain = [h.chunk_id for h in _built(DenseRetriever).search(q, 5)]
    moved = [h.chunk_id for h in _built(DenseRocchioRetriever, fb_docs=2, beta=2.0).search(q, 5)]
    assert plain.index("c4") < plain.index("c2")
    assert moved.index("c2") < moved.index("c4")
