"""The state behind `plm serve`: warm read generations, one writer, a background reloader.

- A `Generation` is one committed corpus version, warm: jobs whose store connections are
  pinned to that state (an open read snapshot: SQLite WAL or a Postgres REPEATABLE READ
  transaction) with every index loaded for it. A query takes a reader of the current
  generation, so it always sees one whole version, and never loads or rebuilds anything.
- One writer job (its own connection) applies syncs from `POST /documents`, `DELETE` and
  the watcher, one at a time (`write_lock`).
- The reloader thread notices new versions (this process's syncs at once, another
  process's within `poll_s`), builds and warms a new generation in the background, swaps
  it in whole, and closes the old one when its in-flight queries are done.
- One model is loaded once and shared by every job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from plm_core.errors import PlmUserError, StaleIndexError, StoreError
from plm_core.records import CorpusVersion, Query
from plm_index.cache import warm_to_embed
from plm_index.job import Job
from plm_index.sync import IngestReport
from plm_serve.documents import original_file
from plm_serve.watcher import read_watcher_file

log = logging.getLogger("plm.serve")
READER_WAIT_S = 60.0  # a query waits this long for a free reader, then is answered 503


def _at_least(served: CorpusVersion | None, target: CorpusVersion | None) -> bool:
    """Whether the served version holds everything `target` does: it, or a later state of
    the same store."""
    if served is None or target is None:
        return served == target
    return served == target or (served.store_id == target.store_id and served.counter >= target.counter)


def folder_bytes(folder: Any) -> int:
    """Bytes of the files under `folder`; files and folders that vanish meanwhile (a merge's
    temp folder renamed into place, an old segment collected) are skipped, never an error."""
    total = 0
    for root, _, files in os.walk(folder):  # os.walk skips folders that vanish under it
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


class NotReady(PlmUserError):
    """The index is empty or not loaded yet (HTTP 503)."""


class FromFile(PlmUserError):
    """A posted record has the id of a document that a file holds (HTTP 409)."""


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


class Service:
    """Everything `plm serve` holds; see the module docstring."""

    def __init__(self, writer: Job, readers: int = 1, poll_s: float = 1.0) -> None:
        """`writer`: the job syncs go through; readers are built like it, sharing its model."""
        self.writer, self.readers, self.poll_s = writer, readers, poll_s
        self.write_lock = threading.Lock()
        self.generation: Generation | None = None
        self.last_sync: dict[str, Any] | None = None
        self.load_error: str | None = None
        self.watcher: Any = None
        self.started = time.time()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._swapped = threading.Condition()
        self._broken = False  # a query found the generation's store unusable: rebuild it
        self._thread: threading.Thread | None = None
        self.on_reload: Callable[[CorpusVersion | None], None] = lambda version: None

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        """Load the model and the current version (if any), then watch for new ones."""
        warm_to_embed(self.writer.embedder)
        self.writer.open(create=True)
        self._reload()
        self._thread = threading.Thread(target=self._reloader, name="plm-reloader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self.write_lock:  # a sync in progress commits its batch first
            current, self.generation = self.generation, None
            if current is not None:
                current.close()
            self.writer.close()

    def _job(self) -> Job:
        return Job(
            self.writer.config, self.writer.index_dir, self.writer.settings, self.writer.registry, self.writer.embedder
        )

    def _reloader(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            if not self._stop.is_set():
                self._reload()

    def _reload(self) -> None:
        """Swap in a generation for the store's current version when it moved."""
        try:
            with self.write_lock:
                version = self.writer.store.version()
            current = self.generation
            if current is not None and current.version == version and not self._broken:
                return
            self._broken = False
            fresh = Generation(self._job, self.readers)
            self.generation, self.load_error = fresh, None
            with self._swapped:  # a writer waiting for its version does not wait for old queries
                self._swapped.notify_all()
            log.info("serving corpus version %s", fresh.version)
            self.on_reload(fresh.version)
            if current is not None:
                current.close()
        except PlmUserError as err:  # e.g. an index being written for the first time
            if str(err) != self.load_error:  # once, not at every poll
                log.warning("could not load the index: %s", err)
            self.load_error = str(err)
            if self._broken or isinstance(err, StoreError) and not isinstance(err, StaleIndexError):
                # Not servable (a damaged build, a store that is down): say so, retry each poll.
                self._broken = True
                current, self.generation = self.generation, None
                if current is not None:
                    current.close()
        finally:
            with self._swapped:
                self._swapped.notify_all()

    def refresh(self, timeout: float = 60.0, target: CorpusVersion | None = None) -> None:
        """Ask the reloader for the newest version (or `target`) and wait until it, or a newer
        one, has been swapped in (so a client sees its own writes); queries keep being answered
        meanwhile. Another write may move the reloader past this one's version: that serves it too."""
        if target is None:
            with self.write_lock:
                target = self.writer.store.version()
        deadline = time.monotonic() + timeout
        with self._swapped:
            while self.generation is None or not _at_least(self.generation.version, target):
                self._wake.set()
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None:
                    break
                self._swapped.wait(min(left, 1.0))

    # ------------------------------------------------------------------ work
    def read(self, work: Callable[[Generation, float], Any], timeout: float = READER_WAIT_S) -> tuple[Generation, Any]:
        """(the generation that answered, `work(generation, deadline)`) on the current
        generation; a generation closed meanwhile (a reload swapped in a newer one) is left
        for the newer one, within the same `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            generation = self.generation
            if generation is None:
                raise NotReady(self.load_error or "the index is not loaded yet: add documents or run `plm ingest`")
            try:
                return generation, work(generation, deadline)
            except GenerationClosed:
                if self.generation is generation:  # closed without a successor: stopping
                    raise NotReady("the server is stopping") from None
            except StoreError as err:  # the store went away, or a build is damaged: not a client error
                self.mark_broken(str(err))
                raise NotReady(str(err)) from None

    def search(self, query: Query) -> tuple[Any, CorpusVersion | None]:
        """((ranking, timings), the corpus version that answered)."""

        def search(generation: Generation, deadline: float) -> Any:
            if generation.empty:
                raise NotReady("the index is empty: POST /documents or run `plm ingest` with this config")
            return generation.search(query, deadline)

        generation, answer = self.read(search)
        return answer, generation.version

    def document(self, doc_id: str, chunk_id: str | None = None) -> tuple[Any, Any]:
        """(the stored document or None, the chunk `chunk_id` of it or None), as the current
        generation sees them."""

        def read(job: Job) -> tuple[Any, Any]:
            chunk = job.store.get_chunks([chunk_id]).get(chunk_id) if chunk_id else None
            return job.store.get_document(doc_id), chunk if chunk is None or chunk.doc_id == doc_id else None

        return self.read(lambda generation, deadline: generation.read(read, deadline))[1]  # type: ignore[no-any-return]

    def original(self, document: Any) -> str | None:
        """The file a stored document was read from, when it lies inside a folder given to
        this index (`plm_serve.documents.original_file`), else None."""

        def read(job: Job) -> list[str]:
            return job.file_stats.roots()

        roots = self.read(lambda generation, deadline: generation.read(read, deadline))[1]
        return original_file(document, roots)

    def doc_paths(self, paths: Sequence[str]) -> dict[str, str]:
        """Stored document id -> the path it was loaded from, of these paths only, as the
        current generation sees them (the document view's links to other documents)."""

        def read(job: Job) -> dict[str, str]:
            return job.store.doc_paths(paths)

        return self.read(lambda generation, deadline: generation.read(read, deadline))[1]  # type: ignore[no-any-return]

    def mark_broken(self, reason: str) -> None:
        """The current generation cannot answer: /ready says why until the reloader has
        built a new one (which it tries at once, then every poll)."""
        self._broken, self.load_error = True, reason
        self._wake.set()

    def check(self) -> str | None:
        """Why the service cannot answer now (None: it can): no index loaded, or a store
        that no longer answers (checked with a cheap read, unless a sync holds the store)."""
        generation = self.generation
        if generation is None or generation.empty or self._broken:
            return self.load_error or "no documents indexed yet"
        if self.write_lock.acquire(blocking=False):
            try:
                self.writer.store.version()
            except StoreError as err:
                self.mark_broken(str(err))
                return str(err)
            finally:
                self.write_lock.release()
        return None

    def apply(self, work: Callable[[Job], IngestReport]) -> IngestReport:
        """Run one sync with the writer (one at a time), record it, and swap in the result."""
        with self.write_lock:
            started = time.time()
            try:
                report = work(self.writer)
            except StoreError as err:
                # The store is down or damaged: the server's state, not the request's fault. A
                # 400 told clients not to retry, and a write sent during a Postgres restart was
                # lost; 503 says retry (a retried record is stored once: its id is its key).
                raise NotReady(str(err)) from None
            self.last_sync = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "seconds": round(report.seconds, 3),
                "added": len(report.added),
                "updated": len(report.updated),
                "deleted": len(report.deleted),
                "failed": [{"path": f.path, "doc_id": f.doc_id, "error": f.error} for f in report.failed][:20],
            }
            version = self.writer.store.version()
        report.corpus_version = version.counter
        self.refresh(target=version)
        return report

    def status(self) -> dict[str, Any]:
        generation: Generation | None = None
        try:
            # A reader's view: never waits for a sync (a watcher's catch-up of a million
            # files holds the writer for minutes).
            generation, stats = self.read(lambda current, deadline: current.stats(deadline))
        except NotReady:
            if self.generation is not None:  # busy, or the store went away: not a question of no index
                raise
            with self.write_lock:
                stats = self.writer.store.stats()
        return {
            "config": self.writer.config.job.name,
            "config_path": str(self.writer.config.path),
            "index_dir": str(self.writer.index_dir),
            "ready": generation is not None and not generation.empty,
            "serving_version": str(generation.version) if generation else None,
            "documents": stats.get("documents"),
            "chunks": stats.get("chunks"),
            "vectors": stats.get("vectors"),
            "model": stats.get("model"),
            "corpus_version": stats.get("corpus_version"),
            "store_bytes": stats.get("bytes"),
            "index_dir_bytes": folder_bytes(self.writer.index_dir),
            "readers": self.readers,
            "uptime_s": round(time.time() - self.started, 1),
            "last_sync": self.last_sync,
            "load_error": self.load_error,
            # Damage in the saved indexes (read only, beside the readers): queries are answered
            # from the store meanwhile; `repair` is the command that fixes it.
            "problems": (problems := self.writer.searcher.damage()),
            "repair": f"plm index rebuild --config {self.writer.config.path}" if problems else None,
            # This server's own (--watch), else a `plm watch` process syncing the same index.
            "watcher": self.watcher.state() if self.watcher is not None else read_watcher_file(self.writer.index_dir),
        }
