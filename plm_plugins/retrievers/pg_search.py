"""What the Postgres retrievers share: the store check, the query vector, and the ranked
sub-queries (dense by pgvector, keyword by tsvector) that `pgvector`, `pg_fulltext` and
`pg_hybrid` run inside Postgres.

Filters are compiled to SQL (`plm_plugins.stores.pg_filters`) and applied inside each
sub-query before its LIMIT, so n hits come back whenever n chunks match. Every value is a
bound parameter; only identifiers checked by the store's config are put in the SQL text.
Searches run on the store's connection, inside the snapshot the core opens per query.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field

from plm import (
    ComponentConfig,
    ConfigError,
    Corpus,
    CorpusVersion,
    EmbeddedQuery,
    Embedder,
    ExpandedQuery,
    Retriever,
    ScoredChunk,
    Snapshot,
    StoreError,
    require_embedder,
)

MAX_WORDS = 256  # distinct query words a keyword search ORs together
EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search


class DenseOptions(ComponentConfig):
    exact: bool = False
    """Always scan every vector (exact, as the `dense` retriever); false: use the store's HNSW
    index, falling back to exact search when the filter is tight or the index returns too few."""
    ef_search: int = Field(100, ge=1, le=EF_SEARCH_MAX)
    """HNSW search width (pgvector's hnsw.ef_search); raised to the number of hits asked for."""
    exact_below: int = Field(10_000, ge=0)
    """With a filter that leaves fewer rows than this, search exactly (HNSW under a tight
    filter returns too few)."""


class KeywordOptions(ComponentConfig):
    mode: str = Field("or", pattern="^(or|and|websearch)$")
    """How the query becomes a tsquery: "or" (any query word, ranked: like BM25's recall),
    "and" (plainto_tsquery: every word) or "websearch" (websearch_to_tsquery: quotes, -, or)."""
    normalization: int = Field(0, ge=0, le=63)
    """ts_rank_cd's length normalisation bitmask (0: none; 1: divide by 1 + log(length); ...)."""


class PostgresRetriever(Retriever):
    """A retriever whose index is the Postgres store itself: nothing to build or save."""

    needs = ("corpus", "embedder")
    corpus: Corpus
    embedder: Embedder | None
    uses_vectors = False

    @property
    def store(self) -> Any:
        from plm_plugins.stores.postgres import PostgresStore

        store = self.corpus.store
        if not isinstance(store, PostgresStore):
            raise ConfigError(
                f"retriever {self.label!r} ({getattr(self, 'name', '?')}) searches inside Postgres: set [store] "
                f'use = "postgres" (the config\'s store is {getattr(store, "name", type(store).__name__)!r})'
            )
        return store

    def check(self) -> None:
        self.store  # noqa: B018 - raises ConfigError for another store
        if self.uses_vectors:
            require_embedder(self, "embeds the query")

    @property
    def wants_hnsw(self) -> bool:
        return self.uses_vectors and not getattr(self.config, "exact", True)

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        self.load(snapshot, index_dir or Path("."))
        if index_dir is not None and self.wants_hnsw:  # after an ingest (queries never write)
            self.store.ensure_hnsw(self.dim)

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        """True unless an approximate search lacks its HNSW index (an ingest then builds it)."""
        if not self.wants_hnsw:
            return True
        return bool(self.store.has_hnsw(int(self.store.get_meta("dimension") or 0)))

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        if not self.uses_vectors:
            return
        embedder = require_embedder(self, "embeds the query")
        stored = self.store.get_meta("model")
        if stored and stored != embedder.model_name:
            raise StoreError(
                f"the index in {self.store.stats()['location']} was embedded with {stored!r} but the config now "
                f"loads {embedder.model_name!r}: run `plm ingest --force` (or `plm run`)"
            )
        self.dim = int(self.store.get_meta("dimension") or 0)

    def query_vector(self, query: ExpandedQuery) -> Any:
        import numpy as np

        vector = query.vector if isinstance(query, EmbeddedQuery) else None
        if vector is None:
            embedder = require_embedder(self, "embeds the query")
            embedder.ensure_warm()
            vector = embedder.embed_query(query.text)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self.dim and vector.shape[0] != self.dim:
            raise StoreError(
                f"retriever {self.label!r}: the query vector has {vector.shape[0]} dimensions but the stored "
                f"vectors have {self.dim}; the embedder changed since ingest, run `plm ingest --force`"
            )
        return vector

    def run_sql(self, sql: str, params: list[Any]) -> list[ScoredChunk]:
        rows = self.store.conn.execute(sql.replace("{s}", self.store.schema), params).fetchall()
        return [ScoredChunk(chunk_id=r[0], score=float(r[1]), source=self.label, rank=i) for i, r in enumerate(rows)]


def filter_sql(query: ExpandedQuery) -> tuple[str, list[Any]]:
    from plm_plugins.stores.pg_filters import compile_sql

    return compile_sql(query.filters or None, "c.metadata")


def use_exact(options: DenseOptions, n: int, allowed: Any) -> bool:
    """Exact when configured, when more hits are asked than HNSW can give, or under a tight filter."""
    if options.exact or n > EF_SEARCH_MAX:
        return True
    return allowed is not None and int(allowed.sum()) < options.exact_below


def dense_sql(exact: bool, dim: int, where: str) -> str:
    """Chunk id and cosine similarity, best first, for params (vector, *where params, vector, n).
    The ANN form orders by the expression the store's HNSW index is built on (one partial
    index per dimension); the exact form by the bare column, which no index serves."""
    if exact:
        return (
            "SELECT c.id, 1 - (c.embedding <=> %s) FROM {s}.chunks c JOIN {s}.documents d ON d.id = c.doc_id "
            f"WHERE c.embedding IS NOT NULL AND ({where}) ORDER BY c.embedding <=> %s, d.row DESC, c.row DESC LIMIT %s"
        )
    cast = f"c.embedding::vector({int(dim)})"
    return (
        f"SELECT c.id, 1 - ({cast} <=> %s) FROM {{s}}.chunks c WHERE vector_dims(c.embedding) = {int(dim)} "
        f"AND ({where}) ORDER BY {cast} <=> %s LIMIT %s"
    )


def set_ef_search(store: Any, options: DenseOptions, n: int) -> None:
    """hnsw.ef_search for this transaction (the query's snapshot) only."""
    ef = min(EF_SEARCH_MAX, max(options.ef_search, n))
    store.conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))


