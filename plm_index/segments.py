"""Segmented indexes: a derived index as immutable segments plus deletions, kept current
from the store's change feed, so one saved file costs one small segment, not a rebuild.

A stage subclasses `SegmentedIndex` and writes four methods: `build_data` (a segment's
own data from rows: chunk texts or vectors), `save_data`, `open_data` and `merge_data`.
This module does the rest:

- **Rows.** Every chunk has a feed sequence number (`seq`, never reused) and an order key
  (its place in the store's index order). A segment's rows are sorted by seq; a chunk
  that changes gets a new seq, so a segment never changes: its old row is deleted.
- **Versions.** A manifest per corpus version names the segments and, per segment, the
  rows deleted (a content-addressed file). Segment folders and deletion files are written
  first, each whole (temp folder, checksums, rename), the manifest last (atomic replace):
  a reader or a crash sees a whole version or the previous one.
- **Refresh.** A sync opens the newest manifest at or before the store's feed position,
  reads what changed since (`rows_since`, `removed_since`), adds one segment for the new
  rows, marks the removed ones deleted, and writes the new version's manifest: cost in
  proportion to the change. With no usable manifest it builds one segment of everything.
- **Readers** open a version's manifest; segments already open in this process are
  reused (memory-mapped, immutable), so a reload costs the new segments and deletions.
  A reader whose version has no manifest yet applies the change in memory.
- **Merges** (`merge_plan`): adjacent segments of the same size tier are merged, at most
  MERGE_FACTOR per tier, and a segment with half its rows deleted is rewritten; in a
  background thread of the process that refreshed (never on a query's path, never holding
  up a sync). A merge writes its segment, then swaps it into the newest manifest under
  the stage's lock if its inputs are still there; killed at any point, the index stays
  the one the manifest names and the leftover folder is removed later.
"""

from __future__ import annotations

import bisect
import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import threading
import time
import uuid
import weakref
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plm_core.errors import IndexDamagedError, StaleIndexError, StoreError
from plm_core.interfaces import Index, Snapshot
from plm_core.records import CorpusVersion
from plm_index import builds
from plm_index.ranking import top_n, top_n_sparse

log = logging.getLogger(__name__)

SEGMENT_META = "plm_segment.json"
MERGE_FACTOR = 4  # segments of one size tier before they are merged into one
FLOOR_ROWS = 8192  # segments up to this many live rows are all in the lowest tier
KEEP_MANIFESTS = 3  # older versions' manifests kept for readers still opening them
GRACE_S = 120.0  # unreferenced files younger than this are a writer's, in flight
FORMAT = 1


class Rows:
    """Chunks a segment is built from, sorted by seq: their seqs, chunk ids, order keys,
    and the texts or the vectors (whichever the index reads)."""

    def __init__(
        self, seqs: Any, ids: Sequence[str], order: Any, texts: Sequence[str] | None = None, vectors: Any = None
    ) -> None:
        import numpy as np

        self.seqs = np.asarray(seqs, dtype=np.int64)
        self.order = np.asarray(order, dtype=np.int64)
        self.ids, self.texts, self.vectors = list(ids), texts, vectors
        if not (len(self.seqs) == len(self.order) == len(self.ids)):
            raise ValueError("rows: seqs, ids and order keys differ in length")
        if len(self.seqs) > 1 and not bool(np.all(self.seqs[1:] > self.seqs[:-1])):
            raise ValueError("rows must be sorted by seq, each seq once")

    def __len__(self) -> int:
        return len(self.ids)


ROW_FILES = ("seqs.npy", "order.npy", "ids.npy")  # what every segment keeps beside the index's own files


class Segment:
    """One immutable segment, open: row -> seq (ascending), order key, chunk id, and the
    index's own `data` for its rows (read, and checked, when first used: a sync that only
    marks rows deleted in a segment never reads its data)."""

    def __init__(self, name: str, seqs: Any, order: Any, ids: Sequence[str], data: Any, loader: Any = None) -> None:
        self.name, self.seqs, self.order, self.ids = name, seqs, order, ids
        self._data, self._loader = data, loader
        self._lock = threading.Lock()
        self.files: Any = None  # the saved files' sizes and checksums (None: in memory only)

    @property
    def data(self) -> Any:
        if self._loader is not None:
            with self._lock:
                if self._loader is not None:
                    self._data, self._loader = self._loader(), None
        return self._data

    @property
    def data_loaded(self) -> bool:
        return self._loader is None

    @property
    def n(self) -> int:
        return len(self.seqs)

    def rows_of(self, seqs: Any) -> Any:
        """Local rows of those of `seqs` that are in this segment."""
        import numpy as np

        seqs = np.asarray(seqs, dtype=np.int64)
        if not self.n or not len(seqs):
            return np.zeros(0, dtype=np.int64)
        at = np.searchsorted(self.seqs, seqs)
        inside = at < self.n
        at, seqs = at[inside], seqs[inside]
        return at[self.seqs[at] == seqs].astype(np.int64)


_OPEN: weakref.WeakValueDictionary[str, Segment] = weakref.WeakValueDictionary()  # folder -> open segment
_OPEN_LOCK = threading.Lock()


