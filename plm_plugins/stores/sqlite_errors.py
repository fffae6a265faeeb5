"""The SQLite store's errors as one line each: what a SQLite error means for the store (a
lock held too long, a damaged file, a full disk, a read-only folder) and what to do, and the
guard that says so for every public method instead of a sqlite3 traceback."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plm import StoreError
from plm_plugins.stores.sql_store import guard_public_methods


def explain(path: Path, err: sqlite3.Error, busy_ms: int) -> str:
    """One line for a SQLite error: what it means here and what to do."""
    text = str(err)
    if "locked" in text or "busy" in text:
        return (
            f"the store {path} is locked by another writer (a `plm ingest` or `plm index rebuild` on the same "
            f"index) for longer than busy_timeout_ms = {busy_ms}: wait for it to finish, or raise [store] "
            "busy_timeout_ms"
        )
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (
            f"the store {path} is damaged ({text}): restore it from a backup, or delete the index folder and "
            "run `plm ingest` again"
        )
    if disk_full(err):
        return (
            f"the disk holding the store {path} is full ({text}): the write in progress was not stored (what "
            "earlier batches stored stays); free space and run again"
        )
    if "readonly" in text or "read-only" in text:
        return f"the store {path} is read-only ({text}): writing needs a writable index folder"
    return f"cannot use store {path}: {text}"


def disk_full(err: sqlite3.Error) -> bool:
    return getattr(err, "sqlite_errorname", "") == "SQLITE_FULL" or "database or disk is full" in str(err)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """SQLite errors from a public store method become one StoreError line saying what to do
    (a damaged file, a lock held too long), not a sqlite3 traceback."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # a caller's bug (e.g. duplicate chunk ids) keeps its traceback
        except sqlite3.DatabaseError as err:
            raise StoreError(explain(self.path, err, self.config.busy_timeout_ms)) from None

    return call


# The store's public methods but these three run in it (`integrity_problems` reports errors).
guarded = guard_public_methods(_guarded, keep=("open", "snapshot", "integrity_problems"))
