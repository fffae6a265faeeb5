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
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import re
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_serializer

from plm import (
    Chunk,
    ComponentConfig,
    CorpusVersion,
    Document,
    MissingDependencyError,
    Store,
    StoreError,
    StoreProblem,
    hookimpl,
)
from plm_plugins.stores.rows import C_CHUNK_COLS, CHUNK_COLS, chunk_from_row, chunk_row

log = logging.getLogger(__name__)

IDENT = r"^[a-z_][a-z0-9_]{0,62}$"
# Index order, as in every store: documents where first stored, then chunks in document order.
CHUNKS_JOIN = "{s}.chunks c JOIN {s}.documents d ON d.id = c.doc_id"
ORDER = "ORDER BY d.row, c.row"
# A chunk's place in index order as one int64 (sorting by it is ORDER BY d.row, c.row).
ORDER_KEY = "d.row * 4294967296 + c.row"


def schema_sql(s: str, fulltext: str) -> str:
    """The tables of one index in schema `s` (identifiers checked by the config)."""
    return f"""
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.documents (
    row bigserial PRIMARY KEY, id text UNIQUE NOT NULL, title text, path text,
    text text NOT NULL, metadata jsonb NOT NULL, fingerprint text);
CREATE TABLE IF NOT EXISTS {s}.chunks (
    row bigserial PRIMARY KEY, id text UNIQUE NOT NULL, stable_id text,
    doc_id text NOT NULL REFERENCES {s}.documents(id) ON DELETE CASCADE,
    text text NOT NULL, enriched text, heading_path jsonb NOT NULL, start_char integer,
    end_char integer, keywords jsonb NOT NULL, entities jsonb NOT NULL, metadata jsonb NOT NULL,
    model text, embedding vector,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{fulltext}'::regconfig, coalesce(enriched, text))) STORED,
    seq bigint NOT NULL);
ALTER TABLE {s}.chunks ADD COLUMN IF NOT EXISTS seq bigint;
CREATE UNIQUE INDEX IF NOT EXISTS chunks_seq ON {s}.chunks (seq);
CREATE TABLE IF NOT EXISTS {s}.removed (seq bigint PRIMARY KEY, at bigint NOT NULL);
CREATE INDEX IF NOT EXISTS removed_at ON {s}.removed (at);
CREATE INDEX IF NOT EXISTS chunks_doc ON {s}.chunks (doc_id);
CREATE INDEX IF NOT EXISTS documents_path ON {s}.documents (path);
CREATE INDEX IF NOT EXISTS chunks_tsv ON {s}.chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS chunks_meta ON {s}.chunks USING gin (metadata jsonb_path_ops);
"""


def schema_version(fulltext: str) -> str:
    """Changes when the tables, the SQL helpers or the text search configuration do: a store
    opened by a writer with another one is upgraded (idempotent DDL, then this is recorded)."""
    import hashlib

    from plm_plugins.stores.pg_filters import SQL_FUNCTIONS

    return hashlib.sha1((schema_sql("s", fulltext) + SQL_FUNCTIONS + RRF_SQL).encode()).hexdigest()[:16]


RRF_SQL = "RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 1.0 / (k + rank)'"


# Every form libpq takes a credential in: a URI's user:password@ (to the last @ of the word),
# password= or sslpassword= as key = value (quoted with \' escapes, or bare) or as a URI query
# parameter.
_URI_PASSWORD = re.compile(r"(://[^:/@\s\"']*):[^\s\"']*@")
_KEY_PASSWORD = re.compile(r"(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&\"']+)", re.IGNORECASE)


