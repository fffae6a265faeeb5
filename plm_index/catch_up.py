"""What changed in a folder since the index last read it, found without reading a file and
holding the writer only to read the store: a watcher's catch-up at a start.

`folder_changes(job, root, listed, locked)` compares the listed files' stat signatures
(size, mtime, ctime, inode) with what the last sync remembered of them (files.sqlite,
plm_index/file_stats.py) and with the store's fingerprints, as a sync's own skip does, and
returns the files to read again and the paths whose documents must go. A watcher then
applies those as one of its batches (plm_serve/syncing.py): at 100,000 unchanged files
that is 0.9-1.1 s, of which the write lock is held for the store's fingerprints (0.3 s),
where a whole `ingest(folder, prune=True)` held the lock for 1.4-2 s and a save made at
the start waited behind it (BENCHMARKS.md section 39).

It answers None, and the caller runs the whole sync, whenever it cannot vouch for the
answer: the folder never ingested (its root unknown), another model or index fingerprint,
two files claiming one document, or more changes than one batch should carry. Files
changed after the stat are not its concern: the watch is in place before the listing, so
their events follow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from plm_index.file_stats import remembered, signature
from plm_index.sync import scope

MAX_CHANGES = 500  # more than this: the whole sync, with its batches and progress


def folder_changes(
    job: Any, root: str, listed: Sequence[str], locked: Callable[[Callable[[Any], Any]], Any]
) -> tuple[list[str], list[str]] | None:
    """(files to sync, paths whose documents to delete) under `root`, a folder the job's
    loader listed as `listed`; None when only a whole sync can tell. `locked(work)` runs
    `work(job)` while no sync runs (the store is read there, and only there)."""
    sigs = {p: signature(p) for p in listed}  # before the records: a later change is an event's
    index_fp = job.index_fingerprint()
    records = remembered(job.index_dir, index_fp)
    if records is None:
        return None

    def read_store(j: Any) -> tuple[Any, list[str], dict[str, str]]:
        store = j.open(create=False).store
        return store.get_meta("model"), j.roots(), store.doc_fingerprints()

    model, roots, stored = locked(read_store)
    expected = job.embedder.expected_model_name if job.embedder is not None else None
    if root not in roots or (expected is not None and model not in (None, expected)):
        return None
    changed: list[str] = []
    vouched: dict[str, str] = {}  # doc id -> its file, for the files found current
    for path, sig in sigs.items():
        row = records.get(path)
        if sig is None:
            continue  # gone since the listing: its event follows
        if row is not None and row[:4] == sig and stored.get(row[4]) == row[5]:
            if vouched.setdefault(row[4], path) != path:
                return None  # two files, one document: the whole sync says which keeps it
        else:
            changed.append(path)
    if len(changed) > MAX_CHANGES:  # (a branch switch touching every file: no lookup of each)
        return None
    under = scope([root])
    listed_set = set(sigs)
    removed = [p for p in records if p not in listed_set and under(p)]
    # Documents no record vouches for: another folder's, or a file of this one gone (one
    # read too recently to be remembered, then deleted while nothing watched).
    others = [i for i in stored if i not in vouched]
    if others:
        to_read = set(changed)
        for p in locked(lambda j: j.store.paths_of(others)).values():
            if not p or not under(p):
                continue
            if p not in listed_set:
                removed.append(p)
            elif p not in to_read:
                return None  # a second document for a current file (a sync killed midway): the whole sync supersedes it
    if any(os.path.lexists(p) for p in removed if p not in listed_set):
        return None  # a file still there but not read (a pattern changed): the whole sync notes it
    removed = sorted(set(removed))
    if len(changed) + len(removed) > MAX_CHANGES:
        return None
    return sorted(changed), removed
