"""A segment on disk: its folder written whole (temp folder, checksums, fsync, rename),
and opened again, checked, once per process (the open ones kept in `_OPEN`)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plm_core.errors import StaleIndexError, StoreError
from plm_index import builds
from plm_index.segments.state import Rows, Segment

SEGMENT_META = "plm_segment.json"
FORMAT = 1
ROW_FILES = ("seqs.npy", "order.npy", "ids.npy")  # what every segment keeps beside the index's own files

_OPEN: weakref.WeakValueDictionary[str, Segment] = weakref.WeakValueDictionary()  # folder -> open segment
_OPEN_LOCK = threading.Lock()


def _write_segment(base: Path, name: str, rows: Rows, data: Any, save: Any) -> None:
    """Write a segment folder whole: a temp folder with its files and their checksums,
    renamed into place."""
    import numpy as np

    from plm_index.columns import save_ids

    folder = base / "segments" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        np.save(tmp / "seqs.npy", rows.seqs, allow_pickle=False)
        np.save(tmp / "order.npy", rows.order, allow_pickle=False)
        save_ids(tmp / "ids.npy", rows.ids)
        save(data, tmp)
        files = {p.name: [p.stat().st_size, builds.crc32(p)] for p in sorted(tmp.iterdir())}
        # Its own name too: a folder renamed into another's place (two swapped) is whole, yet
        # not the segment the manifest names, and its deletions would apply to other rows.
        meta = {"format": FORMAT, "name": name, "rows": len(rows), "files": files}
        (tmp / SEGMENT_META).write_text(json.dumps(meta, indent=1))
        _fsync_dir(tmp)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_POOL: tuple[int, Any] | None = None  # (pid, executor): a forked child makes its own
_POOL_LOCK = threading.Lock()


def _fsync_dir(folder: Path) -> None:
    """fsync every file of a new segment, all at once: the file system then commits them in
    one journal flush (a write's ten files: about 2 ms here, 35 ms one after another). The
    threads are kept per process: starting eight for each write cost 9 ms of it at 1M."""
    global _POOL
    from concurrent.futures import ThreadPoolExecutor

    paths = list(folder.iterdir())
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(8, thread_name_prefix="plm-fsync"))
        pool = _POOL[1]
    try:
        futures = [pool.submit(_fsync_file, path) for path in paths]
    except RuntimeError:  # the interpreter is exiting: a merge finishing after `main` returned
        futures = []
        for path in paths:
            _fsync_file(path)
    for future in futures:
        future.result()


def _fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _open_segment(base: Path, name: str, open_data: Any) -> Segment:
    """The segment `name`, from this process's open ones or read (checked) from disk."""

    from plm_index.columns import load_ids

    folder = base / "segments" / name
    key = str(folder)
    with _OPEN_LOCK:
        seg = _OPEN.get(key)
    if seg is not None:
        # Open here already: its files' size, mtime and inode are checked again (a stat
        # each), their content only if one of them changed.
        seg.stamp = builds.verify(folder, _part(seg.files, seg.data_loaded), SEGMENT_META)
        return seg
    meta = builds.read_meta(folder, SEGMENT_META)
    problem = meta_problem(folder, meta)
    if problem is not None:
        if meta is None and not folder.exists():
            raise StaleIndexError(f"segment {folder} is gone (no manifest names it any more?)")
        raise StoreError(problem)
    assert meta is not None
    files = meta["files"]
    stamp = builds.verify(folder, _part(files, False), SEGMENT_META)
    n = int(meta.get("rows", -1))

    def load_data() -> Any:
        with _reading(folder):
            opened.stamp = builds.verify(folder, files, SEGMENT_META)
            return open_data(folder, n)

    with _reading(folder):  # read, not mapped: see `check_segment`
        seqs = builds.load_npy(folder / "seqs.npy", mmap=False)
        order = builds.load_npy(folder / "order.npy", mmap=False)
        ids = load_ids(folder / "ids.npy", n, mmap=False)
        if len(seqs) != n or len(order) != n:
            raise ValueError(f"{len(seqs)} seqs and {len(order)} order keys for {n} rows")
    opened = Segment(name, seqs, order, ids, None, load_data)
    opened.files, opened.folder, opened.stamp = files, folder, stamp
    with _OPEN_LOCK:
        return _OPEN.setdefault(key, opened)


def meta_problem(folder: Path, meta: dict[str, Any] | None) -> str | None:
    """What is wrong with a segment folder's metadata, as the one line a reader and
    `plm index stats` give; None when it is sound."""
    if meta is None:
        return f"index segment {folder} is corrupt: {SEGMENT_META} is unreadable; run `plm index rebuild`"
    if not isinstance(meta.get("files"), dict):
        return f"index segment {folder} is corrupt: {SEGMENT_META} has no valid file list; run `plm index rebuild`"
    if meta.get("name", folder.name) != folder.name:  # segments written before names were kept have none
        return (
            f"index segment {folder} holds the files of segment {meta.get('name')!r} (folders swapped or copied "
            "over?); run `plm index rebuild`"
        )
    return None


def check_segment(seg: Segment) -> None:
    """A segment open in this process is still the files it was read from: each file's size,
    mtime and inode, a stat each and no byte read (a query calls this for every segment), and
    the content checked again (size, checksum) only when one of them changed: StoreError
    naming the segment when it no longer is. Its data were read into memory, never mapped, so
    a file truncated meanwhile costs no SIGBUS, and nothing changed on disk is ever scored; yet
    the index on disk is damaged and the next process would meet it: a reader says so at once.
    A folder that is gone was retired by garbage collection (its version superseded), which
    renames a whole folder away: what this reader holds of it stays sound."""
    folder, stamp = seg.folder, seg.stamp
    if folder is None or stamp is None:
        return  # in memory only
    watch = seg.watch
    if watch is None or watch[0] is not stamp:  # paths joined once: Path's `/` cost more than a stat
        watch = seg.watch = (stamp, [os.path.join(folder, n) for n, *_ in stamp], [tuple(s[1:]) for s in stamp])
    try:
        if [(st.st_size, st.st_mtime_ns, st.st_ino) for st in map(os.stat, watch[1])] == watch[2]:
            return
    except FileNotFoundError:
        if not folder.exists():
            return
    try:
        with _reading(folder):
            seg.stamp = builds.verify(folder, _part(seg.files, seg.data_loaded), SEGMENT_META)
    except StaleIndexError:
        if folder.exists():
            raise
        # retired between the stat and the check: as above


def _part(files: Any, everything: bool) -> Any:
    """A segment's file list: all of it, or the row files only (seqs, order keys, ids)."""
    if everything or not isinstance(files, dict):
        return files
    return {name: v for name, v in files.items() if name in ROW_FILES}


@contextmanager
def _reading(folder: Path) -> Iterator[None]:
    """Errors while reading a segment's files as the runtime's: stale when it was removed
    meanwhile, a one-line StoreError when it is damaged."""
    try:
        yield
    except FileNotFoundError:
        raise StaleIndexError(f"segment {folder} was removed while loading") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StoreError(f"index segment {folder} is corrupt ({err}): run `plm index rebuild`") from None