def redact(text: str, dsn: str = "") -> str:
    """`text` (a DSN, or a message that may quote one) without passwords: every form libpq
    accepts is masked, and so is each password of `dsn` wherever else it appears."""
    secrets = set()
    for match in _URI_PASSWORD.finditer(dsn):
        userinfo = match.group(0)[len(match.group(1)) + 1 : -1]
        secrets |= {userinfo, urllib.parse.unquote(userinfo)}
    for match in _KEY_PASSWORD.finditer(dsn):
        value = match.group(2)
        secrets |= {value, re.sub(r"\\(.)", r"\1", value.strip("'")), urllib.parse.unquote(value)}
    # A quoted password's words too: a message may quote the value escaped another way; and
    # what follows an unencoded @ in it, which libpq takes for a host name and prints.
    secrets |= {word for secret in secrets for word in re.split(r"[\s'\\@]+", secret) if len(word) >= 6}
    text = _URI_PASSWORD.sub(r"\1:***@", text)
    text = _KEY_PASSWORD.sub(r"\1***", text)
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:  # shorter ones would mask ordinary letters; the patterns above hold them
            text = text.replace(secret, "***")
    return text


def _chunk_from_row(r: Sequence[Any]) -> Chunk:
    return chunk_from_row(r, lambda value: value)  # jsonb columns arrive decoded


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """A database error from a public method becomes one StoreError line (which server,
    what to do), not a psycopg traceback; a caller's bug (a duplicate id) keeps its own."""

    @functools.wraps(method)
    def call(self: PostgresStore, *args: Any, **kwargs: Any) -> Any:
        import psycopg

        try:
            return method(self, *args, **kwargs)
        except (psycopg.errors.IntegrityError, psycopg.ProgrammingError):
            raise
        except psycopg.Error as err:
            if not self._lost():
                raise StoreError(self._explain(err)) from None
            lost = err
        # The server went away (a restart): reconnect, then run a read again. A write is not
        # run again (its transaction may or may not have committed): the caller is told.
        if self._pinned:
            raise StoreError(f"{self._explain(lost)} (the connection was lost inside a read snapshot)")
        self._reconnect(lost)
        if method.__name__ in _WRITES:
            raise StoreError(f"{self._explain(lost)}: reconnected, but the write may not have been applied: retry it")
        try:
            return method(self, *args, **kwargs)
        except (psycopg.errors.IntegrityError, psycopg.ProgrammingError):
            raise
        except psycopg.Error as err:
            raise StoreError(self._explain(err)) from None

    return call


_WRITES = frozenset({"replace_documents", "delete_documents", "write_vectors", "clear", "set_meta", "ensure_hnsw"})
RECONNECT_DELAYS_S = (0.2, 1.0, 3.0)  # then the error: a caller (the server's reloader) tries again later


def _guard_public_methods(cls: type) -> type:
    for name, value in list(vars(cls).items()):
        if inspect.isfunction(value) and not name.startswith("_") and name not in ("snapshot", "open"):
            setattr(cls, name, _guarded(value))
    return cls


