"""The SQLite store's file: found or made in its index folder, connected (WAL mode, or
immutable where the folder cannot be written), and its tables created or migrated when a
writer opens it. Nothing is written when they are complete and current, so opening an
up-to-date store never takes the write lock (readers do not wait behind an ingest)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

from plm import StoreError
from plm_plugins.stores.sqlite_errors import explain

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, title TEXT, path TEXT,
    text TEXT NOT NULL, metadata TEXT NOT NULL, fingerprint TEXT);
CREATE TABLE IF NOT EXISTS chunks (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, stable_id TEXT, doc_id TEXT NOT NULL
        REFERENCES documents(id) ON DELETE CASCADE,
    text TEXT NOT NULL, enriched TEXT, heading_path TEXT NOT NULL, start_char INTEGER,
    end_char INTEGER, keywords TEXT NOT NULL, entities TEXT NOT NULL, metadata TEXT NOT NULL, seq INTEGER);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE INDEX IF NOT EXISTS documents_path ON documents(path);
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id TEXT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS removed (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS removed_at ON removed(at);
"""


def connect(path: Path, busy_ms: int, create: bool) -> tuple[sqlite3.Connection, bool]:
    """The database at `path` (made, with its folder, when `create`) and whether it is read-only."""
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"index location {folder} is a file, not a folder: pass a folder with --index")
    if not path.exists():
        if not create:
            where = folder.absolute()
            raise StoreError(f"no index at {where}: run `plm ingest` (or `plm run`) with this config first")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"cannot create the index folder {folder}: {err.strerror or err}") from None
    writable = os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
    try:
        if writable:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        else:  # WAL readers need to write -shm; on a read-only mount nothing can change the file
            db = sqlite3.connect(
                f"{path.resolve().as_uri()}?immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        db.execute(f"PRAGMA busy_timeout={busy_ms}")
        if writable:
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA foreign_keys=ON")
        if writable:
            prepare(db)
        elif not ready(db):
            raise StoreError(
                f"the store {path} is read-only and was made by an older plm: upgrade it where it is writable"
            )
    except sqlite3.DatabaseError as err:
        raise StoreError(explain(path, err, busy_ms)) from None
    return db, not writable


def ready(db: sqlite3.Connection) -> bool:
    """The schema is complete and current."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {"meta", "documents", "chunks", "vectors", "removed"} <= tables:
        return False
    columns = {r[1] for r in db.execute("PRAGMA table_info(documents)")}
    keys = db.execute("SELECT count(*) FROM meta WHERE key IN ('store_uid', 'feed_position')").fetchone()[0]
    # Documents found by path (a sync's prune, a watcher's batch): indexed since path ids.
    by_path = db.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='documents_path'").fetchone()
    return "fingerprint" in columns and keys == 2 and by_path is not None


def prepare(db: sqlite3.Connection) -> None:
    """Create or migrate the schema, writing only when something is missing."""
    if ready(db):
        return
    db.execute("BEGIN IMMEDIATE")  # two processes opening an old store: one migrates
    try:
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        if "fingerprint" not in {r[1] for r in db.execute("PRAGMA table_info(documents)")}:
            db.execute("ALTER TABLE documents ADD COLUMN fingerprint TEXT")  # stores from before sync
        if db.execute("SELECT 1 FROM meta WHERE key='feed_position'").fetchone() is None:
            _start_feed(db)
        db.execute("CREATE UNIQUE INDEX IF NOT EXISTS chunks_seq ON chunks(seq)")
        # Part of every version token, so a store deleted and re-created never matches
        # a BM25 index built for the old one.
        db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('store_uid', ?)", (uuid.uuid4().hex,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _start_feed(db: sqlite3.Connection) -> None:
    """Number the stored chunks 1..n in index order (none in a new store) and start the feed
    at n: a store from before the change feed keeps its data, and no removal before n is known."""
    if "seq" not in {r[1] for r in db.execute("PRAGMA table_info(chunks)")}:
        db.execute("ALTER TABLE chunks ADD COLUMN seq INTEGER")
    rows = db.execute(
        "SELECT c.row FROM chunks c LEFT JOIN documents d ON d.id = c.doc_id ORDER BY d.row IS NULL, d.row, c.row"
    ).fetchall()
    db.executemany("UPDATE chunks SET seq = ? WHERE row = ?", ((n, r[0]) for n, r in enumerate(rows, 1)))
    for key in ("feed_position", "feed_start"):
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, str(len(rows))))
