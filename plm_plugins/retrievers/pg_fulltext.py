"""Keyword retrieval inside Postgres: the chunks' generated `tsvector` (GIN-indexed) matched
against the query and ranked by `ts_rank_cd`, as a database's own full-text search does.

`ts_rank_cd` is cover density, not BM25: it has no inverse document frequency, so it
ranks below `bm25s` on benchmarks (BENCHMARKS.md has the gap); it is here for teams that
want keyword search inside their database. The text search configuration (stemming, stop
words) is the store's `fulltext_config`.

    [query.retrieve]
    use = "pg_fulltext"
    mode = "or"          # "and", "websearch"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plm import ExpandedQuery, ScoredChunk, hookimpl
from plm_plugins.retrievers.pg_search import KeywordOptions, PostgresRetriever, filter_sql, keyword_sql, tsquery_sql

if TYPE_CHECKING:
    from plm import Registry


class PgFulltextRetriever(PostgresRetriever):
    """tsvector @@ tsquery, ranked by ts_rank_cd, in Postgres."""

    name = "pg_fulltext"

    class Config(KeywordOptions):
        pass

    config: Config

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        if n <= 0:
            return []
        tsq, tsq_params = tsquery_sql(self.config, self.store.config.fulltext_config, query.text)
        where, params = filter_sql(query)
        sql = f"WITH q AS MATERIALIZED (SELECT {tsq} AS tsq) " + keyword_sql(self.config, where)
        return self.run_sql(sql, [*tsq_params, *params, n])


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(PgFulltextRetriever)
