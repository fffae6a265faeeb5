"""`FolderWatcher`: keep something in sync with folders as files change.

It watches folders recursively (watchfiles) and hands each batch of changes to an
`apply(changed, removed)` callable, so that `plm watch` and `plm serve --watch` (which
passes an apply holding its own lock) share it (plm_serve/watcher.py wires it to a job):

- Once the watch is in place it runs one catch-up sync per folder (`catch_up`, given the
  folder's listing; plm_serve/watcher.py's syncs only what changed, or the whole folder):
  edits made while nothing watched are picked up, and none made during the catch-up is
  missed. The catch-up runs in a thread of its own, beside the batches, so a file saved
  during it is synced as one (`apply` and `catch_up` must take turns: a lock).
- Events are collected until the folders are quiet for `debounce_ms` (or `max_wait_ms`
  under constant churn); then only the files named by events are synced, never a rescan,
  at most `max_batch` per sync: a branch switch touching 1,000 files is a few syncs.
- A file is read once it has stopped changing: size and mtime as last seen, and its mtime
  or our first sight of them `settle_ms` old; until then it waits, so a file written in
  parts is stored in its final form. Scratch files (`.#foo`, `foo~`, `#foo#`, `*.swp`,
  `*.tmp`, vim's `4913`, `.DS_Store`, anything hidden such as `.git/`) are ignored, and so
  is every file the loader would not read (`loader_filter`; plm_serve/watch_filters.py).
- A rename removes the old path and adds the new one; a removed folder removes what was
  stored from files under it; new subfolders are followed, one moved in is read whole.
  Removals are synced first, on their own: a file moved to another folder keeps its
  document id, deleted from the old place before it is stored from the new one.
- Each sync logs one summary line, plus `failed: PATH: reason` per file it could not read
  (as `plm ingest`); neither bad files nor an exception from `apply` stop the watcher.
  `run(stop)` returns once `stop` is set, after the batch in progress: the catch-up is
  given `stop` and ends before its next batch (a SIGTERM during a long first embedding
  waited for all of it); what is left, and changes still pending, are found by the next
  start's catch-up.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from plm_core.errors import PlmUserError
from plm_core.records import LoadFailure
from plm_index.sources import failure_line, inside
from plm_index.sync import IngestReport, SyncStopped
from plm_serve.watch_filters import scratch, under

Apply = Callable[[list[Path], list[Path]], IngestReport]
LISTED = (-2, -2)  # the (size, mtime_ns) `_sent` holds for a file the catch-up reads
logger = logging.getLogger(__name__)


class FolderWatcher:
    def __init__(
        self,
        dirs: Iterable[str | Path],
        apply: Apply,
        *,
        catch_up: Callable[[list[Path], threading.Event, list[str] | None], IngestReport] | None = None,
        debounce_ms: int = 300,
        settle_ms: int = 250,
        max_wait_ms: int = 2000,
        max_batch: int = 500,
        loader_filter: Callable[[Path], bool] | None = None,
        lister: Callable[[Path], Iterable[str]] | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        """`lister(folder)`: the files the loader reads there, listed fast (default: a walk
        asking `loader_filter` of every file). `catch_up(folders, stop, listed)` gets that
        listing (None without a lister)."""
        self.dirs = [Path(os.path.abspath(d)) for d in dirs]
        self.apply, self.catch_up, self.log = apply, catch_up, log
        self.debounce_ms, self.settle_ms, self.max_wait_ms = debounce_ms, settle_ms, max_wait_ms
        self.max_batch = max_batch
        self.accepts = loader_filter or (lambda path: True)
        self.lister = lister
        # file -> ((size, mtime_ns), monotonic time first seen so); None until stat'ed
        self._pending: dict[Path, tuple[tuple[int, int], float] | None] = {}
        self._sent: dict[str, tuple[int, int]] = {}  # file synced (as str) -> its (size, mtime_ns) then
        self._dirs: set[Path] = set()  # folders holding synced files: their removal matters
        self._lock = threading.Lock()
        self._catching: threading.Thread | None = None  # the catch-up's syncs, beside the batches
        self.watching = threading.Event()  # set once the watch is in place (or nothing is there to watch)
        self._state: dict[str, Any] = dict(running=False, caught_up=False, batches=0, last_batch=None)
        self._state.update(failed_files=0, last_error=None)

    def state(self) -> dict[str, Any]:
        """For a /status endpoint: folders, running, caught up, batches so far, the last batch
        (when, files changed and removed, its counts and failures), pending files, last error."""
        with self._lock:
            return {"dirs": [str(d) for d in self.dirs], **self._state, "pending": len(self._pending)}

    def run(self, stop: threading.Event) -> None:
        """Catch up, then watch until `stop` is set; the batch in progress is finished first.

        A watch dies with its folder: when a watched folder is deleted or replaced (another
        folder renamed or made in its place), the watch is set up again for the folders
        there now, each with a catch-up, and a missing one is waited for."""
        self._set(running=True)
        try:
            waited: set[Path] = set()  # folders found missing by the loop below
            while not stop.is_set():
                folders = self._identity()
                present = [d for d in self.dirs if folders[d] is not None]
                for d in sorted(waited.intersection(present)):
                    self.log(f"{d} is back: watching it again")
                waited = {d for d in self.dirs if folders[d] is None}
                if present:
                    self._watch(stop, present, folders)
                else:  # nothing to watch until a folder comes back
                    self.watching.set()
                    self._drain(stop)
                    stop.wait(self.debounce_ms / 1000)
        finally:
            if self._catching is not None:
                self._catching.join()  # `stop` ends it before its next batch
            self._set(running=False)

    def _identity(self) -> dict[Path, tuple[int, int] | None]:
        """Each watched folder's (device, inode), None when it is not there."""
        found: dict[Path, tuple[int, int] | None] = {}
        for d in self.dirs:
            try:
                st = os.stat(d)
                found[d] = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
            except OSError:
                found[d] = None
        return found

    def _watch(self, stop: threading.Event, present: list[Path], folders: dict[Path, Any]) -> None:
        """One watch of the folders present, until `stop` or until a folder is gone or replaced."""
        from watchfiles import Change, watch

        for n, changes in enumerate(
            watch(
                *present,
                watch_filter=lambda _change, path: self._relevant(Path(path)),
                step=self.debounce_ms,  # quiet this long: a batch
                debounce=self.max_wait_ms,  # or this long under constant churn
                stop_event=stop,
                rust_timeout=max(self.debounce_ms, self.settle_ms // 2),  # re-check unsettled files
                yield_on_timeout=True,
                raise_interrupt=False,
            )
        ):
            if n == 0:  # the watch is in place: nothing changed from now on can be missed
                self.watching.set()
                self._catch_up(stop, present)
            self._pending.update((Path(path), None) for _change, path in changes)
            # A folder's own event: it was deleted, and a folder made in its place may have its
            # inode (Linux reuses them), so the identity below would not tell.
            hit = {Path(path) for change, path in changes if change == Change.deleted}.intersection(present)
            self._drain(stop)
            if (now := self._identity()) != folders or hit:
                for d in self.dirs:
                    if now[d] != folders[d] or d in hit:
                        what = "is back" if folders[d] is None else "was deleted" if now[d] is None else "was replaced"
                        self.log(f"{d} {what}: {'watching it again' if now[d] else 'waiting for it to come back'}")
                return

    def _drain(self, stop: threading.Event) -> None:
        while not stop.is_set() and any(batch := self._ready()):
            self._batch(*batch)

    def _set(self, **values: Any) -> None:
        with self._lock:
            self._state.update(values)

    def _catch_up(self, stop: threading.Event, roots: list[Path]) -> None:
        """List the folders (here, so that `_sent` has one writer), then sync them in a thread
        of its own: a file saved meanwhile is a batch of its own, not queued behind them."""
        if self._catching is not None:
            self._catching.join()  # a folder replaced: the last catch-up ends first
        listings: list[list[str] | None] = []
        for root in roots:
            folders: set[str] = set()
            listed = list(self.lister(root)) if self.lister is not None else None
            for path in listed if listed is not None else map(str, self._files(root)):  # its files
                # Synced by the catch-up below (no stat here: 0.75 s at 100,000 files); an event
                # for one then syncs it again, which reads nothing when it is unchanged.
                self._sent[path] = LISTED
                folders.add(os.path.dirname(path))
            for folder in folders:  # once per folder: 100,000 files sit in a few hundred
                self._remember(Path(folder))
            listings.append(listed)
        self._catching = threading.Thread(
            target=self._catch_up_syncs, args=(stop, roots, listings), name="plm-catch-up", daemon=True
        )
        self._catching.start()

    def _catch_up_syncs(self, stop: threading.Event, roots: list[Path], listings: list[list[str] | None]) -> None:
        for root, listed in zip(roots, listings, strict=True):
            if self.catch_up is not None and not stop.is_set():
                self._call(f"catch-up {root}", partial(self.catch_up, [root], stop, listed))
        self._set(caught_up=True)

    def _relevant(self, path: Path) -> bool:
        root = next((r for r in self.dirs if under(path, r)), None)
        return root is not None and not any(map(scratch, path.relative_to(root).parts))

    def _contained(self, path: Path) -> bool:
        """Whether the path, symlinks resolved, is inside the watched folder it was found in."""
        return any(under(path, r) and inside(path, r) for r in self.dirs)

    def _refuse(self, path: Path) -> None:
        self.log(
            failure_line(LoadFailure(str(path), "a symlink leading outside the watched folder, which is not read"))
        )
        with self._lock:
            self._state["failed_files"] += 1

    def _files(self, folder: Path) -> Iterable[Path]:
        for where, subdirs, names in os.walk(folder):
            subdirs[:] = [d for d in subdirs if not scratch(d)]
            yield from (p for n in names if not scratch(n) and self.accepts(p := Path(where) / n))

    def _remember(self, folder: Path) -> None:
        """This folder and those above it, up to the watched one, hold synced files."""
        for d in (folder, *folder.parents):
            if d in self._dirs or not any(under(d, r) for r in self.dirs):
                break
            self._dirs.add(d)

    def _ready(self) -> tuple[list[Path], list[Path]]:
        """Up to `max_batch` files that settled or are gone; the rest stay pending."""
        now, wall = time.monotonic(), time.time()
        changed: list[Path] = []
        removed: list[Path] = []
        for path, seen in list(self._pending.items()):
            if len(changed) + len(removed) >= self.max_batch:
                break
            try:
                st: os.stat_result | None = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                del self._pending[path]
                if self._sent.pop(str(path), None) is not None:  # else never synced: nothing to delete
                    removed.append(path)
                elif path in self._dirs:
                    removed.append(path)
                    self._dirs = {d for d in self._dirs if not under(d, path)}
                    inside_it = str(path).rstrip(os.sep) + os.sep
                    self._sent = {f: sig for f, sig in self._sent.items() if not f.startswith(inside_it)}
                continue
            except OSError:  # unreadable: the loader says why
                st = None
            folder = st is not None and stat.S_ISDIR(st.st_mode)
            if not self._contained(path) and (folder or self.accepts(path)):  # a link out: never read
                del self._pending[path]
                if self._sent.pop(str(path), None) is not None:
                    removed.append(path)
                self._refuse(path)
                continue
            if folder:  # made or moved in: read what it holds
                del self._pending[path]
                self._pending.update((p, None) for p in self._files(path) if p not in self._pending)
                continue
            if not self.accepts(path):
                del self._pending[path]
                continue
            sig: tuple[int, int] | None = None
            if st is not None:
                sig = (st.st_size, st.st_mtime_ns)
                if seen is None or seen[0] != sig:
                    seen = self._pending[path] = (sig, now)
                if 1000 * max(wall - st.st_mtime, now - seen[1]) < self.settle_ms:
                    continue  # maybe still being written
            del self._pending[path]
            if sig is None or self._sent.get(str(path)) != sig:  # else a late event for a version synced
                self._sent[str(path)] = sig or (-1, -1)
                changed.append(path)
                self._remember(path.parent)
        return sorted(changed), sorted(removed)

    def _batch(self, changed: list[Path], removed: list[Path]) -> None:
        """Removals first, as their own sync (see the module docstring), then changes."""
        for files, gone in (([], removed), (changed, [])):
            if files or gone:
                with self._lock:
                    self._state["batches"] += 1
                    head = f"batch {self._state['batches']}: {len(files)} changed, {len(gone)} removed"
                self._call(head, partial(self.apply, files, gone), {"changed": len(files), "removed": len(gone)})

    def _call(self, head: str, work: Callable[[], IngestReport], batch: dict[str, Any] | None = None) -> None:
        """Run one sync and log it; an exception is logged and the watcher goes on."""
        try:
            report = work()
        except SyncStopped as exc:  # asked to stop (SIGTERM): not an error
            self.log(f"{head}: {exc}")
            return
        except Exception as exc:  # the watcher outlives any one batch
            reason = str(exc) if isinstance(exc, PlmUserError) else f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, PlmUserError):  # a bug keeps its traceback, in the log
                logger.warning("%s failed", head, exc_info=True)
            self.log(f"error: {head}: {reason}")
            self._set(last_error=reason)
            return
        self.log(f"{head}; {report.summary()}")
        for line in [*(failure_line(f) for f in report.failed), *report.notes]:
            self.log(line)
        with self._lock:
            self._state["failed_files"] += len(report.failed)
            if batch is not None:
                counts = {k: len(getattr(report, k)) for k in ("added", "updated", "deleted")}
                failed = [f"{f.path}: {f.error}" for f in report.failed]
                at = datetime.now(timezone.utc).isoformat(timespec="seconds")
                self._state["last_batch"] = {"at": at, **batch, **counts, "failed": failed, "seconds": report.seconds}
