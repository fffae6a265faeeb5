"""Damage in a stage folder's saved versions: what a manifest names that is missing or
corrupt, worded with its repair (`damage`), and the damaged manifests a whole build drops."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from plm_core.errors import StaleIndexError, StoreError
from plm_index import builds
from plm_index.segments.deletions import _read_deletes
from plm_index.segments.files import SEGMENT_META, meta_problem
from plm_index.segments.manifest import _manifest_path, parse_manifest

log = logging.getLogger(__name__)


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
    if meta is None and not folder.is_dir():
        return _missing(base, manifest, entry)
    problem = meta_problem(folder, meta)  # worded as a reader words it (one line each in stats)
    if problem is not None or meta is None:
        return problem
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
