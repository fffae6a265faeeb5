"""The query-embedding stage: an expanded query -> the same query with its vector.

It uses the job's shared [embedder], the one the chunks were embedded with, so query
and chunk vectors always come from the same model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plm import (
    ComponentConfig,
    EmbeddedQuery,
    Embedder,
    ExpandedQuery,
    Query,
    QueryExpander,
    hookimpl,
    require_embedder,
)

if TYPE_CHECKING:
    from plm import Registry


class QueryEmbedder(QueryExpander):
    """Embeds the (expanded) query text with the job's embedder: a query stage before
    retrieval (family `expanders`), not an `[embedder]` (which embeds chunks and queries)."""

    name = "embed_query"
    input_type = ExpandedQuery
    output_type = EmbeddedQuery
    needs = ("embedder",)
    embedder: Embedder | None

    class Config(ComponentConfig):
        pass

    def check(self) -> None:
        require_embedder(self, "needs the job's embedder to embed queries")

    def run(self, data: Query) -> EmbeddedQuery:  # a plain query too, as every expander
        embedder = require_embedder(self, "needs the job's embedder to embed queries")
        return EmbeddedQuery.with_vector(data, embedder.embed_query(data.text), embedder.model_name)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(QueryEmbedder)
