"""Warm read generations: what a query of `plm serve` reads from.

A `Generation` is one committed corpus version, warm: `Reader`s, jobs whose store
connections are pinned to that state (an open read snapshot: SQLite WAL or a Postgres
REPEATABLE READ transaction) with every index loaded for it. A query borrows one reader of
a generation, so it always sees one whole version, and never loads or rebuilds anything.
Closing a generation turns new queries away (`GenerationClosed`: they retry on the one
swapped in) and closes each reader once its in-flight query is done. Which generation is
current, and when a new one is built, is plm_serve/service.py's job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from plm_core.errors import PlmUserError
from plm_core.records import CorpusVersion, Query
from plm_index.job import Job
from plm_serve.errors import NotReady

log = logging.getLogger("plm.serve")
READER_WAIT_S = 60.0  # a query waits this long for a free reader, then is answered 503


class Reader:
    """One job pinned to one committed state, indexes loaded."""

    def __init__(self, job: Job) -> None:
        self.job, self.stack = job, ExitStack()
        try:
            job.open(create=False)
            self.stack.enter_context(job.store.snapshot())
            job.searcher.expect_stale = True  # a sync in flight saves its builds moments later
            job.searcher.warm()
        except BaseException:
            self.close()
            raise
        self.version: CorpusVersion | None = job.searcher.version
        self.empty = job.searcher.empty

    def close(self) -> None:
        try:
            self.stack.close()
        except PlmUserError as err:  # a reader writes nothing: a snapshot lost with its connection loses nothing
            log.info("closing a reader: %s", err)
        finally:
            self.job.close()


class GenerationClosed(Exception):
    """The generation a query took is being closed (a newer one was swapped in): the query
    takes the service's current generation and tries again."""


class Generation:
    """`readers` readers of one version; a query borrows one (at most that many at once).

    `close()` marks the generation closing and wakes every query waiting for one of its
    readers: those retry on the generation swapped in meanwhile (`GenerationClosed`), so no
    query ever waits on readers that are about to be closed. It then waits for the readers
    lent out to come back and closes them."""

    def __init__(self, make_job: Callable[[], Job], readers: int) -> None:
        built: list[Reader] = []
        try:
            for _ in range(readers):
                built.append(Reader(make_job()))
        except BaseException:
            for reader in built:
                reader.close()
            raise
        self.version, self.empty, self.n = built[0].version, built[0].empty, len(built)
        self._idle = built
        self._free = threading.Condition()  # guards _idle and _closing
        self._closing = False

    def search(self, query: Query, deadline: float) -> Any:
        return self.read(lambda job: job.search(query), deadline)

    def stats(self, deadline: float) -> dict[str, Any]:
        """The store's counts and sizes as this generation sees them."""
        return self.read(lambda job: job.store.stats(), deadline)  # type: ignore[no-any-return]

    def read(self, work: Callable[[Job], Any], deadline: float) -> Any:
        """`work(job)` with a reader of this generation (one of the `readers` at a time),
        waiting for one until `deadline` (time.monotonic()); GenerationClosed once closing."""
        with self._free:
            while not self._idle and not self._closing:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NotReady(f"the server is busy: no reader was free within {READER_WAIT_S:.0f}s; retry later")
                self._free.wait(left)
            if self._closing:
                raise GenerationClosed
            reader = self._idle.pop()
        try:
            return work(reader.job)
        finally:
            with self._free:
                self._idle.append(reader)
                self._free.notify_all()

    def close(self) -> None:
        """Turn new queries away, then close every reader once its in-flight query (if any)
        is done. Closing twice closes once."""
        with self._free:
            if self._closing:
                return
            self._closing = True
            self._free.notify_all()  # waiting queries: retry on the current generation
            while len(self._idle) < self.n:
                self._free.wait()
            readers, self._idle = self._idle, []
        for reader in readers:
            reader.close()
