"""Manifests, one per corpus version (its segments and their deletion files): named,
parsed and checked, written atomically and listed; and the stage folder's writer lock."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plm_core.records import CorpusVersion
from plm_index import builds
from plm_index.segments.files import FORMAT
from plm_index.segments.state import State

log = logging.getLogger(__name__)


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


_PARSED: dict[str, tuple[tuple[int, int, int], tuple[dict[str, Any] | None, str | None]]] = {}
_PARSED_LOCK = threading.Lock()


def parse_manifest(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) for a sound manifest, (None, None) when there is no file, and
    (None, what is wrong) for a damaged one: every field is checked, since a manifest decides
    which files a reader opens. A file is parsed once while its inode, size and mtime stay
    (a manifest is replaced, never edited): a write lists every manifest the grace period
    keeps, 180 of them 43 ms a write at 30 writes a minute, parsed anew each time before."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"cannot be read ({err.strerror or err})"
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    with _PARSED_LOCK:
        hit = _PARSED.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1]
    result = _parse_manifest(path)
    with _PARSED_LOCK:
        if len(_PARSED) > 4096:  # folders come and go in a long-lived server
            _PARSED.clear()
        _PARSED[str(path)] = (key, result)
    return result


def _parse_manifest(path: Path) -> tuple[dict[str, Any] | None, str | None]:
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
