"""SQLite store: documents, chunks (with enrichment) and float32 vectors in one file.

WAL mode so readers see a consistent snapshot while a writer ingests; every batch is
one transaction. Derived indexes (BM25, vector matrix) are rebuilt from these tables.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from plm_core.component import ComponentConfig
from plm_core.errors import StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Store
from plm_core.records import Chunk, Document

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, title TEXT, path TEXT,
    text TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, stable_id TEXT, doc_id TEXT NOT NULL
        REFERENCES documents(id) ON DELETE CASCADE,
    text TEXT NOT NULL, enriched TEXT, heading_path TEXT NOT NULL, start_char INTEGER,
    end_char INTEGER, keywords TEXT NOT NULL, entities TEXT NOT NULL, metadata TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE TABLE IF NOT EXISTS vectors (
    chunk_id TEXT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL);
"""

CHUNK_COLS = "id, doc_id, text, enriched, heading_path, start_char, end_char, stable_id, keywords, entities, metadata"


def _chunk_from_row(r: sqlite3.Row) -> Chunk:
    return Chunk(
        id=r[0],
        doc_id=r[1],
        text=r[2],
        enriched=r[3],
        heading_path=tuple(json.loads(r[4])),
        start_char=r[5],
        end_char=r[6],
        stable_id=r[7] or "",
        keywords=tuple(json.loads(r[8])),
        entities={k: tuple(v) for k, v in json.loads(r[9]).items()},
        metadata=json.loads(r[10]),
    )


class SQLiteStore(Store):
    """One `plm.sqlite` file per index folder."""

    name = "sqlite"

    class Config(ComponentConfig):
        filename: str = "plm.sqlite"
        busy_timeout_ms: int = Field(30_000, ge=0)

    config: Config

    _db: sqlite3.Connection | None = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    def open(self, index_dir: Path) -> None:
        self.path = Path(index_dir) / self.config.filename
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout={self.config.busy_timeout_ms}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(SCHEMA)
        except sqlite3.DatabaseError as err:
            raise StoreError(f"cannot open store {self.path}: {err}") from None
        self._db = db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    def _bump_version(self) -> None:
        version = int(self.get_meta("corpus_version") or 0) + 1
        self.set_meta("corpus_version", str(version))

    def clear(self) -> None:
        with self._tx():
            self.db.execute("DELETE FROM vectors")
            self.db.execute("DELETE FROM chunks")
            self.db.execute("DELETE FROM documents")
            self._bump_version()

    def _tx(self) -> Any:
        db = self.db

        class _Tx:
            def __enter__(self) -> None:
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type: Any, *_: Any) -> None:
                db.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()

    def write_batch(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> None:
        doc_rows = [(d.id, d.title, d.path, d.text, json.dumps(dict(d.metadata), default=str)) for d in documents]
        chunk_rows = [
            (
                c.id,
                c.doc_id,
                c.text,
                c.enriched,
                json.dumps(list(c.heading_path)),
                c.start_char,
                c.end_char,
                c.stable_id,
                json.dumps(list(c.keywords)),
                json.dumps({k: list(v) for k, v in c.entities.items()}),
                json.dumps(dict(c.metadata), default=str),
            )
            for c in chunks
        ]
        with self._tx():
            self.db.executemany("INSERT INTO documents(id, title, path, text, metadata) VALUES(?,?,?,?,?)", doc_rows)
            self.db.executemany(f"INSERT INTO chunks({CHUNK_COLS}) VALUES(?,?,?,?,?,?,?,?,?,?,?)", chunk_rows)
            self._bump_version()

    def write_vectors(self, chunk_ids: Sequence[str], matrix: Any, model: str) -> None:
        import numpy as np

        mat = np.ascontiguousarray(matrix, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(chunk_ids):
            raise ValueError(f"vectors shape {mat.shape} does not match {len(chunk_ids)} chunk ids")
        dim = int(mat.shape[1])
        rows = ((cid, model, dim, mat[i].tobytes()) for i, cid in enumerate(chunk_ids))
        with self._tx():
            self.db.executemany("INSERT OR REPLACE INTO vectors(chunk_id, model, dim, vector) VALUES(?,?,?,?)", rows)
            self.set_meta("model", model)
            self.set_meta("dimension", str(dim))

    def chunks(self) -> list[Chunk]:
        cur = self.db.execute(f"SELECT {CHUNK_COLS} FROM chunks ORDER BY row")
        return [_chunk_from_row(r) for r in cur]

    def chunk_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM chunks ORDER BY row")]

    def vector_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        out: dict[str, Chunk] = {}
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            for r in self.db.execute(f"SELECT {CHUNK_COLS} FROM chunks WHERE id IN ({marks})", part):
                out[r[0]] = _chunk_from_row(r)
        return out

    def vectors(self) -> tuple[list[str], Any, str | None]:
        import numpy as np

        rows = self.db.execute(
            "SELECT c.id, v.dim, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id ORDER BY c.row"
        ).fetchall()
        if not rows:
            return [], None, None
        dim = int(rows[0][1])
        if any(len(r[2]) != 4 * dim for r in rows):
            raise StoreError(f"{self.path}: a stored vector has the wrong size; run `plm index rebuild`")
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
        return [r[0] for r in rows], matrix, self.get_meta("model")

    def stats(self) -> dict[str, Any]:
        count = lambda table: int(self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: E731
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.config.filename + "*"))
        return {
            "documents": count("documents"),
            "chunks": count("chunks"),
            "vectors": count("vectors"),
            "model": self.get_meta("model"),
            "dimension": int(self.get_meta("dimension") or 0),
            "corpus_version": int(self.get_meta("corpus_version") or 0),
            "sqlite_bytes": size,
        }


@hookimpl
def plm_register_components(registry: Any) -> None:
    registry.add(SQLiteStore)
