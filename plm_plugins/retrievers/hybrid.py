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

Indexes, filter masks and hit lookup are the core's (`plm_core.search`); this stage only
fans out and fuses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm_core.component import BaseComponent, ComponentConfig
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Fuser, Retriever
from plm_core.records import ExpandedQuery, Ranking, ScoredChunk
from plm_core.search import CorpusView

if TYPE_CHECKING:
    from plm_core.registry import Registry


class HybridRetrieval(BaseComponent[ExpandedQuery, Ranking]):
    """Runs every retriever for the fuser's candidate count, fuses, returns the top hits."""

    name = "hybrid"
    family = "retrievers"
    input_type = ExpandedQuery
    output_type = Ranking
    needs = ("corpus",)
    parts = {"retrievers": Retriever, "fuser": Fuser}
    corpus: CorpusView
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
        rankings: dict[str, list[ScoredChunk]] = {
            label: retriever.search(query, settings.candidates, allowed) for label, retriever in self.retrievers.items()
        }
        fused = self.fuser.fuse(rankings, settings)[: max(0, query.depth)]
        return Ranking(query=query, hits=self.corpus.hits(fused, rankings), fusion=settings)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HybridRetrieval)
