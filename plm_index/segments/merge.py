"""The merge policy (which adjacent segments to merge next) and the background thread
that runs a stage's merges after a sync."""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import Protocol

from plm_index.segments.state import State

log = logging.getLogger(__name__)

MERGE_FACTOR = 4  # segments of one size tier before they are merged into one
FLOOR_ROWS = 8192  # segments up to this many live rows are all in the lowest tier


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


class _Merger(Protocol):
    """What a background merge runs (a `SegmentedIndex`; named here by what it does, since
    the index module imports this one)."""

    def merge_once(self, base: Path) -> bool: ...


_MERGING: dict[str, threading.Thread] = {}
_MERGING_LOCK = threading.Lock()


def start_merge(index: _Merger, base: Path) -> None:
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
