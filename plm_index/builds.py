"""Versioned, checksummed, atomically swapped build folders: shared machinery for every
stage that saves an index (BM25, an ANN graph), importable by any plugin.

A stage with a plain save/load path subclasses `SavedIndex` and gets all of this for
free; a stage that needs more (several files per version, a build shared with another
stage) calls the functions below itself, under its `stage_folder`.

Layout: `<base>/v<counter>-<key>/` holds one build for one corpus version (`key` hashes
the store id, the version's nonce and the build's settings), with a metadata file
recording the version, the settings and each file's size and CRC32. `save_build` writes
to a hidden temp folder and renames it into place; older builds are renamed away before
they are deleted, so a reader sees a whole build or none; leftovers of dead writers are
cleaned up. `open_build` checks a build before use: StaleIndexError when there is none
for this version and these settings (rebuild it), StoreError when it is damaged, every
file checked by content (CRC32) once per process, whatever its timestamps say.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import shutil
import threading
import time
import uuid
import zlib
from abc import abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from plm_core.errors import StaleIndexError, StoreError
from plm_core.interfaces import Index, Snapshot
from plm_core.records import CorpusVersion

META_FILE = "plm_build.json"
LEFTOVER_MAX_AGE_S = 3600  # temp folders older than this are a dead writer's, whatever their pid


def stage_folder(index_dir: Path, kind: str, settings: Mapping[str, Any]) -> Path:
    """The folder of one stage's builds: named by what the stage is and the settings its
    builds depend on, never by its table label, so the same index under another label is
    the same folder (no rebuild), and two differently configured ones never share one."""
    identity = json.dumps(dict(settings), sort_keys=True, default=str)
    return Path(index_dir) / f"{kind}-{hashlib.sha1(identity.encode()).hexdigest()[:12]}"


def build_path(base: Path, version: CorpusVersion, settings: Mapping[str, Any]) -> Path:
    """Where the build of `version` with `settings` lives under `base`."""
    identity = json.dumps([f"{version.store_id}:{version.nonce}", dict(settings)], sort_keys=True, default=str)
    return Path(base) / f"v{version.counter}-{hashlib.sha1(identity.encode()).hexdigest()[:12]}"


def save_build(
    target: Path, write: Callable[[Path], None], meta: Mapping[str, Any], meta_file: str = META_FILE
) -> None:
    """Run `write(folder)` into a temp folder next to `target`, record each file's size and
    CRC32 with `meta`, and rename the folder into place; then remove older builds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        write(tmp)
        files = {p.name: [p.stat().st_size, crc32(p)] for p in sorted(tmp.iterdir())}
        (tmp / meta_file).write_text(json.dumps({**meta, "files": files}, indent=1))
        swap_in(tmp, target, meta_file)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    remove_older(target)


def build_matches(path: Path, version: CorpusVersion, settings: Mapping[str, Any], meta_file: str = META_FILE) -> bool:
    """True when `path` holds a build for this version and these settings (not yet verified)."""
    meta = read_meta(path, meta_file)
    return (
        meta is not None and meta.get("version") == version.token and all(meta.get(k) == v for k, v in settings.items())
    )


def open_build(
    path: Path, version: CorpusVersion, settings: Mapping[str, Any], what: str, meta_file: str = META_FILE
) -> dict[str, Any]:
    """The build's metadata after checking every file; StaleIndexError when `path` holds no
    build for this version and settings, StoreError when a file is damaged."""
    if not build_matches(path, version, settings, meta_file):
        raise StaleIndexError(f"{what} has no build for the store's corpus version {version} and these settings")
    meta = read_meta(path, meta_file) or {}
    verify(path, meta.get("files"), meta_file)
    return meta


def crc32(path: Path) -> int:
    crc = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


def read_meta(path: Path, meta_file: str = META_FILE) -> dict[str, Any] | None:
    """A build's metadata file, or None when it is missing or unreadable."""
    try:
        return dict(json.loads((path / meta_file).read_text()))
    except (OSError, ValueError, TypeError):
        return None


Stamp = tuple[tuple[str, int, int, int], ...]  # (file name, size, mtime_ns, inode) of each file