class State:
    """One version of a segmented index: its segments, each one's deleted local rows
    (sorted int64), the feed position it describes, and what queries derive from them."""

    def __init__(self, segments: list[Segment], deleted: list[Any], position: int, version: CorpusVersion) -> None:
        import numpy as np

        self.segments, self.deleted, self.position, self.version = segments, deleted, position, version
        self.offsets = np.cumsum([0] + [s.n for s in segments]).astype(np.int64)
        self.total = int(self.offsets[-1])
        self.n_live = self.total - sum(len(d) for d in deleted)
        self.extra: dict[str, Any] = {}  # what the stage records with each version (`manifest_extra`)
        self._cache: dict[str, Any] = {}

    def cached(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def dead(self, i: int) -> Any:
        """Segment i's deleted rows as a boolean mask, or None when none is deleted."""
        import numpy as np

        if not len(self.deleted[i]):
            return None

        def make() -> Any:
            mask = np.zeros(self.segments[i].n, dtype=bool)
            mask[self.deleted[i]] = True
            return mask

        return self.cached(f"dead{i}", make)

    @property
    def live(self) -> Any:
        """Boolean mask over all rows (segments concatenated): False for deleted rows."""
        import numpy as np

        def make() -> Any:
            mask = np.ones(self.total, dtype=bool)
            for off, dead in zip(self.offsets, self.deleted, strict=False):
                mask[off + dead] = False
            return mask

        return self.cached("live", make)

    @property
    def order(self) -> Any:
        import numpy as np

        return self.cached(
            "order",
            lambda: np.concatenate([s.order for s in self.segments]) if self.segments else np.zeros(0, np.int64),
        )

    @property
    def ids(self) -> RowIds:
        return self.cached("ids", lambda: RowIds(self))

    def rows_in_index_order(self) -> Any:
        """Global row of each live chunk, in the store's index order; None when that is
        every row in row order (one segment built whole, nothing deleted)."""
        import numpy as np

        def make() -> Any:
            rows = np.flatnonzero(self.live)
            rows = rows[np.argsort(self.order[rows], kind="stable")]
            return None if len(rows) == self.total and bool(np.all(rows == np.arange(self.total))) else rows

        return self.cached("index_order", make)

    def allowed_rows(self, allowed: Any = None) -> Any:
        """The live rows that an index-order `allowed` mask (or None: all) lets through, as a
        boolean mask over this state's rows."""
        import numpy as np

        if allowed is None:
            return self.live
        allowed = np.asarray(allowed, dtype=bool)
        rows = self.rows_in_index_order()
        if rows is None:
            return allowed & self.live
        mask = np.zeros(self.total, dtype=bool)
        mask[rows[allowed]] = True
        return mask

    def top(self, scores: Any, n: int, source: str, allowed: Any = None, drop_zero: bool = False) -> list[Any]:
        """`top_n` over the live rows in the store's index order (`allowed` is a mask in that
        order): the same hits, in the same order, equal scores included, as an index built
        whole from the same corpus gives."""
        rows = self.rows_in_index_order()
        if rows is None:
            return top_n(scores, n, self.ids, source, allowed, drop_zero)
        return top_n(scores[rows], n, Picked(self.ids, rows), source, allowed, drop_zero)

    def top_of(
        self, rows: Any, values: Any, n: int, source: str, allowed: Any = None, drop_zero: bool = False
    ) -> list[Any] | None:
        """`top` of scores that are zero except at `rows` (live, distinct), found among those
        rows alone (`top_n_sparse`); None where only `top` over every row can tell."""
        index = self.rows_in_index_order()
        if index is None:
            return top_n_sparse(rows, values, self.n_live, n, self.ids, source, allowed, drop_zero)
        positions = self.cached("index_positions", lambda: _inverse(index, self.total))[rows]
        return top_n_sparse(positions, values, self.n_live, n, Picked(self.ids, index), source, allowed, drop_zero)


def _inverse(rows: Any, total: int) -> Any:
    """Each row's place in `rows` (-1 where absent)."""
    import numpy as np

    where = np.full(total, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows), dtype=np.int64)
    return where


class Picked(Sequence[str]):
    """ids[rows[i]] for each i, looked up when needed."""

    def __init__(self, ids: Sequence[str], rows: Any) -> None:
        self._ids, self._rows = ids, rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._ids[int(r)] for r in self._rows[i]]
        return self._ids[int(self._rows[i])]


