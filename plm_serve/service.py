"""The state behind `plm serve`: which read generation is current, one writer, a
background reloader.

- Queries read the current `Generation` (plm_serve/generation.py): one committed corpus
  version, warm, so a query always sees one whole version and never loads or rebuilds
  anything. A generation closed under a query (a newer one swapped in) sends the query to
  the newer one; a store that stops answering marks the service broken until a reload.
- One writer job (its own connection) applies syncs from `POST /documents`, `DELETE` and
  the watcher, one at a time (`write_lock`), and records the last one for /status
  (laid out by plm_serve/status.py).
- The reloader thread notices new versions (this process's syncs at once, another
  process's within `poll_s`), builds and warms a new generation in the background, swaps
  it in whole, and closes the old one when its in-flight queries are done; a writer waits
  (`refresh`) until its own version is served.
- One model is loaded once and shared by every job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from plm_core.errors import PlmUserError, StaleIndexError, StoreError
from plm_core.records import CorpusVersion, Query
from plm_index.cache import warm_to_embed
from plm_index.job import Job
from plm_index.sync import IngestReport
from plm_serve.documents import original_file
from plm_serve.errors import NotReady
from plm_serve.generation import READER_WAIT_S, Generation, GenerationClosed
from plm_serve.status import status_report

log = logging.getLogger("plm.serve")


def _at_least(served: CorpusVersion | None, target: CorpusVersion | None) -> bool:
    """Whether the served version holds everything `target` does: it, or a later state of
    the same store."""
    if served is None or target is None:
        return served == target
    return served == target or (served.store_id == target.store_id and served.counter >= target.counter)


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
            return job.file_stats.real_roots()

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

    def with_writer(self, work: Callable[[Job], Any]) -> Any:
        """`work(writer)` between syncs: a read that must see the store as the last sync left it."""
        with self.write_lock:
            return work(self.writer)

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
        """What /status reports (plm_serve/status.py), read as a query reads."""
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
        return status_report(
            self.writer,
            generation,
            stats,
            readers=self.readers,
            started=self.started,
            last_sync=self.last_sync,
            load_error=self.load_error,
            watcher=self.watcher,
        )
