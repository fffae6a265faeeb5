"""Dense retrieval with Rocchio pseudo-relevance feedback: search once, move the query vector
toward the centroid of its `fb_docs` best chunks (`alpha` x query + `beta` x centroid,
renormalised), and search again with it. The vector-space twin of `bm25_rm3`; it reads the
same saved vectors as `dense`, so swapping one for the other rebuilds nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ExpandedQuery, StaleIndexError, hookimpl
from plm_plugins.retrievers.dense import DenseConfig, DenseRetriever, similarities

if TYPE_CHECKING:
    from plm import Registry


class DenseRocchioRetriever(DenseRetriever):
    """`dense`, plus Rocchio feedback from the query's own first ranking."""

    name = "dense_rocchio"

    class Config(DenseConfig):
        fb_docs: int = Field(3, ge=1)
        """How many top chunks of the first search the centroid is taken over."""
        alpha: float = Field(1.0, ge=0)
        """The weight of the query's own vector."""
        beta: float = Field(0.5, ge=0)
        """The weight of the feedback centroid (0: plain dense)."""

    config: Config

    def scores(self, query: ExpandedQuery) -> Any:
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")
        if not state.total:
            return np.zeros(0, dtype=np.float32)
        vector = self.query_vector(query)
        mats = [self.vectors_of(seg.data) for seg in state.segments]
        first = np.concatenate([similarities(m, vector) for m in mats])
        k = min(self.config.fb_docs, int(state.n_live))
        if k == 0 or self.config.beta == 0:
            return first
        ranked = np.where(state.live, first.astype(np.float64), -np.inf)
        kth = np.partition(ranked, ranked.size - k)[ranked.size - k]
        near = np.flatnonzero(ranked >= kth)
        # Ties broken by index order, not row: a corpus kept as segments picks what one built whole does.
        top = near[np.lexsort((state.order[near], -ranked[near]))[:k]]
        offsets = np.asarray(state.offsets)
        rows = []
        for row in sorted(int(r) for r in top):  # summed in row order: the same floats either way
            i = int(np.searchsorted(offsets, row, side="right") - 1)
            rows.append(np.asarray(mats[i][row - int(offsets[i])], dtype=np.float64))
        centroid = np.mean(rows, axis=0)
        moved = self.config.alpha * vector.astype(np.float64) + self.config.beta * centroid
        norm = np.linalg.norm(moved)
        moved = (moved / norm if norm > 0 else moved).astype(np.float32)
        return np.concatenate([similarities(m, moved) for m in mats])


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DenseRocchioRetriever)
