"""Hybrid retrieval in one SQL statement: a dense (pgvector) and a keyword (tsvector)
sub-query, each ranked and cut to `candidates`, fused by weighted reciprocal rank in SQL:

    SELECT id, sum(weight * rrf_score(rank, k)) ... FROM (dense UNION ALL keyword) GROUP BY id

`rrf_score(rank, k) = 1 / (k + rank)` (ranks from 1) is a SQL function the store creates.
Filters act inside both sub-queries, before their LIMIT. Use it as the whole
`[query.retrieve]` stage over a postgres store; plm's own `hybrid` + `rrf` does the same
fusion in Python over any retrievers.

    [query.retrieve]
    use = "pg_hybrid"
    candidates = 100
    k = 60
    weights = { dense = 1.0, keyword = 1.0 }
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import ExpandedQuery, ScoredChunk, hookimpl
from plm_plugins.retrievers.pg_search import (
    DenseOptions,
    KeywordOptions,
    PostgresRetriever,
    dense_sql,
    filter_sql,
    keyword_sql,
    set_ef_search,
    tsquery_sql,
    use_exact,
)

if TYPE_CHECKING:
    from plm import Registry


class PgHybridRetriever(PostgresRetriever):
    """Weighted RRF of pgvector and ts_rank_cd rankings, computed by Postgres."""

    name = "pg_hybrid"
    uses_vectors = True

    class Config(DenseOptions, KeywordOptions):
        candidates: int = Field(100, ge=1, le=10_000)
        """How many hits each sub-query ranks (at least the number asked for)."""
        k: int = Field(60, ge=0, le=100_000)
        """RRF's k: a hit at rank r scores weight / (k + r)."""
        weights: dict[str, float] = {"dense": 1.0, "keyword": 1.0}
        """Weight of each sub-query: keys "dense" and "keyword" (0 turns one off)."""

        @field_validator("weights")
        @classmethod
        def _known(cls, value: dict[str, float]) -> dict[str, float]:
            unknown = sorted(set(value) - {"dense", "keyword"})
            if unknown or any(w < 0 for w in value.values()):
                raise ValueError(f"weights takes keys 'dense' and 'keyword' with values >= 0, got {value}")
            return {"dense": value.get("dense", 0.0), "keyword": value.get("keyword", 0.0)}

    config: Config

    def _sql(self, exact: bool, where: str) -> str:
        ranked = "SELECT id, row_number() OVER (ORDER BY score DESC) AS rank FROM ({}) AS t(id, score)"
        return (
            "WITH q AS MATERIALIZED (SELECT {tsq} AS tsq), "  # once per query, also in prepared plans
            f"dense AS ({ranked.format(dense_sql(exact, self.dim, where))}), "
            f"keyword AS ({ranked.format(keyword_sql(self.config, where))}) "
            "SELECT id, sum(score) AS score FROM ("
            "SELECT id, %s * {s}.rrf_score(rank, %s) AS score FROM dense UNION ALL "
            "SELECT id, %s * {s}.rrf_score(rank, %s) AS score FROM keyword) AS u "
            "GROUP BY id ORDER BY score DESC, id LIMIT %s"
        )

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        if n <= 0:
            return []
        m = max(n, self.config.candidates)
        vector = self.query_vector(query)
        tsq, tsq_params = tsquery_sql(self.config, self.store.config.fulltext_config, query.text)
        where, params = filter_sql(query)
        w, k = self.config.weights, self.config.k
        args = [*tsq_params, vector, *params, vector, m, *params, m, w["dense"], k, w["keyword"], k, n]
        exact = use_exact(self.config, m, allowed)
        if not exact:
            set_ef_search(self.store, self.config, m)
            found = self.run_sql(self._sql(False, where).replace("{tsq}", tsq), args)
            if len(found) >= (n if allowed is None else min(n, int(allowed.sum()))):
                return found
        return self.run_sql(self._sql(True, where).replace("{tsq}", tsq), args)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(PgHybridRetriever)
