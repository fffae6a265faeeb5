"""`plm watch DIR... --config FILE`: keep an index in sync with folders as files change.

`job_watcher` wires a `FolderWatcher` (plm_serve/folder_watcher.py, where the watch's
rules are: catch-up, debounce, settling, batches, renames, removals) to a job: each batch
is one `sync_paths`, the catch-up syncs the files that changed while nothing watched
(plm_index/catch_up.py) or, when that cannot be told, the folder as `ingest(folder,
prune=True)` does, and only the files the job's loader reads are watched
(plm_serve/watch_filters.py). `plm serve --watch` uses it with the server's write lock;
`watch_command` is `plm watch`, which also leaves a watcher file in the index folder for a
server over the same index (plm_serve/watcher_file.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from plm_core.errors import PlmUserError
from plm_index.catch_up import folder_changes
from plm_index.cli_kit import ConfigOpt, IndexOpt, SetOpt, open_job, out
from plm_index.job import Job
from plm_index.sources import lists_files
from plm_index.sync import IngestReport
from plm_serve.folder_watcher import FolderWatcher
from plm_serve.syncing import sync_paths
from plm_serve.watch_filters import loader_filter_for
from plm_serve.watcher_file import WATCHER_FILE, write_watcher_file

Locked = Callable[[Callable[[Job], IngestReport]], IngestReport]  # runs one sync, e.g. under a lock
Read = Callable[[Callable[[Job], Any]], Any]  # runs a read of the writer's store between syncs


def job_watcher(
    job: Job, dirs: Iterable[str | Path], locked: Locked | None = None, read: Read | None = None, **options: Any
) -> FolderWatcher:
    """A FolderWatcher keeping `job`'s index in sync: `sync_paths` per batch, a catch-up
    of what changed while nothing watched, only the files the job's loader reads.
    `locked(work)` runs each sync, e.g. under a server's write lock (default: a lock of its
    own, since the catch-up and the batches run in two threads), and `read(work)` runs
    `work(job)` between syncs (default: `locked`)."""
    if locked is None:
        lock = threading.Lock()

        def serial(work: Callable[[Job], Any]) -> Any:
            with lock:
                return work(job)

        locked = serial
    read = read or locked
    roots = [Path(os.path.abspath(d)) for d in dirs]
    return FolderWatcher(
        roots,
        lambda c, r: locked(lambda j: sync_paths(j, c, r)),
        catch_up=partial(catch_up, job, locked, read),
        loader_filter=loader_filter_for(job.loader, roots),
        lister=partial(listed_files, job.loader) if lists_files(job.loader) else None,
        **options,
    )


def catch_up(
    job: Job, locked: Locked, read: Read, dirs: list[Path], stop: threading.Event, listed: list[str] | None
) -> IngestReport:
    """Sync what changed in a folder while nothing watched: the files `folder_changes` finds
    changed, as one batch (a second at 100,000 files, mostly outside the lock), or, when it
    cannot tell (a folder never ingested, another model, many changes), the whole folder as
    `plm ingest DIR --prune` does."""
    started = time.perf_counter()
    changes = folder_changes(job, str(dirs[0]), listed, read) if listed is not None and len(dirs) == 1 else None
    checked = time.perf_counter() - started
    if changes is None or listed is None:
        return locked(lambda j: j.ingest(dirs, prune=True, stop=stop))
    changed, removed = changes
    report = locked(lambda j: sync_paths(j, [Path(p) for p in changed], [Path(p) for p in removed]))
    report.unchanged += len(listed) - len(changed)
    report.documents += len(listed) - len(changed)
    report.time("find changes", checked)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def listed_files(loader: Any, folder: Path) -> list[str]:
    """The files a listing loader reads in `folder` (none when it has none to read)."""
    try:
        return list(loader.files(str(folder))[0])
    except PlmUserError:
        return []


def watch_command(
    dirs: Annotated[
        list[Path], typer.Argument(help="Folders to keep indexed (watched recursively).", exists=True, file_okay=False)
    ],
    config: ConfigOpt,
    set_: SetOpt = None,
    index: IndexOpt = None,
    debounce_ms: Annotated[
        int, typer.Option("--debounce-ms", min=10, help="Sync once the folders have been quiet this long (ms).")
    ] = 300,
) -> None:
    """Keep an index in sync with folders: one catch-up sync (as `plm ingest DIR --prune`),
    then the files saved, renamed or deleted, in batches, as it happens. Ctrl-C or SIGTERM
    stops it after the batch in progress."""
    job = open_job(config, set_, None, index)
    if not job.config.index:
        raise PlmUserError(f"{config} has no [index] stages: plm watch needs a loader and a chunker")

    def log(line: str) -> None:
        out.print(f"{time.strftime('%H:%M:%S')} {line}", highlight=False, markup=False)
        with suppress(OSError):  # after every batch: what a server's /status reports
            write_watcher_file(job.index_dir, watcher.state())

    watcher = job_watcher(job, dirs, debounce_ms=debounce_ms, log=log)
    stop = threading.Event()
    caught: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():  # a second Ctrl-C stops at once (each stored batch is one transaction)
            raise KeyboardInterrupt
        caught.append(signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    log(f"watching {', '.join(map(str, watcher.dirs))} into {job.index_dir}")
    try:
        watcher.run(stop)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        with suppress(OSError):
            (job.index_dir / WATCHER_FILE).unlink()
        job.close()
    log(f"{caught[0] if caught else 'stop'}: stopped after the batch in progress")
