"""Dense retrieval inside Postgres: `ORDER BY embedding <=> query LIMIT n` over the
postgres store's pgvector column.

With `exact = true` every vector is scanned, as plm's `dense` retriever does (same top
ids, scores within 1e-5: both are cosine similarity of the stored float32 vectors). By
default the store's HNSW index (cosine) answers, and the search falls back to the exact
scan when a filter leaves fewer than `exact_below` rows or the index returns fewer hits
than asked (HNSW under a filter can), so n hits come back whenever n chunks match.

    [store]
    use = "postgres"
    [query.retrieve]
    use = "pgvector"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm import ExpandedQuery, ScoredChunk, hookimpl
from plm_plugins.retrievers.pg_search import (
    DenseOptions,
    PostgresRetriever,
    dense_sql,
    filter_sql,
    set_ef_search,
    use_exact,
)

if TYPE_CHECKING:
    from plm import Registry


class PgvectorRetriever(PostgresRetriever):
    """Cosine similarity of the query vector to the stored chunk vectors, in Postgres."""

    name = "pgvector"
    uses_vectors = True

    class Config(DenseOptions):
        pass

    config: Config

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        if n <= 0:
            return []
        vector = self.query_vector(query)
        where, params = filter_sql(query)
        exact = use_exact(self.config, n, allowed)
        if not exact:
            set_ef_search(self.store, self.config, n)
            found = self.run_sql(dense_sql(False, self.dim, where), [vector, *params, vector, n])
            wanted = n if allowed is None else min(n, int(allowed.sum()))
            if len(found) >= wanted:
                return found
        return self.run_sql(dense_sql(True, self.dim, where), [vector, *params, vector, n])


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(PgvectorRetriever)