@_guard_public_methods
class PostgresStore(Store):
    """One schema per index in a Postgres database with the pgvector extension."""

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
    _conn: Any = None
    _pinned = False  # inside a read snapshot: a lost connection cannot be silently replaced
    _dropped = False  # the connection was lost and not yet replaced (not closed by the caller)

    # ------------------------------------------------------------------ connection
    @property
    def schema(self) -> str:
        return self.config.schema_name

    @property
    def conn(self) -> Any:
        if self._conn is None:
            if not self._dropped:
                raise StoreError("the store is not open")
            self._reconnect(StoreError("the connection was lost"))  # an earlier reconnect failed
        return self._conn

    def dsn(self) -> str:
        dsn = self.config.dsn or os.environ.get("PLM_DATABASE_URL", "")
        if not dsn:
            raise StoreError(
                "the postgres store needs a database: set [store] dsn in the config or PLM_DATABASE_URL "
                "(e.g. postgresql://user@localhost/plm; `plm pg start --data DIR` runs a local server)"
            )
        authority = re.split(r"[/?#]", dsn.split("://", 1)[-1], maxsplit=1)[0]
        if dsn.startswith(("postgresql://", "postgres://")) and authority.count("@") > 1:
            # libpq reads the host from after the first @: it would try to resolve (and print)
            # the password's tail as a host name
            raise StoreError(
                "the database URL's user or password holds an unencoded '@': write it as %40 "
                "(e.g. postgresql://user:p%40ss@localhost/plm)"
            )
        return dsn

    def _redact(self, text: str) -> str:
        return redact(text, self.config.dsn or os.environ.get("PLM_DATABASE_URL", ""))

    def _explain(self, err: Exception) -> str:
        where = f"schema {self.schema} at {self._redact(self.config.dsn or os.environ.get('PLM_DATABASE_URL', ''))}"
        text = self._redact(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)
        if "lock timeout" in text or "canceling statement due to lock" in text:
            return (
                f"the store ({where}) is locked by another writer for longer than lock_timeout_ms = "
                f"{self.config.lock_timeout_ms}: wait for it to finish, or raise [store] lock_timeout_ms"
            )
        return f"postgres store ({where}): {text}"

    def open(self, location: str | Path, create: bool = True) -> None:
        """Connect and (with `create`) create or upgrade the schema. `location` (the index
        folder, where derived indexes such as BM25 builds live) is not where data goes."""
        try:
            import psycopg
            from pgvector.psycopg import register_vector
        except ImportError:
            raise MissingDependencyError("the postgres store (psycopg, pgvector)", "postgres") from None
        self.location = location
        try:
            conn = psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10)
        except psycopg.Error as err:
            raise StoreError(
                self._redact(
                    f"cannot connect to Postgres at {self.dsn()}: {str(err).strip().splitlines()[-1].strip()} "
                    "(is the server running? `plm pg start --data DIR` starts a local one)"
                )
            ) from None
        try:
            conn.execute(f"SET lock_timeout = {int(self.config.lock_timeout_ms)}")
            conn.execute("SET client_min_messages = warning")  # not a NOTICE per stop-word-only tsquery
            state = self._state(conn)
            if state == "missing" and not create:
                raise StoreError(
                    f"no index in schema {self.schema} at {self._redact(self.dsn())}: run `plm ingest` (or `plm run`) "
                    "with this config first"
                )
            if state != "ready":  # created, or upgraded in place (idempotent), by whoever opens it first
                self._prepare(conn)
            register_vector(conn)
            conn.execute(f"SET search_path = {self.schema}, public")
        except psycopg.Error as err:
            conn.close()
            raise StoreError(self._explain(err)) from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _state(self, conn: Any) -> str:
        """ "missing" (no index here), "stale" (made by another plm or text search
        configuration: upgrade it) or "ready"."""
        row = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
            (f"{self.schema}.meta", f"{self.schema}.chunks"),
        ).fetchone()
        if not row[0]:
            return "missing"
        meta = dict(conn.execute(f"SELECT key, value FROM {self.schema}.meta").fetchall())
        if "store_uid" not in meta:
            return "missing"
        return "ready" if meta.get("schema_version") == schema_version(self.config.fulltext_config) else "stale"

    def _prepare(self, conn: Any) -> None:
        """Create the extension, schema, tables and SQL helpers; regenerate the tsvector
        when the text search configuration changed. Two processes doing it at once take turns."""
        from plm_plugins.stores.pg_filters import SQL_FUNCTIONS

        s, fulltext = self.schema, self.config.fulltext_config
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('plm-schema'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(schema_sql(s, fulltext))
            conn.execute(f"SET LOCAL search_path = {s}, public")
            conn.execute(SQL_FUNCTIONS)
            conn.execute(f"CREATE OR REPLACE FUNCTION {s}.rrf_score(rank bigint, k integer) {RRF_SQL}")
            stored = conn.execute(f"SELECT value FROM {s}.meta WHERE key = 'fulltext_config'").fetchone()
            if stored is not None and stored[0] != fulltext:
                conn.execute(f"ALTER TABLE {s}.chunks DROP COLUMN tsv")
                conn.execute(
                    f"ALTER TABLE {s}.chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
                    f"(to_tsvector('{fulltext}'::regconfig, coalesce(enriched, text))) STORED"
                )
                conn.execute(f"CREATE INDEX IF NOT EXISTS chunks_tsv ON {s}.chunks USING gin (tsv)")
            if conn.execute(f"SELECT 1 FROM {s}.meta WHERE key = 'feed_position'").fetchone() is None:
                self._start_feed(conn)
            conn.execute(f"ALTER TABLE {s}.chunks ALTER COLUMN seq SET NOT NULL")
            conn.execute(f"INSERT INTO {s}.meta VALUES ('store_uid', %s) ON CONFLICT DO NOTHING", (uuid.uuid4().hex,))
            conn.execute(
                f"INSERT INTO {s}.meta VALUES ('fulltext_config', %s) ON CONFLICT (key) DO UPDATE SET value = "
                "excluded.value",
                (fulltext,),
            )
            conn.execute(
                f"INSERT INTO {s}.meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value = "
                "excluded.value",
                (schema_version(fulltext),),
            )

    def _start_feed(self, conn: Any) -> None:
        """Number the stored chunks 1..n in index order (none in a new schema) and start the
        feed at n: a store from before the change feed keeps its data, and no removal before
        n is known."""
        s = self.schema
        n = conn.execute(
            f"UPDATE {s}.chunks c SET seq = o.n FROM (SELECT c.id, row_number() OVER "
            f"(ORDER BY d.row NULLS LAST, c.row) AS n FROM {s}.chunks c LEFT JOIN {s}.documents d "
            "ON d.id = c.doc_id) o WHERE c.id = o.id"
        ).rowcount
        for key in ("feed_position", "feed_start"):
            conn.execute(
                f"INSERT INTO {s}.meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, str(n)),
            )

    def close(self) -> None:
        self._dropped = False
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _lost(self) -> bool:
        """True when the connection is gone (the server restarted or dropped it)."""
        if self._conn is None:
            return self._dropped
        return bool(self._conn.closed or self._conn.broken)

    def _reconnect(self, err: Exception) -> None:
        """A new connection after a lost one, tried len(RECONNECT_DELAYS_S) times."""
        if self._pinned:
            raise StoreError(f"{self._explain(err)} (the connection was lost inside a read snapshot)")
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._dropped = True
        for delay in RECONNECT_DELAYS_S:
            try:
                self.open(self.location, create=False)
                self._dropped = False
                log.warning("postgres store: reconnected to %s", redact(self.dsn()))
                return
            except StoreError as again:
                err = again
                time.sleep(delay)
        raise StoreError(
            f"lost the connection to Postgres ({self._explain(err)}) and could not reconnect in "
            f"{len(RECONNECT_DELAYS_S)} tries: is the server running?"
        )

    def _q(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql.replace("{s}", self.schema), params)

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees one committed state (a REPEATABLE READ transaction)."""
        import psycopg

        if self._pinned or (
            not self._lost() and self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            yield
            return
        try:
            if self._lost():
                self._reconnect(psycopg.OperationalError("the connection is closed"))
            self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        except psycopg.Error as err:
            raise StoreError(self._explain(err)) from None
        self._pinned = True
        try:
            yield
        except BaseException:
            self._pinned = False
            self._end_snapshot(raised=True)
            raise
        self._pinned = False
        self._end_snapshot(raised=False)

    def _end_snapshot(self, raised: bool) -> None:
        import psycopg

        if self._lost():  # the server rolled the transaction back when it went away
            if not raised:
                raise StoreError(self._explain(psycopg.OperationalError("the connection was lost before COMMIT")))
            return
        failed = self.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        try:
            self.conn.execute("ROLLBACK" if failed else "COMMIT")
        except psycopg.Error as err:
            if not failed and not raised:  # else the error in flight says more
                raise StoreError(self._explain(err)) from None

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """A write transaction; writers of one schema take turns (advisory lock)."""
        with self.conn.transaction():
            self._q("SELECT pg_advisory_xact_lock(hashtext('plm-write:{s}'))")
            yield

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
        rows = dict(
            self._q("SELECT key, value FROM {s}.meta WHERE key IN ('store_uid', 'version_nonce', 'corpus_version')")
        )
        return CorpusVersion(
            str(rows.get("store_uid", "")), int(rows.get("corpus_version") or 0), str(rows.get("version_nonce", ""))
        )

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
        import numpy as np

        mat = np.ascontiguousarray(matrix, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(chunks):
            raise ValueError(f"vectors shape {mat.shape} does not match {len(chunks)} chunk ids")
        if not model:
            raise ValueError("vectors need the name of the model that made them")
        return list(mat)

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
        import numpy as np

        rows = self._q(f"SELECT c.id, c.embedding FROM {CHUNKS_JOIN} WHERE c.embedding IS NOT NULL {ORDER}").fetchall()
        if not rows:
            return [], None, None
        arrays = [np.asarray(r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1], dtype=np.float32) for r in rows]
        if len({a.shape[0] for a in arrays}) != 1:
            raise StoreError(f"{self._explain(Exception('vectors of several dimensions'))}; run `plm index rebuild`")
        matrix = np.stack(arrays)
        return [r[0] for r in rows], matrix, self.get_meta("model")

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
        import numpy as np

        rows = self._q(
            f"SELECT c.seq, c.embedding, m.value, c.model FROM {CHUNKS_JOIN} LEFT JOIN {{s}}.meta m "
            "ON m.key = 'model' WHERE c.embedding IS NOT NULL AND c.seq > %s ORDER BY c.seq",
            (position,),
        ).fetchall()
        if not rows:
            return [], None, None
        if other := {r[3] for r in rows} - {rows[0][2]}:
            raise StoreError(
                f"vectors from {sorted(other)} beside the store's {rows[0][2]!r} (half re-embedded): "
                "run `plm ingest` on the same sources to finish, or `plm index rebuild`"
            )
        arrays = [np.asarray(r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1], dtype=np.float32) for r in rows]
        if len({a.shape[0] for a in arrays}) != 1:
            raise StoreError(f"{self._explain(Exception('vectors of several dimensions'))}; run `plm index rebuild`")
        return [r[0] for r in rows], np.stack(arrays), rows[0][2]

    def vector_count(self) -> int:
        return int(self._q("SELECT count(*) FROM {s}.chunks WHERE embedding IS NOT NULL").fetchone()[0])

    def consistency_problems(self) -> list[StoreProblem]:
        problems = []
        one = lambda sql: int(self._q(sql).fetchone()[0])  # noqa: E731
        if (vectors := self.vector_count()) and (n := one("SELECT count(*) FROM {s}.chunks WHERE embedding IS NULL")):
            problems.append(
                StoreProblem(StoreProblem.MISSING_VECTORS, n, f"{n} chunks have no vector (and {vectors} do)")
            )
        if (n := one("SELECT count(DISTINCT model) FROM {s}.chunks WHERE embedding IS NOT NULL")) > 1:
            problems.append(StoreProblem(StoreProblem.MIXED_MODELS, n, f"vectors from {n} different models"))
        return problems

    def stats(self) -> dict[str, Any]:
        one = lambda sql: int(self._q(sql).fetchone()[0] or 0)  # noqa: E731
        size = one(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = '{s}' AND c.relkind = 'r'"
        )
        return {
            "documents": one("SELECT count(*) FROM {s}.documents"),
            "chunks": one("SELECT count(*) FROM {s}.chunks"),
            "vectors": self.vector_count(),
            "model": self.get_meta("model"),
            "dimension": int(self.get_meta("dimension") or 0),
            "corpus_version": int(self.get_meta("corpus_version") or 0),
            "bytes": size,
            "location": f"{self._redact(self.dsn())} schema {self.schema}",
        }


@hookimpl
def plm_register_components(registry: Any) -> None:
    registry.add(PostgresStore)


@hookimpl
def plm_register_commands(app: Any) -> None:
    from plm_plugins.stores.pg_server import pg_app

    app.add_typer(pg_app, name="pg")
