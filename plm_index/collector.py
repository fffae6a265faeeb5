"""`few_full_collections`: no full pass of Python's cycle collector while a sync runs."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_collector = {"syncs": 0, "oldest": 0}  # syncs inside few_full_collections now (threads), the threshold they raised
_collector_lock = threading.Lock()


@contextmanager
def few_full_collections() -> Iterator[None]:
    """No full pass of Python's cycle collector while this runs; young objects are still
    collected. A sync holds every document it read until it is stored, and the collector
    walks every live object each time the heap has grown by a quarter: 14 walks, 5 s of a
    million-document ingest. Cycles that live long enough to reach the oldest generation
    wait until the end (the setting is the process's: it is put back when the last sync
    inside it ends)."""
    with _collector_lock:
        _collector["syncs"] += 1
        if _collector["syncs"] == 1:
            young, middle, _collector["oldest"] = gc.get_threshold()
            gc.set_threshold(young, middle, max(_collector["oldest"], 1_000_000))
    try:
        yield
    finally:
        with _collector_lock:
            _collector["syncs"] -= 1
            if _collector["syncs"] == 0:
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, _collector["oldest"])
