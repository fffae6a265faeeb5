"""`bm25_rm3`: BM25 with RM3 pseudo-relevance feedback keeps the retriever contracts, is
plain BM25 at original_weight = 1, and finds a chunk that shares no word with the query
through the words of the chunks the query does find."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import plm.testing
from plm_core.records import ExpandedQuery
from plm_plugins.retrievers.bm25_rm3 import BM25RM3Retriever
from plm_plugins.retrievers.bm25s import BM25Retriever


@pytest.mark.parametrize(
    ("tokenizer", "heading"), [("bm25s_stem", {}), ("whitespace_lower", {}), ("bm25s_stem", {"heading_weight": 2.5})]
)
def test_bm25_rm3_keeps_the_retriever_and_segmented_index_contracts(
    tmp_path: Path, tokenizer: str, heading: dict[str, float]
) -> None:
    # heading_weight: the checks' chunks are one paragraph each, all of it weighed
    def make() -> BM25RM3Retriever:
        return BM25RM3Retriever(
            label="bm25", tokenizer=tokenizer, fb_docs=2, fb_terms=5, heading_field="first_paragraph", **heading
        )

    plm.testing.check_retriever(make, tmp_path / "built")
    plm.testing.check_segmented_index(make, tmp_path / "segments")


TEXTS = [
    "kubelet restarts crashed containers on the node",
    "kubelet watches pods and restarts crashed containers",
    "the kubelet agent restarts containers that crash",
    "a daemon that watches pods reschedules crashed workloads",  # no word of the query below
    "ingress routes http traffic to services",
]


def _built(cls: type[BM25Retriever], **config: object) -> BM25Retriever:
    from plm_core.records import Chunk

    chunks = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=t) for i, t in enumerate(TEXTS)]
    retriever = cls(label="bm25", tokenizer="whitespace_lower", **config)
    retriever.build(plm.testing.snapshot_of(chunks), None)
    return retriever


def test_original_weight_one_is_plain_bm25() -> None:
    plain = _built(BM25Retriever)
    same = _built(BM25RM3Retriever, original_weight=1.0)
    np.testing.assert_array_equal(plain.scores("kubelet restarts"), same.scores("kubelet restarts"))


def test_feedback_finds_a_chunk_sharing_no_word_with_the_query() -> None:
    plain = _built(BM25Retriever)
    rm3 = _built(BM25RM3Retriever, fb_docs=3, fb_terms=6, original_weight=0.5)
    query = ExpandedQuery(text="kubelet", k=5)
    assert "c3" not in [h.chunk_id for h in plain.search(query, 5)]
    found = [h.chunk_id for h in rm3.search(query, 5)]
    assert "c3" in found and "c4" not in found
    assert set(found[:3]) == {"c0", "c1", "c2"}  # the query's own matches stay first
