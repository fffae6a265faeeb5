"""Garbage collection of a stage folder: old manifests, then the segments and deletion
files no manifest names, after a grace period or at once when superseded files pass a bound."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from plm_index import builds
from plm_index.segments.files import _OPEN, _OPEN_LOCK
from plm_index.segments.manifest import _manifests

KEEP_MANIFESTS = 3  # older versions' manifests kept for readers still opening them
GRACE_S = 120.0  # unreferenced files younger than this are a writer's, in flight


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
        # Every old manifest goes (a reader holding one of those versions holds its segments
        # open, and those stay below). Keeping the manifests that named a held segment kept
        # them all in a server, whose readers hold the big segments every version names:
        # 561 manifests after 250 writes, each listed and checked by every write.
        for path, _ in old:
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
    """The bytes of a segment's files. A segment is written once, so the sum is kept while
    its folder's modification time holds (one stat, not one per file, at every write of a
    server: 300 stats a write under a busy writer's superseded versions)."""
    try:
        stamp = os.stat(folder).st_mtime_ns
    except OSError:  # removed meanwhile
        return 0
    known = _SIZES.get(str(folder))
    if known is not None and known[0] == stamp:
        return known[1]
    total = 0
    try:
        for path in folder.iterdir():
            total += path.stat().st_size
    except OSError:  # removed meanwhile
        return total
    if len(_SIZES) >= 4096:
        _SIZES.clear()
    _SIZES[str(folder)] = (stamp, total)
    return total


_SIZES: dict[str, tuple[int, int]] = {}  # segment folder -> (its mtime_ns, its files' bytes)


def _held_here(base: Path) -> set[str]:
    """Segments of this stage folder that a reader in this process holds open."""
    folder = str(base / "segments")
    with _OPEN_LOCK:
        return {Path(key).name for key in list(_OPEN.keys()) if str(Path(key).parent) == folder}
