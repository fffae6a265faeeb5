"""SQLite store: documents, chunks (with enrichment) and float32 vectors in one file.

WAL mode, so a reader inside `snapshot()` sees one consistent state while a writer
ingests. `replace_documents` swaps whole documents (row, chunks and vectors) in one
transaction and `delete_documents` removes them in one: a crash at any moment leaves
each document wholly old or wholly new. Every change bumps the corpus version, which
derived indexes (BM25) record so a stale one is never used. A document's full text is
stored zlib-compressed (a BLOB in `documents.text`); chunk texts are plain.

The change feed: every chunk gets a sequence number (`seq`) from a counter in `meta`
(`feed_position`) when it is stored, and again when its vector is rewritten; the seqs a
transaction removes go to `removed` with the position that transaction reached. A derived
index that recorded a position reads only what changed since (`rows_since`,
`removed_since`, `vectors_since`).

This module is what the store keeps and reads; its other rooms: `sqlite_file` (the file
opened, its tables made or migrated), `sqlite_columns` (values as stored: JSON text,
compressed texts, packed fingerprints), `sqlite_errors` (errors as one line) and
`sql_store` (what it shares with Postgres).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field

from plm import (
    Chunk,
    ComponentConfig,
    CorpusVersion,
    Document,
    Store,
    StoreError,
    StoreProblem,
    compile_filters,
    hookimpl,
)
from plm_plugins.stores.rows import C_CHUNK_COLS, CHUNK_COLS, chunk_row
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
from plm_plugins.stores.sqlite_columns import (
    chunk_of_row,
    compressed,
    document_text,
    fingerprint_text,
    json_text,
    packed,
)
from plm_plugins.stores.sqlite_errors import disk_full, explain, guarded
from plm_plugins.stores.sqlite_file import connect

# Index order (`sql_store.ORDER`): every reader of "all chunks" uses it, so rows line up.
CHUNKS_JOIN = "chunks c JOIN documents d ON d.id = c.doc_id"
ORDERED = f"{CHUNKS_JOIN} {ORDER}"


@guarded
class SQLiteStore(Store):
    """One `plm.sqlite` file per index folder."""

    name = "sqlite"

    class Config(ComponentConfig):
        filename: str = Field("plm.sqlite", pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")
        """The database file's name inside the index folder: letters, digits, '.', '_' and '-'
        (no path, so it never leaves the folder)."""
        busy_timeout_ms: int = Field(30_000, ge=0, le=3_600_000)
        """Milliseconds (0 to 3,600,000) a writer waits for another writer's lock before giving
        up with an error; 0 fails at once."""

    config: Config

    _db: sqlite3.Connection | None = None
    _count: int | None = None  # in a write transaction: the chunk count, once a write moved the feed
    _count_at = 0  # the feed position that count holds at

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db

    def open(self, location: str | Path, create: bool = True) -> None:
        """Open `<location>/<filename>`. A folder that cannot be written (a read-only
        mount) is opened immutable: queries work, writes fail with a clear error."""
        self.path = Path(location) / self.config.filename
        self._db, self.read_only = connect(self.path, self.config.busy_timeout_ms, create)

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
        # Unique per change: a store restored from a backup (same uid, lower counter) never
        # matches a BM25 build made for the counter it reaches again later.
        self.set_meta("version_nonce", uuid.uuid4().hex[:12])

    def _advance_feed(self, added: int) -> tuple[int, int]:
        """In a write transaction: reserve seqs for `added` new chunks and move the feed
        position past them (by one when none are added); returns (first seq, new position),
        the position being what the seqs this transaction removes are recorded with."""
        start = int(self.get_meta("feed_position") or 0)
        position = start + max(added, 1)
        self.set_meta("feed_position", str(position))
        if self._count is None:  # the first advance of this transaction: the count before it
            known = self._counted(start)
            self._count = int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0]) if known is None else known
        self._count_at = position
        return start + 1, position

    def _counted(self, position: int) -> int | None:
        """The chunk count kept in meta if it was kept at this feed position (a writer that
        keeps no count, an older plm, moves the position past it: then it is counted)."""
        kept = self.get_meta("chunk_count") or ""
        count, _, at = kept.partition("@")
        return int(count) if at and int(at) == position else None

    def _remove_chunks(self, where: str, params: Sequence[Any], at: int) -> None:
        """Record the seqs of the chunks matching `where` as removed at feed position `at`."""
        self.db.execute(
            f"INSERT INTO removed(seq, at) SELECT seq, ? FROM chunks WHERE seq IS NOT NULL AND {where}", (at, *params)
        )

    def version(self) -> CorpusVersion:
        """Changes with every change to documents, chunks or vectors."""
        return corpus_version(dict(self.db.execute(f"SELECT key, value FROM meta WHERE key IN {VERSION_KEYS}")))

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read inside sees the same committed state (a WAL read transaction)."""
        if self.db.in_transaction:
            yield
            return
        try:
            self.db.execute("BEGIN")
        except sqlite3.DatabaseError as err:
            raise StoreError(explain(self.path, err, self.config.busy_timeout_ms)) from None
        try:
            yield
        finally:
            try:
                self.db.execute("COMMIT")
            except sqlite3.DatabaseError as err:
                raise StoreError(explain(self.path, err, self.config.busy_timeout_ms)) from None

    @contextmanager
    def _tx(self) -> Iterator[None]:
        if getattr(self, "read_only", False):
            raise StoreError(f"the store {self.path} is on a read-only folder: it can be queried, not changed")
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            raise StoreError(explain(self.path, err, self.config.busy_timeout_ms)) from None
        self._count, self._count_at = None, 0
        try:
            yield
            if self._count is not None:  # chunks were written: the count moves with the feed
                self.set_meta("chunk_count", f"{self._count}@{self._count_at}")
            self.db.execute("COMMIT")
        except BaseException as err:
            # SQLite rolls a transaction back itself on some errors (a full disk, an I/O
            # error): a second ROLLBACK would hide the cause behind "no transaction is active".
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(err, sqlite3.OperationalError) and disk_full(err):
                raise StoreError(explain(self.path, err, self.config.busy_timeout_ms)) from None
            raise

    def clear(self) -> None:
        with self._tx():
            self._remove_chunks("1", (), self._advance_feed(0)[1])
            self.db.execute("DELETE FROM vectors")
            self.db.execute("DELETE FROM chunks")
            self._count = 0
            self.db.execute("DELETE FROM documents")
            self._bump_version()

    def _documents_where(self, columns: str, key: str, values: Sequence[str]) -> Iterator[Any]:
        """Rows of `documents` whose `key` is one of `values` (deduplicated), 500 to a query."""
        wanted = list(dict.fromkeys(values))
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            yield from self.db.execute(
                f"SELECT {columns} FROM documents WHERE {key} IN ({','.join('?' * len(part))})", part
            )

    def doc_fingerprints(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        if ids is None:
            rows: Any = self.db.execute("SELECT id, fingerprint FROM documents ORDER BY row")
        else:
            rows = self._documents_where("id, fingerprint", "id", ids)
        return {r[0]: fingerprint_text(r[1]) for r in rows}

    def get_document(self, doc_id: str) -> Document | None:
        sql = "SELECT id, title, path, text, metadata FROM documents WHERE id = ?"
        row = self.db.execute(sql, (doc_id,)).fetchone()
        if row is None:
            return None
        text = document_text(row[3])
        return Document(id=row[0], text=text, title=row[1] or "", path=row[2] or "", metadata=json.loads(row[4]))

    def doc_paths(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        if paths is None:
            return {r[0]: r[1] or "" for r in self.db.execute("SELECT id, path FROM documents ORDER BY row")}
        return {r[0]: r[1] or "" for r in self._documents_where("id, path", "path", paths)}

    def paths_of(self, ids: Sequence[str]) -> dict[str, str]:
        return {r[0]: r[1] or "" for r in self._documents_where("id, path", "id", ids)}

    def replace_documents(
        self,
        documents: Sequence[Document],
        chunks: Sequence[Chunk],
        matrix: Any = None,
        model: str | None = None,
        fingerprints: Sequence[str] | None = None,
    ) -> None:
        """Store these documents with exactly these chunks (and vectors, row i for chunks[i]),
        replacing whatever was stored under their ids, in one transaction."""
        # A document's text is kept (zlib, level 1) only so nothing of it is lost; chunks hold
        # what is searched. Compressed, it no longer doubles the store (bench/bench_scale.py).
        doc_rows = [
            (
                d.id,
                d.title,
                d.path,
                compressed(d.text),
                json_text(dict(d.metadata)),
                packed(fp),
            )
            for d, fp in zip(documents, fingerprints or [""] * len(documents), strict=True)
        ]
        chunk_rows = [chunk_row(c, json_text) for c in chunks]
        if not documents:
            return  # nothing changes, so the corpus version must not either
        vector_rows = self._vector_rows([c.id for c in chunks], matrix, model) if matrix is not None else None
        with self._tx():
            first, at = self._advance_feed(len(chunk_rows))
            # Upsert keeps an updated document's row, so its place in index order.
            self.db.executemany(
                "INSERT INTO documents(id, title, path, text, metadata, fingerprint) VALUES(?,?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET title=excluded.title, path=excluded.path, text=excluded.text, "
                "metadata=excluded.metadata, fingerprint=excluded.fingerprint",
                doc_rows,
            )
            self._remove_documents_chunks([d.id for d in documents], at)
            self.db.executemany(
                f"INSERT INTO chunks({CHUNK_COLS}, seq) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                ((*row, first + n) for n, row in enumerate(chunk_rows)),
            )
            self._count = (self._count or 0) + len(chunk_rows)
            if vector_rows is not None:
                self._insert_vectors(*vector_rows)
            self._bump_version()

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Remove documents with their chunks and vectors (one transaction); returns the ids found."""
        with self._tx():
            exists = lambda i: self.db.execute("SELECT 1 FROM documents WHERE id=?", (i,)).fetchone()  # noqa: E731
            found = [i for i in dict.fromkeys(doc_ids) if exists(i)]
            if found:
                self._remove_documents_chunks(found, self._advance_feed(0)[1])
            self.db.executemany("DELETE FROM documents WHERE id = ?", [(i,) for i in found])
            if found:
                self._bump_version()
        return found

    def _remove_documents_chunks(self, doc_ids: Sequence[str], at: int) -> None:
        """Delete these documents' chunks (and vectors), their seqs recorded as removed at `at`."""
        for i in range(0, len(doc_ids), 500):
            part = doc_ids[i : i + 500]
            where = f"doc_id IN ({','.join('?' * len(part))})"
            self._remove_chunks(where, part, at)
            gone = self.db.execute(f"DELETE FROM chunks WHERE {where}", part).rowcount
            self._count = (self._count or 0) - gone

    def _vector_rows(self, chunk_ids: Sequence[str], matrix: Any, model: str | None) -> tuple[list[Any], str, int]:
        mat = vector_matrix(matrix, len(chunk_ids), model)
        dim, model = int(mat.shape[1]), str(model)
        return [(cid, model, dim, mat[i].tobytes()) for i, cid in enumerate(chunk_ids)], model, dim

    def _insert_vectors(self, rows: list[Any], model: str, dim: int) -> None:
        if rows:
            # A new model may have another dimension: while a sync re-embeds, vectors of two
            # models coexist (consistency_problems() says so, queries refuse to mix them).
            self.set_meta("model", model)
            self.set_meta("dimension", str(dim))
        self.db.executemany("INSERT OR REPLACE INTO vectors(chunk_id, model, dim, vector) VALUES(?,?,?,?)", rows)

    def write_vectors(
        self, chunk_ids: Sequence[str], matrix: Any, model: str, texts: Sequence[str] | None = None
    ) -> int:
        """Store vectors for existing chunks; with `texts` (what each row embedded), rows
        whose chunk is gone or now holds another text are skipped, so a vector computed
        while another process replaced the document never lands on the new chunk.
        Returns the rows written."""
        rows, model, dim = self._vector_rows(chunk_ids, matrix, model)
        with self._tx():
            if texts is not None:
                current = self._index_texts(chunk_ids)
                rows = [r for r, t in zip(rows, texts, strict=True) if current.get(r[0]) == t]
            self._insert_vectors(rows, model, dim)
            if rows:
                self._resequence([r[0] for r in rows])
                self._bump_version()
        return len(rows)

    def _resequence(self, chunk_ids: Sequence[str]) -> None:
        """New seqs for these chunks (their vectors changed), the old ones recorded as removed:
        every derived index, text or vector, sees the chunk go and come back."""
        ids = list(dict.fromkeys(chunk_ids))
        old = dict(self._by_ids("id, seq", ids))
        ids = [i for i in ids if i in old]
        first, at = self._advance_feed(len(ids))
        self.db.executemany(
            "INSERT INTO removed(seq, at) VALUES(?, ?)", [(old[i], at) for i in ids if old[i] is not None]
        )
        self.db.executemany("UPDATE chunks SET seq = ? WHERE id = ?", [(first + n, i) for n, i in enumerate(ids)])

    def _index_texts(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        return {r[0]: r[1] for r in self._by_ids("id, coalesce(enriched, text)", chunk_ids)}

    def _by_ids(self, columns: str, chunk_ids: Sequence[str]) -> Iterator[Any]:
        """Rows of `chunks` for these ids, queried in parts under SQLite's variable limit."""
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            yield from self.db.execute(f"SELECT {columns} FROM chunks WHERE id IN ({','.join('?' * len(part))})", part)

    def chunks(self) -> list[Chunk]:
        return [chunk_of_row(r) for r in self.db.execute(f"SELECT {C_CHUNK_COLS} FROM {ORDERED}")]

    def chunk_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute(f"SELECT c.id FROM {ORDERED}")]

    def index_texts(self) -> tuple[list[str], list[str]]:
        rows = self.db.execute(f"SELECT c.id, coalesce(c.enriched, c.text) FROM {ORDERED}").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def chunk_count(self) -> int:
        # Kept in meta by every write, with the feed position it holds at: counting the
        # chunks table (a small index) took 13 ms at a million, twice in every write before
        # its change was searchable. A count kept at another position is not trusted.
        with self.snapshot():
            rows = dict(self.db.execute("SELECT key, value FROM meta WHERE key IN ('chunk_count', 'feed_position')"))
            count, _, at = rows.get("chunk_count", "").partition("@")
            if at and at == rows.get("feed_position"):
                return int(count)
            return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def chunks_needing_vectors(self, model: str) -> list[Chunk]:
        """Chunks whose vector is missing, damaged (wrong size) or from another model."""
        sql = (
            f"SELECT {C_CHUNK_COLS} FROM {CHUNKS_JOIN} LEFT JOIN vectors v ON v.chunk_id = c.id "
            f"WHERE v.chunk_id IS NULL OR v.model != ? OR length(v.vector) != 4 * v.dim {ORDER}"
        )
        return [chunk_of_row(r) for r in self.db.execute(sql, (model,))]

    def chunk_metadata(self) -> list[dict[str, Any]]:
        """Each chunk's metadata, in index order (what metadata filters test); kept per
        corpus version, since a UI asks for a few new filter masks per version."""
        version = self.version()
        cached = getattr(self, "_metadata", None)
        if cached is None or cached[0] != version:
            cached = (version, [json.loads(r[0]) for r in self.db.execute(f"SELECT c.metadata FROM {ORDERED}")])
            self._metadata = cached
        return cached[1]

    def filter_mask(self, filters: Any) -> Any:
        """The filter spec evaluated over each chunk's metadata (`chunk_metadata`, kept per version)."""
        import numpy as np

        metadata = self.chunk_metadata()
        match = compile_filters(filters)
        if match is None:
            return np.ones(len(metadata), dtype=bool)
        return np.fromiter((match(m) for m in metadata), dtype=bool, count=len(metadata))

    def consistency_problems(self) -> list[StoreProblem]:
        """Problems that break the store's invariants (empty when consistent)."""
        problems = []
        q = lambda sql: int(self.db.execute(sql).fetchone()[0])  # noqa: E731
        if n := q("SELECT count(*) FROM chunks c LEFT JOIN documents d ON d.id = c.doc_id WHERE d.id IS NULL"):
            problems.append(StoreProblem(StoreProblem.ORPHAN_CHUNKS, n, f"{n} chunks belong to no document"))
        return problems + vector_problems(
            self.vector_count(),
            lambda: q(
                "SELECT count(*) FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id WHERE v.chunk_id IS NULL"
            ),
            q("SELECT count(DISTINCT model) FROM vectors"),
        )

    def integrity_problems(self) -> list[str]:
        """What SQLite's own `PRAGMA quick_check` finds (pages damaged on disk)."""
        try:
            rows = [str(r[0]) for r in self.db.execute("PRAGMA quick_check(20)")]
        except sqlite3.DatabaseError as err:
            return [str(err)]
        return [] if rows == ["ok"] else rows

    def vector_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        return {r[0]: chunk_of_row(r) for r in self._by_ids(CHUNK_COLS, chunk_ids)}

    def vectors(self) -> tuple[list[str], Any, str | None]:
        rows = self.db.execute(
            f"SELECT c.id, v.dim, v.vector FROM {CHUNKS_JOIN} JOIN vectors v ON v.chunk_id = c.id {ORDER}"
        ).fetchall()
        if not rows:
            return [], None, None
        return [r[0] for r in rows], self._matrix(int(rows[0][1]), [r[2] for r in rows]), self.get_meta("model")

    def _matrix(self, dim: int, blobs: Sequence[bytes]) -> Any:
        """Stored vectors (float32 bytes, `dim` each) as one matrix; StoreError when one is damaged."""
        import numpy as np

        if any(len(b) != 4 * dim for b in blobs):
            raise StoreError(f"{self.path}: a stored vector has the wrong size; run `plm index rebuild`")
        return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)

    # ------------------------------------------------------------------ change feed
    def feed_position(self) -> int:
        """The position of the current state: the counter after its last write transaction."""
        return int(self.get_meta("feed_position") or 0)

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        """(seqs, chunk ids, order keys, index texts) of the chunks with seq > position, by seq."""
        rows = self.db.execute(
            f"SELECT c.seq, c.id, {ORDER_KEY}, coalesce(c.enriched, c.text) FROM {CHUNKS_JOIN} "
            "WHERE c.seq > ? ORDER BY c.seq",
            (position,),
        ).fetchall()
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]

    def removed_since(self, position: int) -> list[int] | None:
        """Seqs <= position removed after it, sorted; None when the feed does not reach it."""
        with self.snapshot():
            start, now = int(self.get_meta("feed_start") or 0), self.feed_position()
            if not start <= position <= now:
                return None
            rows = self.db.execute(
                "SELECT seq FROM removed WHERE at > ? AND seq <= ? ORDER BY seq", (position, position)
            )
            return [r[0] for r in rows]

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        """(seqs, float32 matrix, model) of the chunks with seq > position that have vectors;
        StoreError when one of them comes from another model than the store's."""
        rows = self.db.execute(
            f"SELECT c.seq, v.dim, v.vector, m.value, v.model FROM {CHUNKS_JOIN} JOIN vectors v "
            "ON v.chunk_id = c.id LEFT JOIN meta m ON m.key = 'model' WHERE c.seq > ? ORDER BY c.seq",
            (position,),
        ).fetchall()
        if not rows:
            return [], None, None
        if other := {r[4] for r in rows} - {rows[0][3]}:
            raise StoreError(f"{self.path}: {half_re_embedded(other, rows[0][3])}")
        return [r[0] for r in rows], self._matrix(int(rows[0][1]), [r[2] for r in rows]), rows[0][3]

    def stats(self) -> dict[str, Any]:
        count = lambda table: int(self.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: E731
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.config.filename + "*"))
        return store_stats(count("documents"), count("chunks"), count("vectors"), self.get_meta, size)


@hookimpl
def plm_register_components(registry: Any) -> None:
    registry.add(SQLiteStore)
