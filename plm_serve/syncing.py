"""Applying known file changes to an index: what `plm watch` and `plm serve --watch` share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from plm_index.job import Job
from plm_index.sync import IngestReport, scope


def sync_paths(job: Job, changed: Sequence[Path], removed: Sequence[Path]) -> IngestReport:
    """Process the changed files (a record a file no longer yields is deleted) and delete the
    documents stored from removed files or from files under removed folders; one index
    refresh. Files that vanished before being read count as removed."""
    present = [p for p in changed if p.is_file()]
    gone = [*removed, *(p for p in changed if not p.exists())]
    deleted: list[str] = []
    if gone:
        covered = scope([str(p) for p in gone])
        deleted = [doc_id for doc_id, path in job.open().store.doc_paths().items() if path and covered(path)]
    if not present and not deleted:
        return IngestReport()  # e.g. a file that never loaded, now deleted: nothing to do
    return job.sync(changed=[str(p) for p in present], deleted=deleted, prune=True)