def verify(path: Path, files: Any, meta_file: str = META_FILE, trust_this_process: bool = True) -> Stamp:
    """Every file the build wrote is there with its size and checksum, else StoreError;
    StaleIndexError when the build was moved away meanwhile (a newer one replaced it).
    With `trust_this_process`, a build this process already checksummed (and whose files'
    size, mtime and inode are unchanged) is not read again. Returns the files' stamp as
    checked: a reader stats the files again to learn that one changed since."""
    valid = isinstance(files, dict) and all(
        isinstance(n, str) and "/" not in n and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
        for n, v in files.items()
    )
    if not valid:
        raise StoreError(f"index build {path} is corrupt: {meta_file} has no valid file list; run `plm index rebuild`")
    try:
        seen = []
        for name, (size, _) in sorted(files.items()):
            st = (path / name).stat()
            if st.st_size != size:
                raise StoreError(
                    f"index build {path} is corrupt: {name} has {st.st_size} bytes, {size} were written "
                    "(truncated?); run `plm index rebuild`"
                )
            seen.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
        key = (str(path), tuple(seen))
        if trust_this_process and key in _VERIFIED:
            return key[1]  # checksummed by this process, and no file was written or replaced since
        for name, (_, crc) in files.items():
            if crc32(path / name) != crc:
                raise StoreError(f"index build {path} is corrupt: {name} fails its checksum; run `plm index rebuild`")
        _VERIFIED.add(key)
        return key[1]
    except FileNotFoundError as err:
        # Builds are only ever removed by renaming the whole folder first, so a folder that
        # is still in place with a file missing was damaged; one that is gone was replaced.
        if not (path / meta_file).exists():
            raise StaleIndexError(f"index build {path} was replaced while loading") from None
        name = Path(err.filename or "?").name
        raise StoreError(f"index build {path} is corrupt: {name} is missing; run `plm index rebuild`") from None


# An open checksums every file of a build by content (timestamps prove nothing: bit rot and
# a bad disk change bytes in place), once per process: a server's readers and reloads, or
# `plm eval` over several configs, open the same build again without reading it again.
# Measured at 100k chunks (bench/bench_build_open.py, BENCHMARKS.md section 13): 19 ms for
# the BM25 build (31 MB), 74 ms for the vectors (154 MB, which a dense query reads anyway).
_VERIFIED: set[tuple[str, Stamp]] = set()


