"""What `GET /status` (and `plm status` against a server) reports: the store's counts and
sizes as the serving generation sees them, the index folder's size on disk, uptime, the
last sync, damage in the saved indexes with the command that repairs it, and the watcher
syncing this index (the server's own, or a `plm watch` process's watcher file).
`Service.status` gathers the generation and the store's stats; this module lays them out.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from plm_index.job import Job
from plm_serve.generation import Generation
from plm_serve.watcher_file import read_watcher_file


def folder_bytes(folder: str | Path) -> int:
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


def status_report(
    writer: Job,
    generation: Generation | None,
    stats: dict[str, Any],
    *,
    readers: int,
    started: float,
    last_sync: dict[str, Any] | None,
    load_error: str | None,
    watcher: Any,
) -> dict[str, Any]:
    """The /status answer: `stats` is `store.stats()` as `generation` (None: none loaded)
    or, with none loaded, the writer sees them; `watcher` is the server's own (--watch) or None."""
    return {
        "config": writer.config.job.name,
        "config_path": str(writer.config.path),
        "index_dir": str(writer.index_dir),
        "ready": generation is not None and not generation.empty,
        "serving_version": str(generation.version) if generation else None,
        "documents": stats.get("documents"),
        "chunks": stats.get("chunks"),
        "vectors": stats.get("vectors"),
        "model": stats.get("model"),
        "corpus_version": stats.get("corpus_version"),
        "store_bytes": stats.get("bytes"),
        "index_dir_bytes": folder_bytes(writer.index_dir),
        "readers": readers,
        "uptime_s": round(time.time() - started, 1),
        "last_sync": last_sync,
        "load_error": load_error,
        # Damage in the saved indexes (read only, beside the readers): queries are answered
        # from the store meanwhile; `repair` is the command that fixes it.
        "problems": (problems := writer.searcher.damage()),
        "repair": f"plm index rebuild --config {writer.config.path}" if problems else None,
        # This server's own (--watch), else a `plm watch` process syncing the same index.
        "watcher": watcher.state() if watcher is not None else read_watcher_file(writer.index_dir),
    }
