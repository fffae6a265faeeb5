"""What a sync remembers of the files it read, so that the next one reads only what changed.

Like git's index: a file whose size, modification time, status-change time (ctime) and
inode are what they were when its document was stored is not read again (an edit that keeps
the size and sets the modification time back still changes the ctime; a file replaced by a
rename has another inode). The record is a cache beside the
index (`files.sqlite` in the index folder), never the truth: an entry counts only while the
store still holds its document with the fingerprint it names, and only for the index
fingerprint it was written under (a config or model change reads every file again). A file
changed within `RACY_NS` of being listed is not recorded (git's "racily clean" entries), so
an edit that keeps the size inside the same clock tick is still read next time.

It also remembers the folders given to `ingest` (the roots), so that a file or a subfolder
of one, given later (`plm ingest docs/team-a/README.md`, a watcher's batch), gets the same
document id as when the whole folder was read.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

FILE_NAME = "files.sqlite"
RACY_NS = 2_000_000_000  # a file modified this close before it was listed is read again next time
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL, ino INTEGER NOT NULL, doc_id TEXT NOT NULL, fingerprint TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_doc ON files(doc_id);
CREATE TABLE IF NOT EXISTS roots (path TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS real_roots (path TEXT PRIMARY KEY);
"""


class Seen(NamedTuple):
    """A file as a sync read it: its stat signature, and the document it gave."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    doc_id: str
    fingerprint: str

    @property
    def signature(self) -> tuple[int, int, int, int]:
        return self.size, self.mtime_ns, self.ctime_ns, self.ino


def signature(path: str) -> tuple[int, int, int, int] | None:
    """(size, mtime_ns, ctime_ns, inode) of a regular file, or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


class FileStats:
    """The record of one index folder. Every method is best effort: a record that cannot be
    read or written (a read-only index, a damaged file) only means files are read again."""

    def __init__(self, index_dir: Path | str) -> None:
        self.path = Path(index_dir) / FILE_NAME
        self._db: sqlite3.Connection | None = None

    def _open(self, create: bool) -> sqlite3.Connection | None:
        if self._db is None:
            if not create and not self.path.exists():
                return None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
                if "ino" not in {row[1] for row in db.execute("PRAGMA table_info(files)")}:
                    db.executescript("DROP TABLE files;" + _SCHEMA)  # a record from before ctime and inode
            except (sqlite3.Error, OSError):
                self._reset()
                return None
            self._db = db
        return self._db

    def _reset(self) -> None:
        """Drop a record that cannot be read: it is only a cache."""
        if self._db is not None:
            self._db.close()
            self._db = None
        for suffix in ("", "-wal", "-shm"):
            try:
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            except OSError:  # a read-only or immutable record: files are read again, that is all
                pass

    def seen(self, index_fp: str, paths: Sequence[str]) -> dict[str, Seen]:
        """The entries for these paths written under `index_fp` (none under another)."""
        db = self._open(create=False)
        if db is None or not paths:
            return {}
        try:
            row = db.execute("SELECT value FROM meta WHERE key='index_fp'").fetchone()
            if row is None or row[0] != index_fp:
                return {}
            found: dict[str, Seen] = {}
            wanted = [p for p in dict.fromkeys(paths) if storable(p)]
            # Most of a big folder: one scan beats thousands of lookups.
            if len(wanted) > 2000:
                rows: Iterable[tuple[str, int, int, int, int, str, str]] = db.execute("SELECT * FROM files")
                keep = set(wanted)
                return {r[0]: Seen(*r[1:]) for r in rows if r[0] in keep}
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                sql = f"SELECT * FROM files WHERE path IN ({','.join('?' * len(part))})"
                found.update({r[0]: Seen(*r[1:]) for r in db.execute(sql, part)})
            return found
        except sqlite3.Error:
            self._reset()
            return {}

    def record(self, index_fp: str, entries: dict[str, Seen], listed_ns: int) -> None:
        """Remember these files (path -> what was read), except those changed within RACY_NS
        before `listed_ns`, when they were listed. Entries under another index fingerprint
        are dropped first."""
        db = self._open(create=True)
        if db is None:
            return
        rows = [(p, *s) for p, s in entries.items() if storable(p)]
        racy = [r[0] for r in rows if r[2] >= listed_ns - RACY_NS]  # by mtime, as git judges it
        rows = [r for r in rows if r[2] < listed_ns - RACY_NS]
        try:
            with db:
                db.execute("BEGIN")
                row = db.execute("SELECT value FROM meta WHERE key='index_fp'").fetchone()
                if row is None or row[0] != index_fp:
                    db.execute("DELETE FROM files")
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('index_fp', ?)", (index_fp,))
                db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                db.executemany("DELETE FROM files WHERE path=?", [(p,) for p in racy])
        except sqlite3.Error:
            self._reset()

    def forget(self, doc_ids: Iterable[str]) -> None:
        """Drop the entries of these documents (deleted from the index)."""
        db = self._open(create=False)
        if db is None:
            return
        try:
            with db:
                db.executemany("DELETE FROM files WHERE doc_id=?", [(i,) for i in doc_ids])
        except sqlite3.Error:
            self._reset()

    def roots(self) -> list[str]:
        """The folders given to ingest so far, absolute."""
        db = self._open(create=False)
        if db is None:
            return []
        try:
            return [r[0] for r in db.execute("SELECT path FROM roots")]
        except sqlite3.Error:
            self._reset()
            return []

    def add_root(self, folder: str) -> None:
        db = self._open(create=True) if storable(folder) else None
        if db is None:
            return
        try:
            with db:
                db.execute("INSERT OR IGNORE INTO roots VALUES (?)", (folder,))
                real = os.path.realpath(folder)
                if storable(real):
                    db.execute("INSERT OR IGNORE INTO real_roots VALUES (?)", (real,))
        except sqlite3.Error:
            self._reset()

    def real_roots(self) -> list[str]:
        """Where the folders given to ingest were on disk when they were given, every symlink
        resolved then: the boundary of the files a server may hand out, which a folder swapped
        for a link afterwards cannot move. An index made before they were kept: its roots as
        written, never resolved now."""
        db = self._open(create=False)
        if db is None:
            return []
        try:
            found = [r[0] for r in db.execute("SELECT path FROM real_roots")]
        except sqlite3.Error:  # an older file: no such table until the next ingest makes it
            found = []
        return found or [os.path.abspath(r) for r in self.roots()]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def remembered(index_dir: Path | str, index_fp: str) -> dict[str, tuple[int, int, int, int, str, str]] | None:
    """Every entry written under `index_fp`, path -> (size, mtime_ns, ctime_ns, inode, doc id,
    fingerprint) as plain tuples (a `Seen` each costs 0.2 s at 100,000), read on a read-only
    connection of its own, so a thread may read while another syncs through a `FileStats`;
    None without a record, or under another index fingerprint."""
    path = Path(index_dir) / FILE_NAME
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT value FROM meta WHERE key='index_fp'").fetchone()
        if row is None or row[0] != index_fp:
            return None
        return {r[0]: r[1:] for r in db.execute("SELECT * FROM files")}
    except sqlite3.Error:
        return None
    finally:
        db.close()


def root_for(path: str, roots: Sequence[str]) -> str | None:
    """The outermost of `roots` that holds `path` (or is it), else None."""
    best: str | None = None
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            if best is None or len(root) < len(best):
                best = root
    return best


def now_ns() -> int:
    return time.time_ns()


def storable(path: str) -> bool:
    """Whether SQLite can hold `path`: a name that is not valid UTF-8 (its bytes kept as lone
    surrogates) cannot; such a file is never read, so it is never remembered either."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