class RowIds(Sequence[str]):
    """Chunk id of each row of a state (segments concatenated), looked up when needed."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._starts = state.offsets[:-1].tolist()  # each segment's first row
        self._ids = [s.ids for s in state.segments]

    def __len__(self) -> int:
        return self._state.total

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        row = int(row) + (self._state.total if row < 0 else 0)
        if not 0 <= row < self._state.total:
            raise IndexError(f"row {row} of {self._state.total}")
        seg = bisect.bisect_right(self._starts, row) - 1
        return self._ids[seg][row - self._starts[seg]]


# ---------------------------------------------------------------------- files


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
        meta = {"format": FORMAT, "rows": len(rows), "files": files}
        (tmp / SEGMENT_META).write_text(json.dumps(meta, indent=1))
        _fsync_dir(tmp)
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fsync_dir(folder: Path) -> None:
    """fsync every file of a new segment, all at once: the file system then commits them in
    one journal flush (a write's ten files: about 2 ms here, 35 ms one after another). A
    pool per call (a few threads, well under a millisecond) stays right in a forked child."""
    from concurrent.futures import ThreadPoolExecutor

    paths = list(folder.iterdir())
    with ThreadPoolExecutor(max(1, min(8, len(paths))), thread_name_prefix="plm-fsync") as pool:
        list(pool.map(_fsync_file, paths))


def _fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _open_segment(base: Path, name: str, open_data: Any) -> Segment:
    """The segment `name`, from this process's open ones or read (checked) from disk."""
    import numpy as np

    from plm_index.columns import load_ids

    folder = base / "segments" / name
    key = str(folder)
    with _OPEN_LOCK:
        seg = _OPEN.get(key)
    if seg is not None:
        # Open here already: its files' size, mtime and inode are checked again (a stat
        # each), their content only if one of them changed.
        builds.verify(folder, _part(seg.files, seg.data_loaded), SEGMENT_META)
        return seg
    meta = builds.read_meta(folder, SEGMENT_META)
    if meta is None:
        if not folder.exists():
            raise StaleIndexError(f"segment {folder} is gone (no manifest names it any more?)")
        raise StoreError(f"index segment {folder} is corrupt: {SEGMENT_META} is unreadable; run `plm index rebuild`")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise StoreError(
            f"index segment {folder} is corrupt: {SEGMENT_META} has no valid file list; run `plm index rebuild`"
        )
    builds.verify(folder, _part(files, False), SEGMENT_META)
    n = int(meta.get("rows", -1))

    def load_data() -> Any:
        with _reading(folder):
            builds.verify(folder, files, SEGMENT_META)
            return open_data(folder, n)

    with _reading(folder):
        seqs = builds.load_npy(folder / "seqs.npy").view(np.ndarray)
        order = builds.load_npy(folder / "order.npy").view(np.ndarray)
        ids = load_ids(folder / "ids.npy", n)
        if len(seqs) != n or len(order) != n:
            raise ValueError(f"{len(seqs)} seqs and {len(order)} order keys for {n} rows")
    seg = Segment(name, seqs, order, ids, None, load_data)
    seg.files = files
    with _OPEN_LOCK:
        return _OPEN.setdefault(key, seg)


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


_DELETES: OrderedDict[str, Any] = OrderedDict()  # deletion file -> its rows (content-addressed: never changes)
_DELETES_KEPT = 1024


def _write_deletes(base: Path, seg: str, rows: Any) -> str | None:
    import numpy as np

    if not len(rows):
        return None
    raw = np.ascontiguousarray(rows, dtype=np.int64)
    name = f"{seg}-{hashlib.sha1(raw.tobytes()).hexdigest()[:16]}.npy"
    path = base / "deletes" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        with tmp.open("wb") as fh:
            np.save(fh, raw, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    _remember(str(path), raw)
    return name


def _remember(path: str, rows: Any) -> None:
    _DELETES[path] = rows
    _DELETES.move_to_end(path)
    while len(_DELETES) > _DELETES_KEPT:
        _DELETES.popitem(last=False)


def _read_deletes(base: Path, name: str | None, n_rows: int, cached: bool = True) -> Any:
    import numpy as np

    if name is None:
        return np.zeros(0, dtype=np.int64)
    path = base / "deletes" / name
    if cached and str(path) in _DELETES:
        return _DELETES[str(path)]
    try:
        rows = builds.load_npy(path, mmap=False)
    except FileNotFoundError:
        raise StaleIndexError(f"deletions {path} were removed while loading") from None
    except (OSError, ValueError) as err:
        # numpy's own words for random bytes advise loading them with pickle: not ours to repeat
        why = "not an array of row numbers" if "pickle" in str(err) else str(err)
        raise StoreError(f"index deletions {path} are corrupt ({why}): run `plm index rebuild`") from None
    digest = hashlib.sha1(np.ascontiguousarray(rows, dtype=np.int64).tobytes()).hexdigest()[:16]
    if (
        rows.ndim != 1
        or not name.endswith(f"-{digest}.npy")
        or (len(rows) and (rows.min() < 0 or rows.max() >= n_rows))
    ):
        raise StoreError(f"index deletions {path} are corrupt (checksum): run `plm index rebuild`")
    _remember(str(path), rows)
    return rows


def manifest_name(version: CorpusVersion) -> str:
    key = hashlib.sha1(f"{version.store_id}:{version.nonce}".encode()).hexdigest()[:12]
    return f"v{version.counter}-{key}.json"


@contextmanager
def _locked(base: Path) -> Iterator[None]:
    """The stage folder's writer lock (one manifest writer at a time, across processes)."""
    base.mkdir(parents=True, exist_ok=True)
    with (base / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at `path`, or None when there is none; a damaged one is None too, and
    logged once with its cause (`damage` reports it; `plm index rebuild` replaces it)."""
    manifest, problem = parse_manifest(path)
    if problem is not None:
        _warn_once(path, f"index manifest {path} {problem}: it is skipped; run `plm index rebuild` to repair")
    return manifest


_MANIFEST_KEYS = {
    "format": int,
    "version": str,
    "store": str,
    "counter": int,
    "nonce": str,
    "position": int,
    "settings": dict,
    "extra": dict,
    "segments": list,
}


def parse_manifest(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) for a sound manifest, (None, None) when there is no file, and
    (None, what is wrong) for a damaged one: every field is checked, since a manifest decides
    which files a reader opens."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err.strerror or err})"
    if not raw.strip():
        return None, "is empty (truncated)"
    try:
        manifest = json.loads(raw.decode())
    except UnicodeDecodeError:
        return None, "is not text (overwritten with other bytes)"
    except ValueError as err:
        return None, f"is not valid JSON ({getattr(err, 'msg', err)}, byte {getattr(err, 'pos', '?')}: truncated?)"
    if not isinstance(manifest, dict):
        return None, f"holds a JSON {type(manifest).__name__}, not a manifest"
    wrong = [k for k, t in _MANIFEST_KEYS.items() if type(manifest.get(k)) is not t]
    if wrong:
        return None, f"lacks valid fields {', '.join(wrong)} (overwritten?)"
    if manifest["format"] != FORMAT:
        return None, f"has format {manifest['format']}, this plm reads format {FORMAT}"
    version = CorpusVersion(manifest["store"], manifest["counter"], manifest["nonce"])
    if manifest_name(version) != path.name or manifest["version"] != version.token:
        return None, f"describes version {manifest['version']}, not the one its file name says (copied over?)"
    for entry in manifest["segments"]:
        if not (isinstance(entry, dict) and _safe(entry.get("name")) and type(entry.get("rows")) is int):
            return None, f"names a segment wrongly ({json.dumps(entry)[:80]})"
        deleted = entry.get("deleted")
        if entry["rows"] < 0 or not (deleted is None or (_safe(deleted) and deleted.startswith(f"{entry['name']}-"))):
            return None, f"names a segment wrongly ({json.dumps(entry)[:80]})"
    return manifest, None


def _safe(name: Any) -> bool:
    """A file name a manifest may name: no folder, nothing hidden."""
    return isinstance(name, str) and bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def _warn_once(path: Path, message: str) -> None:
    """Log damage at warning level once per process and message (a server reloads often)."""
    with _WARNED_LOCK:
        if (str(path), message) in _WARNED:
            return
        _WARNED.add((str(path), message))
    log.warning("%s", message)


def _write_manifest(base: Path, state: State, settings: dict[str, Any], names: list[str | None]) -> None:
    manifest = {
        "format": FORMAT,
        "version": state.version.token,
        "store": state.version.store_id,
        "counter": state.version.counter,
        "nonce": state.version.nonce,
        "position": state.position,
        "settings": settings,
        "extra": state.extra,
        "segments": [{"name": s.name, "rows": s.n, "deleted": d} for s, d in zip(state.segments, names, strict=True)],
    }
    path = base / "manifests" / manifest_name(state.version)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # damage in the manifest's place: a rebuild replaces it
        builds.discard(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with tmp.open("w") as fh:
        fh.write(json.dumps(manifest, indent=1))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _manifests(base: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The sound manifests under `base`, oldest first (damaged ones logged and skipped)."""
    folder = base / "manifests"
    found = []
    for path in folder.glob("v*.json") if folder.is_dir() else ():
        manifest = _read_manifest(path)
        if manifest is not None:
            found.append((path, manifest))
    return sorted(found, key=lambda pm: int(pm[1].get("position", -1)))


def _manifest_path(base: Path, manifest: dict[str, Any]) -> Path:
    version = CorpusVersion(str(manifest["store"]), int(manifest["counter"]), str(manifest["nonce"]))
    return base / "manifests" / manifest_name(version)


def _still_names(base: Path, manifest: dict[str, Any], entry: dict[str, Any]) -> bool:
    """True when the manifest file on disk still names this segment (and deletions): then a
    file it names that is gone was deleted or lost, since garbage collection removes only
    what no manifest names, and a merge swaps the manifest before anything it replaced goes."""
    now, _ = parse_manifest(_manifest_path(base, manifest))
    return now is not None and any(
        e.get("name") == entry.get("name") and e.get("deleted") == entry.get("deleted") for e in now["segments"]
    )


def _missing(base: Path, manifest: dict[str, Any], entry: dict[str, Any]) -> str:
    path = _manifest_path(base, manifest)
    folder = base / "segments" / str(entry["name"])
    if not folder.is_dir():
        what = f"segment folder {folder}"
    elif not (folder / SEGMENT_META).exists():
        what = f"{SEGMENT_META} of segment {folder}"
    else:
        what = f"deletion file {base / 'deletes' / str(entry.get('deleted'))}"
    return (
        f"{what} is missing, yet manifest {path} names it (deleted or lost: plm removes only files no "
        "manifest names); run `plm index rebuild`"
    )


def damage(base: Path) -> list[str]:
    """What is damaged in the saved versions of one stage folder, one line each with the
    repair: every manifest parsed and checked, and every segment (each file's size and
    checksum, once per process) and deletion file it names. Reads only: a server's `/status`
    and `plm index stats` call it beside live readers. Missing or stale builds are no damage."""
    problems: list[str] = []
    seen: set[str] = set()
    folder = base / "manifests"
    for path in sorted(folder.glob("v*.json")) if folder.is_dir() else ():
        manifest, problem = parse_manifest(path)
        if problem is not None:
            problems.append(f"index manifest {path} {problem}; run `plm index rebuild`")
        if manifest is None:
            continue
        for entry in manifest["segments"]:
            key = f"{entry['name']}/{entry.get('deleted')}"
            if key in seen:
                continue
            seen.add(key)
            problem = _segment_damage(base, manifest, entry)
            if problem is not None and _still_names(base, manifest, entry):
                problems.append(problem)
    return problems


def _segment_damage(base: Path, manifest: dict[str, Any], entry: dict[str, Any]) -> str | None:
    folder = base / "segments" / entry["name"]
    meta = builds.read_meta(folder, SEGMENT_META)
    if meta is None:
        if not folder.is_dir():
            return _missing(base, manifest, entry)
        return f"index segment {folder} is corrupt: {SEGMENT_META} is unreadable; run `plm index rebuild`"
    if not isinstance(meta.get("files"), dict):  # worded as a reader words it (one line each in stats)
        return f"index segment {folder} is corrupt: {SEGMENT_META} has no valid file list; run `plm index rebuild`"
    if meta.get("rows") != entry["rows"]:
        rows = f"{meta.get('rows')} rows, its manifest says {entry['rows']}"
        return f"index segment {folder} holds {rows}: run `plm index rebuild`"
    try:
        builds.verify(folder, meta.get("files"), SEGMENT_META)
        _read_deletes(base, entry.get("deleted"), entry["rows"], cached=False)
    except StaleIndexError:
        return _missing(base, manifest, entry)
    except StoreError as err:
        return str(err)
    return None


def _discard_damaged_manifests(base: Path, keep: Path) -> None:
    """A whole build replaces what was damaged: other manifests that cannot be read, or that
    name a damaged or missing file, go (a sound manifest is written by a rename, whole, so a
    damaged one is never a writer's in flight)."""
    folder = base / "manifests"
    for path in folder.glob("v*.json") if folder.is_dir() else ():
        if path == keep:
            continue
        manifest, problem = parse_manifest(path)
        if problem is not None or (
            manifest is not None and any(_segment_damage(base, manifest, e) for e in manifest["segments"])
        ):
            log.info("removed damaged index manifest %s", path)
            path.unlink(missing_ok=True)


def collect_garbage(base: Path, now: float | None = None) -> None:
    """Remove manifests beyond the newest KEEP_MANIFESTS (once older than GRACE_S), then
    segments and deletion files no remaining manifest names (once older than GRACE_S),
    and temp leftovers of dead writers. Disk is bounded by more than time: when the files
    that only older versions name (superseded) pass MAX_SUPERSEDED files or
    MAX_SUPERSEDED_BYTES, those versions go at once, manifests first (a reader that read one
    meanwhile finds it gone and opens a newer version), except segments a reader in this
    process holds open."""
    now = time.time() if now is None else now
    manifests = _manifests(base)
    old, recent = manifests[:-KEEP_MANIFESTS], manifests[-KEEP_MANIFESTS:]
    if old and _superseded_too_much(base, old, recent):
        held = _held_here(base)
        for path, manifest in old:
            if not any(s["name"] in held for s in manifest["segments"]):
                path.unlink(missing_ok=True)
        doomed = True
    else:
        doomed = False
        for path, _ in old:
            if now - builds.mtime(path) > GRACE_S:
                path.unlink(missing_ok=True)
    kept = [m for p, m in manifests if p.exists()]
    segments = {s["name"] for m in kept for s in m.get("segments", [])}
    deletes = {s["deleted"] for m in kept for s in m.get("segments", []) if s.get("deleted")}
    # Under pressure, what the removed versions named goes now; anything else waits its grace
    # period (a merge's new segment is named by no manifest until it is swapped in).
    superseded: set[str] = set()
    if doomed:
        superseded = {n for _, m in old for s in m["segments"] for n in (s["name"], s["deleted"]) if n}
        superseded -= _held_here(base)
    for sub, names in (("segments", segments), ("deletes", deletes), ("manifests", set())):
        folder = base / sub
        for entry in folder.iterdir() if folder.is_dir() else ():
            if entry.name in names or (sub == "manifests" and not entry.name.startswith(".")):
                continue
            if entry.name.startswith((".tmp-", ".old-")):
                if builds.live_leftover(entry, now):
                    continue  # still being written by a live process (maybe this one)
            elif entry.name not in superseded and now - builds.mtime(entry) <= GRACE_S:
                continue
            builds.discard(entry)


MAX_SUPERSEDED = 64  # files (segments, deletion files, manifests) only older versions name ...
MAX_SUPERSEDED_BYTES = 64 << 20  # ... or their bytes, before those versions go within GRACE_S


def _superseded_too_much(
    base: Path, old: list[tuple[Path, dict[str, Any]]], recent: list[tuple[Path, dict[str, Any]]]
) -> bool:
    """True when the files only the `old` manifests name pass a bound (count or bytes)."""
    live = {s["name"] for _, m in recent for s in m["segments"]}
    names = {s["name"] for _, m in old for s in m["segments"]} - live
    count = len(old) + len(names)
    if count > MAX_SUPERSEDED:
        return True
    total = 0
    for name in names:
        total += _folder_bytes(base / "segments" / name)
        if total > MAX_SUPERSEDED_BYTES:
            return True
    return False


def _folder_bytes(folder: Path) -> int:
    total = 0
    try:
        for path in folder.iterdir():
            total += path.stat().st_size
    except OSError:  # removed meanwhile
        pass
    return total


def _held_here(base: Path) -> set[str]:
    """Segments of this stage folder that a reader in this process holds open."""
    folder = str(base / "segments")
    with _OPEN_LOCK:
        return {Path(key).name for key in list(_OPEN.keys()) if str(Path(key).parent) == folder}


# ---------------------------------------------------------------------- policy
def tier(live_rows: int) -> int:
    if live_rows <= FLOOR_ROWS:
        return 0
    return 1 + int(math.log(live_rows / FLOOR_ROWS, MERGE_FACTOR))


def merge_plan(state: State) -> list[int] | None:
    """Indexes of adjacent segments to merge next, or None: the first run of MERGE_FACTOR
    segments of one tier, else a segment with half or more of its rows deleted."""
    tiers = [tier(s.n - len(d)) for s, d in zip(state.segments, state.deleted, strict=True)]
    start = 0
    for i in range(1, len(tiers) + 1):
        if i == len(tiers) or tiers[i] != tiers[start]:
            if i - start >= MERGE_FACTOR:
                return list(range(start, start + MERGE_FACTOR))
            start = i
    for i, (s, d) in enumerate(zip(state.segments, state.deleted, strict=True)):
        if s.n and 2 * len(d) >= s.n:
            return [i]
    return None


# ---------------------------------------------------------------------- the index
class SegmentedIndex(Index):
    """An `Index` kept as segments (see the module docstring). Write `build_data`,
    `save_data`, `open_data`, `merge_data`, and `segment_settings`; search the open
    `self.state` (its segments' `data`, `state.live`, `state.top(...)`)."""

    reads = "texts"  # what build_data needs of new rows: "texts" or "vectors"
    _state_base: Path | None = None  # the stage folder `state` was opened from (None: memory only)
    segment_kind: str | None = None  # the stage folder's name (default: the stage's `name`)
    state: State | None = None

    @abstractmethod
    def segment_settings(self) -> dict[str, Any]:
        """What a segment's data depends on besides its rows (a stage folder per settings)."""

    @abstractmethod
    def build_data(self, rows: Rows) -> Any:
        """This index's data for these rows (row i for rows.ids[i])."""

    @abstractmethod
    def save_data(self, data: Any, folder: Path) -> None:
        """Write `data` into `folder` (a fresh temp folder; names other than seqs.npy,
        order.npy and ids.npy)."""

    @abstractmethod
    def open_data(self, folder: Path, n_rows: int) -> Any:
        """Read what save_data wrote (memory-mapped where it can be)."""

    @abstractmethod
    def merge_data(self, parts: list[Any], keep: list[Any]) -> Any:
        """One segment's data from several: the rows where keep[i] is True of parts[i],
        in that order."""

    def on_state(self) -> None:
        """Called after `self.state` changed (reset what the stage derives from it)."""

    def manifest_extra(self, snapshot: Snapshot) -> dict[str, Any]:
        """What to record with a version besides its segments (e.g. the vectors' model)."""
        return {}

    def accept(self, extra: dict[str, Any], snapshot: Snapshot, what: str) -> None:
        """Raise StaleIndexError when a saved version recorded with `extra` must not serve
        this snapshot (it is then rebuilt from the store)."""

    # ------------------------------------------------------------- folders
    def stage_base(self, index_dir: Path) -> Path:
        name = str(getattr(self, "segment_kind", None) or getattr(self, "name", type(self).__name__))
        return builds.stage_folder(index_dir, name, {"segmented": FORMAT, **self.segment_settings()})

    def manifest_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        """Where the manifest of `version` is (or would be) saved."""
        return self.stage_base(index_dir) / "manifests" / manifest_name(version)

    def _what(self, base: Path) -> str:
        return f"index {getattr(self, 'label', type(self).__name__)!r} under {base}"

    # ------------------------------------------------------------- build paths
    def _rows(self, snapshot: Snapshot, position: int) -> Rows:
        seqs, ids, order, texts = snapshot.rows_since(position)
        if self.reads == "vectors":
            vseqs, matrix, _ = snapshot.vectors_since(position)
            if matrix is None and len(seqs):
                raise StoreError(
                    f"the index at {getattr(snapshot, 'location', '?')} has no chunk vectors: add an [embedder] "
                    "table to the config and run `plm ingest --force`"
                )
            if matrix is not None and list(vseqs) != list(seqs):
                raise StoreError(
                    f"the store at {getattr(snapshot, 'location', '?')} has chunks without vectors: run `plm ingest` "
                    "on the same sources to finish, or `plm index rebuild`"
                )
            return Rows(seqs, ids, order, vectors=matrix)
        return Rows(seqs, ids, order, texts=texts)

    def _segment(self, rows: Rows, base: Path | None) -> Segment:
        data = self.build_data(rows)
        name = (
            f"s{int(rows.seqs[0]) if len(rows) else 0}-{int(rows.seqs[-1]) if len(rows) else 0}-{uuid.uuid4().hex[:8]}"
        )
        if base is None:
            return Segment(name, rows.seqs, rows.order, rows.ids, data)
        _write_segment(base, name, rows, data, self.save_data)
        return _open_segment(base, name, self.open_data)

    def _commit(self, base: Path, state: State) -> None:
        names = [_write_deletes(base, s.name, d) for s, d in zip(state.segments, state.deleted, strict=True)]
        _write_manifest(base, state, self.segment_settings(), names)

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        """One segment of every chunk (a whole rebuild)."""
        base = None if index_dir is None else self.stage_base(index_dir)
        position = int(snapshot.position)
        rows = self._rows(snapshot, 0)
        segments = [self._segment(rows, base)] if len(rows) else []
        state = State(segments, [_none() for _ in segments], position, snapshot.version)
        state.extra = self.manifest_extra(snapshot)
        if base is not None:
            with _locked(base):
                self._commit(base, state)
                _discard_damaged_manifests(base, base / "manifests" / manifest_name(state.version))
            collect_garbage(base)
        self._set(state, base)

    def refresh(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Bring the saved index to the snapshot's version by adding what changed since
        the newest saved version (one segment, some deletions); a whole build when there
        is none to start from. Then start a background merge if the policy asks for one."""
        base = self.stage_base(index_dir)
        with _locked(base):
            start = self._newest(base, snapshot)
            if start is None:
                state = None
            else:
                state = self._advance(start, snapshot, base)
            if state is not None:
                self._commit(base, state)
        if state is None:
            self.build(snapshot, index_dir)
            return
        collect_garbage(base)
        self._set(state, base)
        start_merge(self, base)

    def _newest(self, base: Path, snapshot: Snapshot, data: bool = False) -> State | None:
        """The open state of the newest saved version this snapshot's feed can advance."""
        position = int(snapshot.position)
        for _, manifest in reversed(_manifests(base)):
            if (
                manifest.get("store") != snapshot.version.store_id
                or manifest.get("settings") != self.segment_settings()
            ):
                continue
            if int(manifest["position"]) > position:
                continue
            try:
                self.accept(dict(manifest.get("extra") or {}), snapshot, self._what(base))
                return self._open_manifest(base, manifest, data)
            except IndexDamagedError as err:
                _warn_once(base, f"{err} (an older version is used meanwhile)")
                continue
            except StaleIndexError:
                continue
        return None

    def _open_manifest(self, base: Path, manifest: dict[str, Any], data: bool = True) -> State:
        """The state a manifest names; with `data`, every segment's data read and checked
        now (a reader: damage found before it serves), else when first used."""
        segments, deleted = [], []
        for entry in manifest.get("segments", []):
            try:
                seg = _open_segment(base, str(entry["name"]), self.open_data)
                if data:
                    seg.data  # noqa: B018 - read and checked now
                if seg.n != int(entry["rows"]):
                    raise StoreError(
                        f"index segment {base / 'segments' / entry['name']} holds {seg.n} rows, its manifest says "
                        f"{entry['rows']}: run `plm index rebuild`"
                    )
                segments.append(seg)
                deleted.append(_read_deletes(base, entry.get("deleted"), seg.n))
            except StaleIndexError as err:
                if isinstance(err, IndexDamagedError) or not _still_names(base, manifest, entry):
                    raise
                raise IndexDamagedError(_missing(base, manifest, entry)) from None
        version = CorpusVersion(str(manifest["store"]), int(manifest["counter"]), str(manifest["nonce"]))
        state = State(segments, deleted, int(manifest["position"]), version)
        state.extra = dict(manifest.get("extra") or {})
        return state

    def _advance(self, start: State, snapshot: Snapshot, base: Path | None) -> State | None:
        """`start` moved to the snapshot's version: its removed rows deleted, one segment
        for the rows added since; None when the feed does not reach back to it."""
        import numpy as np

        listed = snapshot.removed_since(start.position)
        if listed is None:
            return None
        removed = np.asarray(listed, dtype=np.int64)
        segments, deleted = [], []
        for seg, dead in zip(start.segments, start.deleted, strict=True):
            gone = seg.rows_of(removed)
            dead = np.union1d(dead, gone).astype(np.int64) if len(gone) else dead
            if len(dead) == seg.n:
                continue  # every row deleted: the segment leaves the index
            segments.append(seg)
            deleted.append(dead)
        rows = self._rows(snapshot, start.position)
        if len(rows):
            segments.append(self._segment(rows, base))
            deleted.append(_none())
        state = State(segments, deleted, int(snapshot.position), snapshot.version)
        state.extra = self.manifest_extra(snapshot)
        return state

    def _set(self, state: State, base: Path | None = None) -> None:
        self.state, self._state_base = state, base
        self.on_state()

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        manifest = _read_manifest(self.stage_base(index_dir) / "manifests" / manifest_name(version))
        return (
            manifest is not None
            and manifest.get("version") == version.token
            and manifest.get("settings") == self.segment_settings()
        )

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Open the snapshot's version: its manifest when saved, else the newest saved one
        (or the one open now) advanced in memory; StaleIndexError when there is neither."""
        base = self.stage_base(index_dir)
        version = snapshot.version
        manifest = _read_manifest(base / "manifests" / manifest_name(version))
        if manifest is not None and manifest.get("version") == version.token:
            if manifest.get("settings") != self.segment_settings():
                raise StaleIndexError(f"{self._what(base)} was saved with other settings")
            self.accept(dict(manifest.get("extra") or {}), snapshot, self._what(base))
            self._set(self._open_manifest(base, manifest), base)
            self._check(snapshot, base)
            return
        start = self.state if self.state is not None and self._state_base == base else None
        if start is not None and start.version.store_id != version.store_id:
            start = None
        if start is None or start.position > int(snapshot.position):
            start = self._newest(base, snapshot, data=True)
        state = None if start is None else self._advance(start, snapshot, None)
        if start is None or state is None:
            raise StaleIndexError(f"{self._what(base)} has no build for the store's corpus version {version}")
        log.info("%s: version %s applied in memory from %s", self._what(base), version, start.version)
        self._set(state, base)
        self._check(snapshot, base)

    def _check(self, snapshot: Snapshot, base: Path) -> None:
        assert self.state is not None
        n = snapshot.n_chunks
        if self.state.n_live != n:
            raise StoreError(
                f"{self._what(base)} holds {self.state.n_live} chunks but the store's version "
                f"{snapshot.version} has {n}: run `plm index rebuild`"
            )

    # ------------------------------------------------------------- merging
    def merge_once(self, base: Path) -> bool:
        """Run one merge the policy asks for on the newest saved version; False when none."""
        import numpy as np

        with _locked(base):
            found = _manifests(base)
            if not found:
                return False
            manifest = found[-1][1]
            state = self._open_manifest(base, manifest, data=False)
        plan = merge_plan(state)
        if plan is None:
            return False
        inputs = [state.segments[i] for i in plan]
        keep = [~m if (m := state.dead(i)) is not None else np.ones(state.segments[i].n, bool) for i in plan]
        seqs = np.concatenate([s.seqs[k] for s, k in zip(inputs, keep, strict=True)])
        order = np.concatenate([s.order[k] for s, k in zip(inputs, keep, strict=True)])
        ids = [s.ids[int(r)] for s, k in zip(inputs, keep, strict=True) for r in np.flatnonzero(k)]
        rows = Rows(seqs, ids, order)
        data = self.merge_data([s.data for s in inputs], keep)
        name = f"s{int(seqs[0]) if len(seqs) else 0}-{int(seqs[-1]) if len(seqs) else 0}-m{uuid.uuid4().hex[:8]}"
        _write_segment(base, name, rows, data, self.save_data)
        merged = _open_segment(base, name, self.open_data)
        with _locked(base):
            newest = _manifests(base)[-1][1]
            now = self._open_manifest(base, newest, data=False)
            names = [s.name for s in now.segments]
            wanted = [s.name for s in inputs]
            at = next((i for i in range(len(names)) if names[i : i + len(wanted)] == wanted), None)
            if at is None:
                return False  # another merge or a rebuild got there first: ours is garbage
            gone = np.concatenate(
                [
                    s.seqs[d]
                    for s, d in zip(
                        now.segments[at : at + len(wanted)], now.deleted[at : at + len(wanted)], strict=True
                    )
                ]
            )
            segments = now.segments[:at] + ([merged] if merged.n else []) + now.segments[at + len(wanted) :]
            dead = [merged.rows_of(gone)] if merged.n else []
            deleted = now.deleted[:at] + dead + now.deleted[at + len(wanted) :]
            fresh = State(segments, deleted, now.position, now.version)
            fresh.extra = now.extra
            self._commit(base, fresh)
        collect_garbage(base)
        return True


def _none() -> Any:
    import numpy as np

    return np.zeros(0, dtype=np.int64)


_MERGING: dict[str, threading.Thread] = {}
_MERGING_LOCK = threading.Lock()


def start_merge(index: SegmentedIndex, base: Path) -> None:
    """Merge in the background until the policy is satisfied (one thread per stage folder
    in this process; a non-daemon thread, so a CLI process finishes its merge before it
    exits, after its own work is committed)."""
    key = str(base)

    def run() -> None:
        try:
            while index.merge_once(base):
                pass
        except Exception as err:  # noqa: BLE001 - a failed merge loses nothing: the manifest is unchanged
            log.warning("background merge in %s failed: %s", base, err)
        finally:
            with _MERGING_LOCK:
                _MERGING.pop(key, None)

    with _MERGING_LOCK:
        if key in _MERGING:
            return
        thread = threading.Thread(target=run, name=f"plm-merge-{base.name}")
        _MERGING[key] = thread
    thread.start()


def wait_for_merges(timeout: float | None = None) -> None:
    """Wait for this process's background merges (tests, benchmarks)."""
    with _MERGING_LOCK:
        threads = list(_MERGING.values())
    for thread in threads:
        thread.join(timeout)