def swap_in(tmp: Path, target: Path, meta_file: str = META_FILE) -> None:
    """Rename a finished build into place. An intact build already there (another process
    built the same version) is kept; a damaged one is replaced."""
    try:
        tmp.rename(target)
        return
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    meta = read_meta(target, meta_file)
    try:
        if meta is not None:
            verify(target, meta.get("files"), meta_file, trust_this_process=False)
            return  # equivalent and intact: ours is dropped by the caller
    except (OSError, ValueError, TypeError, StoreError):
        pass
    old = retire(target)
    try:
        tmp.rename(target)
    except OSError as err:
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):  # else: another process's build is there
            if old is not None:
                old.rename(target)  # put the previous build back rather than leave none
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def retire(entry: Path) -> Path | None:
    """Rename a build out of the way (atomic: readers see all of it or none), for deletion."""
    old = entry.with_name(f".old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        entry.rename(old)
    except FileNotFoundError:
        return None
    return old


def remove_older(target: Path) -> None:
    """Delete builds for older versions (and other settings) next to `target`, leftovers of
    processes that died, and files of the pre-versioned layout. Builds are renamed away
    before they are deleted, so a reader never sees a partial folder."""
    mine = int(target.name[1:].split("-", 1)[0])
    for entry in target.parent.iterdir():
        name = entry.name
        if name == target.name:
            continue
        if name.startswith((".tmp-", ".old-")):
            if live_leftover(entry, time.time()):
                continue
        elif name.startswith("v") and name[1:].split("-", 1)[0].isdigit():
            if int(name[1:].split("-", 1)[0]) > mine:
                continue  # a newer build
        discard(entry)


def live_leftover(entry: Path, now: float) -> bool:
    """A `.tmp-PID-...` or `.old-PID-...` entry still being written or removed by a live
    process (maybe this one). The age limit covers containers, where every run may be the
    same pid: an older one is a dead writer's."""
    pid = entry.name.split("-")[1]
    return pid.isdigit() and _alive(int(pid)) and now - mtime(entry) < LEFTOVER_MAX_AGE_S


def discard(entry: Path) -> None:
    """Delete a file, or a folder renamed out of the way first (a reader never sees part of
    it; a temp or retired folder is no reader's already)."""
    if entry.is_dir() and not entry.is_symlink():
        retired = entry if entry.name.startswith((".tmp-", ".old-")) else retire(entry)
        if retired is not None:
            shutil.rmtree(retired, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def mtime(path: Path) -> float:
    """The modification time, 0 for a path that vanished meanwhile."""
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SavedIndex(Index):
    """An `Index` with a plain in-memory build and save/load path (bm25s's shape): write
    `index`, `save` and `open_saved`; the runtime keeps one build per corpus version under
    the stage's `stage_folder`, versioned, checksummed and swapped in atomically, and opens
    the one made for the version being searched (or rebuilds in memory when there is none).
    Mix it into a family base: `class MyRetriever(plm.Retriever, plm.SavedIndex)`."""

    def build_settings(self) -> dict[str, Any]:
        """What a saved build depends on besides the corpus (default: the stage's config);
        a build saved with other settings is never opened."""
        config = getattr(self, "config", None)
        return {"index": type(self).__qualname__, **(config.model_dump(mode="json") if config is not None else {})}

    @abstractmethod
    def index(self, snapshot: Snapshot) -> None:
        """Build the index in memory from the snapshot (its `chunk_ids`, `index_texts`, ...)."""

    @abstractmethod
    def save(self, folder: Path) -> None:
        """Write the in-memory index into `folder` (an empty temporary folder)."""

    @abstractmethod
    def open_saved(self, folder: Path, snapshot: Snapshot) -> None:
        """Load what `save` wrote for this snapshot's version (checked before this is called)."""

    def builds_folder(self, index_dir: Path) -> Path:
        return stage_folder(index_dir, str(getattr(self, "name", type(self).__name__)), self.build_settings())

    def _build_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        return build_path(self.builds_folder(index_dir), version, self.build_settings())

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        self.index(snapshot)
        if index_dir is not None:
            meta = {**self.build_settings(), "version": snapshot.version.token}
            save_build(self._build_path(index_dir, snapshot.version), self.save, meta)

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        return build_matches(self._build_path(index_dir, version), version, self.build_settings())

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        path = self._build_path(index_dir, snapshot.version)
        label = getattr(self, "label", type(self).__name__)
        open_build(path, snapshot.version, self.build_settings(), f"index {label!r} under {path.parent}")
        self.open_saved(path, snapshot)


_NPY_LOCK = threading.Lock()


def load_npy(path: Path, mmap: bool = True) -> Any:
    """`np.load` of a .npy file (memory-mapped read-only by default, never a pickle; with
    `mmap` false read whole into memory with read(2), so a file truncated under a reader is a
    short read, never a SIGBUS on a page that is gone, and a file changed in place later
    changes nothing already read). Headers are parsed one thread at a time: numpy parses
    them with `ast`, whose state CPython 3.11 shares between threads (gh-106905), so a merge
    thread and a query opening segments at once could fail with "SystemError: AST
    constructor recursion depth mismatch"."""
    import numpy as np

    if mmap:
        with _NPY_LOCK:
            return np.load(path, mmap_mode="r", allow_pickle=False)
    fmt = np.lib.format
    with path.open("rb") as fh:
        with _NPY_LOCK:  # the header only: a large file is read while other threads open theirs
            try:
                version = fmt.read_magic(fh)
            except ValueError:
                raise ValueError(f"{path.name} is not a .npy array (its header is gone)") from None
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = read_header(fh)
        if dtype.hasobject:
            raise ValueError(f"{path.name} holds Python objects, which are never loaded")
        count = math.prod(shape)
        array = np.fromfile(fh, dtype=dtype, count=count)
    if len(array) != count:
        raise ValueError(f"{path.name} holds {len(array)} of its {count} values (truncated?)")
    array = array.reshape(shape, order="F" if fortran else "C")
    array.flags.writeable = False  # read once, shared by every reader of the build
    return array
