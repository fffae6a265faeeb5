"""The watcher file: what a `plm watch` process is doing, left in the index folder for a
server over the same index to report (`GET /status`, `plm status`)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

WATCHER_FILE = "watcher.json"  # in the index folder while a `plm watch` process syncs it


def write_watcher_file(index_dir: Path, state: dict[str, Any]) -> None:
    """What `plm watch` is doing, for a server over the same index (`plm status`): written
    at start and after every batch, removed at exit; replaced whole, never half-written."""
    index_dir.mkdir(parents=True, exist_ok=True)
    record = {**state, "pid": os.getpid(), "host": socket.gethostname(), "updated": time.time()}
    tmp = index_dir / f".{WATCHER_FILE}.{os.getpid()}.{threading.get_ident()}"  # the catch-up's thread writes too
    tmp.write_text(json.dumps(record, default=str))
    os.replace(tmp, index_dir / WATCHER_FILE)


def read_watcher_file(index_dir: Path) -> dict[str, Any] | None:
    """The state a live `plm watch` process on this host left, else None (none, or it died)."""
    try:
        record = json.loads((index_dir / WATCHER_FILE).read_text())
        if record.get("host") == socket.gethostname():
            os.kill(int(record["pid"]), 0)  # raises when that process is gone
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return {"process": "plm watch", **record} if isinstance(record, dict) else None
