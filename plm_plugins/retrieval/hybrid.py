"""Hybrid retrieval: several retrievers side by side, one fuser over their candidates.

The config names the parts as nested tables, which the assembly builds and passes to the
constructor (typed: each of `retrievers` must be a retriever, `fuser` a fuser):

    [query.retrieve]
    use = "hybrid"
    [query.retrieve.retrievers.dense]
    use = "dense"
    [query.retrieve.retrievers.bm25]
    use = "bm25s"
    [query.retrieve.fuser]
    use = "rrf"

Indexes, filter masks and hit lookup are the core's (`plm_index.search`); this stage only
fans out and fuses. A query with `alternatives` (e.g. from the `llm_rewrite` expander) is
retrieved and fused once per text, and those fused lists are combined by unweighted RRF.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from plm import (
    ComponentConfig,
    Corpus,
    ExpandedQuery,
    Fuser,
    FusionConfig,
    Ranking,
    Retrieval,
    Retriever,
    ScoredChunk,
    fused_ranking,
    hookimpl,
)

if TYPE_CHECKING:
    from plm import Registry


class HybridRetrieval(Retrieval):
    """Runs every retriever for the fuser's candidate count, fuses, returns the top hits."""

    name = "hybrid"
    needs = ("corpus",)
    parts = {"retrievers": Retriever, "fuser": Fuser}
    corpus: Corpus
    retrievers: dict[str, Retriever]
    fuser: Fuser

    class Config(ComponentConfig):
        retrievers: dict[str, Any]
        """Named retriever tables, e.g. [query.retrieve.retrievers.bm25] use = "bm25s"."""
        fuser: dict[str, Any]
        """The fuser table, e.g. [query.retrieve.fuser] use = "rrf"."""

    def check(self) -> None:
        self.fuser.check_sources(list(self.retrievers))

    def run(self, data: ExpandedQuery) -> Ranking:
        query = ExpandedQuery.of(data)
        # Filters act inside every retriever, before its top-n cut, and the candidate count
        # follows the rows left: a filtered query gets k hits whenever k chunks match.
        allowed, n_rows = self.corpus.allowed(query.filters)
        settings = self.fuser.settings_for(query, n_rows)
        if n_rows == 0:
            return Ranking(query=query, hits=(), fusion=settings)
        rankings = search_all(self.retrievers, query, settings.candidates, allowed)
        if query.alternatives:
            fused = reciprocal_rerank(
                [
                    self.fuser.fuse(rankings, settings),
                    *(self._fused_for(query, text, settings, allowed) for text in query.alternatives),
                ]
            )[: max(0, query.depth)]
        else:
            fused = self.fuser.fuse_top(rankings, settings, query.depth)
        # Each hit's per-source ranks are those of the main query's retrievers.
        return Ranking(query=query, hits=self.corpus.hits(fused, rankings), fusion=settings)

    def _fused_for(self, query: ExpandedQuery, text: str, settings: FusionConfig, allowed: Any) -> list[ScoredChunk]:
        """One alternative's fused ranking: the same retrievers, filters, candidates and
        fusion settings as the main query. It carries no vector, so dense retrievers embed it."""
        fields = {f.name: getattr(query, f.name) for f in dataclasses.fields(ExpandedQuery)}
        alternative = ExpandedQuery(**{**fields, "text": text, "alternatives": ()})
        return self.fuser.fuse(search_all(self.retrievers, alternative, settings.candidates, allowed), settings)


_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def search_all(
    retrievers: dict[str, Retriever], query: ExpandedQuery, n: int, allowed: Any
) -> dict[str, list[ScoredChunk]]:
    """Every retriever's candidates, keyed in the retrievers' order. With more than one core
    they run side by side: the first in the calling thread, the others in a pool kept for the
    process (faiss, ONNX and NumPy's large loops release the GIL), each answer its own, as
    when they run one after another; a retriever's error is raised once the others are done."""
    items = list(retrievers.items())
    pool = _pool() if len(items) > 1 else None
    if pool is None:
        return {label: r.search(query, n, allowed) for label, r in items}
    futures = [pool.submit(r.search, query, n, allowed) for _, r in items[1:]]
    try:
        first = items[0][1].search(query, n, allowed)
    finally:
        errors = [f.exception() for f in futures]  # waits for each
    for error in errors:
        if error is not None:
            raise error
    return dict(zip([label for label, _ in items], [first, *(f.result() for f in futures)], strict=True))


def _pool() -> ThreadPoolExecutor | None:
    """The process's retriever pool (None on one core); a forked child makes its own."""
    global _POOL
    cores = os.cpu_count() or 1
    if cores < 2:
        return None
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(min(cores, 8), thread_name_prefix="plm-retrieve"))
        return _POOL[1]


def reciprocal_rerank(rankings: Sequence[Sequence[ScoredChunk]], k: float = 60.0) -> list[ScoredChunk]:
    """Unweighted RRF over several queries' fused rankings (LlamaIndex's QueryFusionRetriever
    `reciprocal_rerank`): score = sum of 1 / (k + 0-based rank); ties keep first-seen order."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (k + rank)
    return fused_ranking(scores)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HybridRetrieval)