def tsquery_sql(options: KeywordOptions, fulltext: str, text: str) -> tuple[str, list[Any]]:
    """A tsquery expression and its params for the query text. "or" mode ORs (`||`) one
    plainto_tsquery per distinct word, so stop words and stemming follow the configuration."""
    if options.mode == "and":
        return f"plainto_tsquery('{fulltext}', %s)", [text]
    if options.mode == "websearch":
        return f"websearch_to_tsquery('{fulltext}', %s)", [text]
    words = list(dict.fromkeys(w.lower() for w in re.findall(r"\w+", text)))[:MAX_WORDS] or [""]
    return " || ".join([f"plainto_tsquery('{fulltext}', %s)"] * len(words)), words


def keyword_sql(options: KeywordOptions, where: str) -> str:
    """Chunk id and ts_rank_cd, best first, for params (*where params, n), from `WITH q(tsq)`."""
    rank = f"ts_rank_cd(c.tsv, q.tsq, {int(options.normalization)})"
    return (
        f"SELECT c.id, {rank} FROM {{s}}.chunks c JOIN {{s}}.documents d ON d.id = c.doc_id, q "
        f"WHERE c.tsv @@ q.tsq AND ({where}) ORDER BY {rank} DESC, d.row, c.row LIMIT %s"
    )
