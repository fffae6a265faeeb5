"""The postgres store's connection: its DSN (checked, and redacted wherever it is shown), the
connection itself, the guard that turns a database error into one line and replaces a lost
connection (a server restart), and the two kinds of transaction (a writer's, holding the
schema's advisory lock; a reader's REPEATABLE READ snapshot).

`PgConnection` is the half of `PostgresStore` that talks to the server; the store adds what
it keeps there. `guarded` wraps each public method of a class in the guard.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plm import MissingDependencyError, StoreError
from plm_plugins.stores.sql_store import guard_public_methods

log = logging.getLogger("plm_plugins.stores.postgres")  # the store's logger, whichever module speaks

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


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """A database error from a public method becomes one StoreError line (which server,
    what to do), not a psycopg traceback; a caller's bug (a duplicate id) keeps its own."""

    @functools.wraps(method)
    def call(self: PgConnection, *args: Any, **kwargs: Any) -> Any:
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


# Every public method of the connection and of the store, but `open` and `snapshot`, runs in it.
guarded = guard_public_methods(_guarded)


@guarded
class PgConnection:
    """One connection to the schema of one index, replaced when the server drops it. Needs a
    `config` with `dsn`, `schema_name`, `fulltext_config` and `lock_timeout_ms`."""

    config: Any
    location: str | Path
    _conn: Any = None
    _pinned = False  # inside a read snapshot: a lost connection cannot be silently replaced
    _dropped = False  # the connection was lost and not yet replaced (not closed by the caller)

    @property
    def schema(self) -> str:
        return str(self.config.schema_name)

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
        return str(dsn)

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
        from plm_plugins.stores.pg_schema import prepare_schema, schema_state

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
            state = schema_state(conn, self.schema, self.config.fulltext_config)
            if state == "missing" and not create:
                raise StoreError(
                    f"no index in schema {self.schema} at {self._redact(self.dsn())}: run `plm ingest` (or `plm run`) "
                    "with this config first"
                )
            if state != "ready":  # created, or upgraded in place (idempotent), by whoever opens it first
                prepare_schema(conn, self.schema, self.config.fulltext_config)
            register_vector(conn)
            conn.execute(f"SET search_path = {self.schema}, public")
        except psycopg.Error as err:
            conn.close()
            raise StoreError(self._explain(err)) from None
        except BaseException:
            conn.close()
            raise
        self._conn = conn

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
