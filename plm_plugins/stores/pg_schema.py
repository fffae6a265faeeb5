"""The postgres store's schema: the tables of one index, the SQL helpers its retrievers call,
and the idempotent DDL that creates or upgrades them when a writer opens the store.

`schema_state` tells whether a schema holds a current index; `prepare_schema` creates the
extension, tables and helpers, regenerates the tsvector when the text search configuration
changed and starts the change feed of a store made before it. Identifiers (the schema and
the text search configuration) are checked by the store's config before they reach here.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from plm_plugins.stores.pg_filters import SQL_FUNCTIONS

RRF_SQL = "RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT 1.0 / (k + rank)'"


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
    return hashlib.sha1((schema_sql("s", fulltext) + SQL_FUNCTIONS + RRF_SQL).encode()).hexdigest()[:16]


def schema_state(conn: Any, s: str, fulltext: str) -> str:
    """ "missing" (no index in schema `s`), "stale" (made by another plm or text search
    configuration: upgrade it) or "ready"."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL", (f"{s}.meta", f"{s}.chunks")
    ).fetchone()
    if not row[0]:
        return "missing"
    meta = dict(conn.execute(f"SELECT key, value FROM {s}.meta").fetchall())
    if "store_uid" not in meta:
        return "missing"
    return "ready" if meta.get("schema_version") == schema_version(fulltext) else "stale"


def prepare_schema(conn: Any, s: str, fulltext: str) -> None:
    """Create the extension, schema `s`, tables and SQL helpers; regenerate the tsvector
    when the text search configuration changed. Two processes doing it at once take turns."""
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
            _start_feed(conn, s)
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


def _start_feed(conn: Any, s: str) -> None:
    """Number the stored chunks 1..n in index order (none in a new schema) and start the
    feed at n: a store from before the change feed keeps its data, and no removal before
    n is known."""
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
