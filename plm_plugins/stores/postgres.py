"""Postgres store: documents, chunks (metadata as jsonb, a generated tsvector) and pgvector
vectors in one schema of one database, shared by many processes.

The same contract and guarantees as the SQLite store: one transaction per batch (a crash
leaves each document wholly old or wholly new), every change bumps the corpus version,
writers take turns (a transaction-scoped advisory lock per schema), and a reader inside
`snapshot()` sees one committed state (a REPEATABLE READ transaction) while others write.
Several indexes share one database, one schema each (`schema`). The schema is created and
upgraded idempotently when a writer opens it.

    [store]
    use = "postgres"
    dsn = "postgresql://user@host/db"   # or PLM_DATABASE_URL in the environment
    schema = "plm_docs"

`filter_mask` compiles the filter spec to SQL (`pg_filters`); the `pgvector`,
`pg_fulltext` and `pg_hybrid` retrievers search inside Postgres (`pg_search`).
`plm pg start --data DIR` runs a local server from the `pgserver` wheel (Postgres 16 with
pgvector) for users without one.

The change feed is the SQLite store's: a `seq` per chunk from the `feed_position` counter
in `meta`, new when the chunk is stored or its vector rewritten, and a `removed` table of
the seqs each transaction removed, with the position it reached.

This module is what the store keeps and reads; its other rooms: `pg_connection` (the DSN,
connecting, reconnecting, transactions, errors as one line), `pg_schema` (the tables and
their upgrade), `pg_server` (`plm pg`) and `sql_store` (what it shares with SQLite).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, Field, field_serializer

from plm import Chunk, ComponentConfig, CorpusVersion, Document, Store, StoreError, StoreProblem, hookimpl
from plm_plugins.stores.pg_connection import PgConnection, guarded, redact
from plm_plugins.stores.rows import C_CHUNK_COLS, CHUNK_COLS, chunk_from_row, chunk_row
from plm_plugins.stores.sql_store import (
    ORDER,
    ORDER_KEY,
    VERSION_KEYS,
    corpus_version,
    half_re_embedded,
    store_stats,
    vector_matrix,
    vector_problems,
)

IDENT = r"^[a-z_][a-z0-9_]{0,62}$"
# Index order, as in every store (`sql_store.ORDER`): documents where first stored, then chunks.
CHUNKS_JOIN = "{s}.chunks c JOIN {s}.documents d ON d.id = c.doc_id"


def _chunk_from_row(r: Sequence[Any]) -> Chunk:
    return chunk_from_row(r, lambda value: value)  # jsonb columns arrive decoded


@guarded
class PostgresStore(PgConnection, Store):
    """One schema per index in a Postgres database with the pgvector extension; the
    connection, its reconnects and transactions are `PgConnection`'s."""

    name = "postgres"

    class Config(ComponentConfig):
        model_config = ConfigDict(serialize_by_alias=True)  # `schema` in files, dumps and docs

        dsn: str = ""
        """A libpq connection string or URL; empty: the PLM_DATABASE_URL environment variable."""

        @field_serializer("dsn")
        def _without_password(self, value: str) -> str:
            # A dump is what `plm config check` and a repr print: never the password.
            return redact(value, value)

        schema_name: str = Field("plm", alias="schema", pattern=IDENT)
        """The schema holding this index's tables (lower-case letters, digits, '_'): one per
        index, so several indexes share one database."""
        fulltext_config: str = Field("english", pattern=IDENT)
        """The text search configuration of the chunks' tsvector (what `pg_fulltext` searches),
        e.g. "english", "simple", "german"; changing it regenerates the column."""
        hnsw: bool = True
        """Keep an HNSW index (cosine) on the vectors for `pgvector`'s approximate search."""
        hnsw_m: int = Field(16, ge=2, le=100)
        """HNSW graph degree (pgvector's `m`)."""
        hnsw_ef_construction: int = Field(64, ge=4, le=1000)
        """HNSW build-time candidate list (pgvector's `ef_construction`)."""
        hnsw_build_memory_mb: int = Field(1024, ge=64, le=1_048_576)
        """Memory for building the HNSW index (`maintenance_work_mem` for that statement): a
        graph that does not fit is finished on disk, 2.7x slower at 100k vectors."""
        lock_timeout_ms: int = Field(30_000, ge=0, le=3_600_000)
        """Milliseconds a writer waits for another writer before giving up with an error."""

    config: Config

    # ------------------------------------------------------------------ meta
    def _bump_version(self) -> None:
        self._q(
            "INSERT INTO {s}.meta VALUES ('corpus_version', '1') ON CONFLICT (key) DO UPDATE SET "
            "value = ({s}.meta.value::bigint + 1)::text"
        )
        self.set_meta("version_nonce", uuid.uuid4().hex[:12])

    def _advance_feed(self, added: int) -> tuple[int, int]:
        """In a write transaction: reserve seqs for `added` new chunks and move the feed
        position past them (by one when none are added); returns (first seq, new position),
        the position being what the seqs this transaction removes are recorded with."""
        step = max(added, 1)
        position = self._q(
            "INSERT INTO {s}.meta VALUES ('feed_position', %s) ON CONFLICT (key) DO UPDATE SET "
            "value = ({s}.meta.value::bigint + %s)::text RETURNING value::bigint",
            (str(step), step),
        ).fetchone()[0]
        return int(position) - step + 1, int(position)

    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM {s}.meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._q(
            "INSERT INTO {s}.meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value)
        )

    def version(self) -> CorpusVersion:
        return corpus_version(dict(self._q(f"SELECT key, value FROM {{s}}.meta WHERE key IN {VERSION_KEYS}")))

    # ------------------------------------------------------------------ writes
    def clear(self) -> None:
        with self._tx():
            at = self._advance_feed(0)[1]
            self._q(
                "WITH gone AS (DELETE FROM {s}.chunks RETURNING seq) INSERT INTO {s}.removed SELECT seq, %s FROM gone",
                (at,),
            )
            self._q("DELETE FROM {s}.documents")
            self._bump_version()

    def replace_documents(
        self,
        documents: Sequence[Document],
        chunks: Sequence[Chunk],
        matrix: Any = None,
        model: str | None = None,
        fingerprints: Sequence[str] | None = None,
    ) -> None:
        """Store these documents with exactly these chunks (and vectors, row i for chunks[i]),
        replacing whatever their ids held, in one transaction."""
        from psycopg.types.json import Jsonb

        doc_rows = [
            (d.id, d.title, d.path, d.text, Jsonb(json.loads(json.dumps(dict(d.metadata), default=str))), fp)
            for d, fp in zip(documents, fingerprints or [""] * len(documents), strict=True)
        ]
        if not documents:
            return  # nothing changes, so the corpus version must not either
        vectors = self._vector_rows(chunks, matrix, model) if matrix is not None else [None] * len(chunks)
        as_json = lambda value: Jsonb(json.loads(json.dumps(value, default=str)) if isinstance(value, dict) else value)  # noqa: E731
        chunk_rows = [
            (*chunk_row(c, as_json), model if vector is not None else None, vector)
            for c, vector in zip(chunks, vectors, strict=True)
        ]
        with self._tx(), self.conn.cursor() as cur:
            first, at = self._advance_feed(len(chunk_rows))
            # Upsert keeps an updated document's row, so its place in index order.
            cur.executemany(
                f"INSERT INTO {self.schema}.documents (id, title, path, text, metadata, fingerprint) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET title = excluded.title, "
                "path = excluded.path, text = excluded.text, metadata = excluded.metadata, "
                "fingerprint = excluded.fingerprint",
                doc_rows,
            )
            self._remove_documents_chunks([d.id for d in documents], at)
            cur.executemany(
                f"INSERT INTO {self.schema}.chunks ({CHUNK_COLS}, model, embedding, seq) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(*row, first + n) for n, row in enumerate(chunk_rows)],
            )
            if matrix is not None and len(chunks):
                self._vectors_written(model or "", len(vectors[0]))  # type: ignore[arg-type]
            self._bump_version()

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Remove documents with their chunks and vectors (one transaction); returns the ids found."""
        wanted = list(dict.fromkeys(doc_ids))
        with self._tx():
            # Writers take turns, so the position this delete will reach is known before it.
            at = int(self.get_meta("feed_position") or 0) + 1
            self._remove_documents_chunks(wanted, at)
            found = {r[0] for r in self._q("DELETE FROM {s}.documents WHERE id = ANY(%s) RETURNING id", (wanted,))}
            if found:
                self._advance_feed(0)
                self._bump_version()
        return [i for i in wanted if i in found]

    def _remove_documents_chunks(self, doc_ids: Sequence[str], at: int) -> None:
        """Delete these documents' chunks, their seqs recorded as removed at feed position `at`."""
        self._q(
            "WITH gone AS (DELETE FROM {s}.chunks WHERE doc_id = ANY(%s) RETURNING seq) "
            "INSERT INTO {s}.removed SELECT seq, %s FROM gone",
            (list(doc_ids), at),
        )

    def _vector_rows(self, chunks: Sequence[Any], matrix: Any, model: str | None) -> list[Any]:
        return list(vector_matrix(matrix, len(chunks), model))

    def _vectors_written(self, model: str, dim: int) -> None:
        """Record the model and dimension of the vectors just written."""
        self.set_meta("model", model)
        self.set_meta("dimension", str(dim))

    def has_hnsw(self, dim: int) -> bool:
        """The HNSW index for `dim` exists, or none is wanted (`hnsw = false`, no vectors)."""
        if not self.config.hnsw or dim <= 0:
            return True
        name = f"{self.schema}.chunks_hnsw_{int(dim)}"
        return bool(self._q("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()[0])

    def ensure_hnsw(self, dim: int) -> None:
        """The HNSW index (cosine) for vectors of `dim`, created if missing: a partial index
        per dimension, so a model change never breaks inserts. The ANN retrievers call it
        when their index is built after an ingest: a first ingest inserts rows without an
        index and builds the graph once (much faster than growing it row by row); later
        syncs keep it current as they insert."""
        if not self.config.hnsw or dim <= 0:
            return
        if self.has_hnsw(dim):
            return
        name = f"chunks_hnsw_{int(dim)}"
        memory = f"{int(self.config.hnsw_build_memory_mb)}MB"
        self._q("SELECT set_config('maintenance_work_mem', %s, true)", (memory,))  # this transaction only
        self._q(
            f"CREATE INDEX IF NOT EXISTS {name} ON {{s}}.chunks USING hnsw "
            f"((embedding::vector({int(dim)})) vector_cosine_ops) WITH (m = {self.config.hnsw_m}, "
            f"ef_construction = {self.config.hnsw_ef_construction}) WHERE vector_dims(embedding) = {int(dim)}"
        )

    def write_vectors(
        self, chunk_ids: Sequence[str], matrix: Any, model: str, texts: Sequence[str] | None = None
    ) -> int:
        """Vectors for stored chunks; with `texts`, rows whose chunk now holds another text
        (replaced meanwhile by another process) are skipped. Returns the rows written."""
        vectors = self._vector_rows(chunk_ids, matrix, model)
        expected: Sequence[str | None] = texts if texts is not None else [None] * len(vectors)
        rows = list(zip(chunk_ids, vectors, expected, strict=True))
        with self._tx(), self.conn.cursor() as cur:
            if texts is not None:
                current = self._index_texts(chunk_ids)
                rows = [r for r in rows if current.get(r[0]) == r[2]]
            cur.executemany(
                f"UPDATE {self.schema}.chunks SET model = %s, embedding = %s WHERE id = %s",
                [(model, v, cid) for cid, v, _ in rows],
            )
            if rows:
                self._vectors_written(model, len(vectors[0]))
                self._resequence([r[0] for r in rows])
                self._bump_version()
        return len(rows)

    def _resequence(self, chunk_ids: Sequence[str]) -> None:
        """New seqs for these chunks (their vectors changed), the old ones recorded as removed:
        every derived index, text or vector, sees the chunk go and come back."""
        ids = list(dict.fromkeys(chunk_ids))
        old = dict(self._q("SELECT id, seq FROM {s}.chunks WHERE id = ANY(%s)", (ids,)).fetchall())
        ids = [i for i in ids if i in old]
        first, at = self._advance_feed(len(ids))
        self._q("INSERT INTO {s}.removed SELECT unnest(%s::bigint[]), %s", ([old[i] for i in ids], at))
        self._q(
            "UPDATE {s}.chunks c SET seq = v.seq FROM unnest(%s::text[], %s::bigint[]) AS v(id, seq) WHERE c.id = v.id",
            (ids, list(range(first, first + len(ids)))),
        )

    def _index_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        sql = "SELECT id, coalesce(enriched, text) FROM {s}.chunks WHERE id = ANY(%s)"
        return dict(self._q(sql, (list(chunk_ids),)).fetchall())

    # ------------------------------------------------------------------ reads
    def doc_fingerprints(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        if ids is None:
            return {r[0]: r[1] or "" for r in self._q("SELECT id, fingerprint FROM {s}.documents ORDER BY row")}
        rows = self._q("SELECT id, fingerprint FROM {s}.documents WHERE id = ANY(%s)", (list(ids),))
        return {r[0]: r[1] or "" for r in rows}

    def get_document(self, doc_id: str) -> Document | None:
        row = self._q("SELECT id, title, path, text, metadata FROM {s}.documents WHERE id = %s", (doc_id,)).fetchone()
        if row is None:
            return None
        return Document(id=row[0], text=row[3], title=row[1] or "", path=row[2] or "", metadata=row[4] or {})

    def doc_paths(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        if paths is None:
            return {r[0]: r[1] or "" for r in self._q("SELECT id, path FROM {s}.documents ORDER BY row")}
        return {
            r[0]: r[1] or "" for r in self._q("SELECT id, path FROM {s}.documents WHERE path = ANY(%s)", (list(paths),))
        }

    def paths_of(self, ids: Sequence[str]) -> dict[str, str]:
        return {
            r[0]: r[1] or "" for r in self._q("SELECT id, path FROM {s}.documents WHERE id = ANY(%s)", (list(ids),))
        }

    def chunks(self) -> list[Chunk]:
        return [_chunk_from_row(r) for r in self._q(f"SELECT {C_CHUNK_COLS} FROM {CHUNKS_JOIN} {ORDER}")]

    def chunk_ids(self) -> list[str]:
        return [r[0] for r in self._q(f"SELECT c.id FROM {CHUNKS_JOIN} {ORDER}")]

    def chunk_count(self) -> int:
        # Counted, not read: the base class reads every id (a million at each write).
        return int(self._q("SELECT count(*) FROM {s}.chunks").fetchone()[0])

    def index_texts(self) -> tuple[list[str], list[str]]:
        rows = self._q(f"SELECT c.id, coalesce(c.enriched, c.text) FROM {CHUNKS_JOIN} {ORDER}").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        sql = f"SELECT {CHUNK_COLS} FROM {self.schema}.chunks WHERE id = ANY(%s)"
        return {r[0]: _chunk_from_row(r) for r in self._q(sql, (list(chunk_ids),))}

    def chunk_metadata(self) -> list[dict[str, Any]]:
        return [r[0] for r in self._q(f"SELECT c.metadata FROM {CHUNKS_JOIN} {ORDER}")]

    def filter_mask(self, filters: Any) -> Any:
        """The filter spec compiled to SQL and evaluated in Postgres, one boolean per row."""
        import numpy as np

        from plm_plugins.stores.pg_filters import compile_sql

        where, params = compile_sql(filters, "c.metadata")
        rows = self._q(f"SELECT coalesce({where}, false) FROM {CHUNKS_JOIN} {ORDER}", params).fetchall()
        return np.fromiter((bool(r[0]) for r in rows), dtype=bool, count=len(rows))

    def chunks_needing_vectors(self, model: str) -> list[Chunk]:
        """Chunks whose vector is missing, of another dimension than recorded, or from another model."""
        sql = (
            f"SELECT {C_CHUNK_COLS} FROM {CHUNKS_JOIN} WHERE c.embedding IS NULL OR c.model IS DISTINCT FROM %s "
            "OR vector_dims(c.embedding) != "
            f"coalesce((SELECT value::int FROM {self.schema}.meta WHERE key = 'dimension'), 0) {ORDER}"
        )
        return [_chunk_from_row(r) for r in self._q(sql, (model,))]

    def vectors(self) -> tuple[list[str], Any, str | None]:
        rows = self._q(f"SELECT c.id, c.embedding FROM {CHUNKS_JOIN} WHERE c.embedding IS NOT NULL {ORDER}").fetchall()
        if not rows:
            return [], None, None
        return [r[0] for r in rows], self._matrix([r[1] for r in rows]), self.get_meta("model")

    def _matrix(self, embeddings: Sequence[Any]) -> Any:
        """Vectors as read (pgvector's, or arrays) stacked into one float32 matrix."""
        import numpy as np

        arrays = [np.asarray(e.to_numpy() if hasattr(e, "to_numpy") else e, dtype=np.float32) for e in embeddings]
        if len({a.shape[0] for a in arrays}) != 1:
            raise StoreError(f"{self._explain(Exception('vectors of several dimensions'))}; run `plm index rebuild`")
        return np.stack(arrays)

    # ------------------------------------------------------------------ change feed
    def feed_position(self) -> int:
        """The position of the current state: the counter after its last write transaction."""
        return int(self.get_meta("feed_position") or 0)

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        """(seqs, chunk ids, order keys, index texts) of the chunks with seq > position, by seq."""
        rows = self._q(
            f"SELECT c.seq, c.id, {ORDER_KEY}, coalesce(c.enriched, c.text) FROM {CHUNKS_JOIN} "
            "WHERE c.seq > %s ORDER BY c.seq",
            (position,),
        ).fetchall()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]

    def removed_since(self, position: int) -> list[int] | None:
        """Seqs <= position removed after it, sorted; None when the feed does not reach it."""
        start, now, seqs = self._q(  # one statement: one committed state
            "SELECT (SELECT value::bigint FROM {s}.meta WHERE key = 'feed_start'), "
            "(SELECT value::bigint FROM {s}.meta WHERE key = 'feed_position'), "
            "array(SELECT seq FROM {s}.removed WHERE at > %s AND seq <= %s ORDER BY seq)",
            (position, position),
        ).fetchone()
        return list(seqs) if (start or 0) <= position <= (now or 0) else None

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        """(seqs, float32 matrix, model) of the chunks with seq > position that have vectors;
        StoreError when one of them comes from another model than the store's."""
        rows = self._q(
            f"SELECT c.seq, c.embedding, m.value, c.model FROM {CHUNKS_JOIN} LEFT JOIN {{s}}.meta m "
            "ON m.key = 'model' WHERE c.embedding IS NOT NULL AND c.seq > %s ORDER BY c.seq",
            (position,),
        ).fetchall()
        if not rows:
            return [], None, None
        if other := {r[3] for r in rows} - {rows[0][2]}:
            raise StoreError(half_re_embedded(other, rows[0][2]))
        return [r[0] for r in rows], self._matrix([r[1] for r in rows]), rows[0][2]

    def vector_count(self) -> int:
        return int(self._q("SELECT count(*) FROM {s}.chunks WHERE embedding IS NOT NULL").fetchone()[0])

    def consistency_problems(self) -> list[StoreProblem]:
        one = lambda sql: int(self._q(sql).fetchone()[0])  # noqa: E731
        return vector_problems(
            self.vector_count(),
            lambda: one("SELECT count(*) FROM {s}.chunks WHERE embedding IS NULL"),
            one("SELECT count(DISTINCT model) FROM {s}.chunks WHERE embedding IS NOT NULL"),
        )

    def stats(self) -> dict[str, Any]:
        one = lambda sql: int(self._q(sql).fetchone()[0] or 0)  # noqa: E731
        size = one(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = '{s}' AND c.relkind = 'r'"
        )
        documents, chunks = one("SELECT count(*) FROM {s}.documents"), one("SELECT count(*) FROM {s}.chunks")
        stats = store_stats(documents, chunks, self.vector_count(), self.get_meta, size)
        return {**stats, "location": f"{self._redact(self.dsn())} schema {self.schema}"}


@hookimpl
def plm_register_components(registry: Any) -> None:
    registry.add(PostgresStore)


@hookimpl
def plm_register_commands(app: Any) -> None:
    from plm_plugins.stores.pg_server import pg_app

    app.add_typer(pg_app, name="pg")
