"""Segmented indexes: a derived index as immutable segments plus deletions, kept current
from the store's change feed, so one saved file costs one small segment, not a rebuild.

A stage subclasses `SegmentedIndex` and writes four methods: `build_data` (a segment's
own data from rows: chunk texts or vectors), `save_data`, `open_data` and `merge_data`.
This package does the rest:

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
  reused (immutable), so a reload costs the new segments and deletions. A segment's files
  are checked (size, checksum) and read into memory where it is opened, never mapped, and
  stat'd again at every query: one changed on disk since is refused in one line.
  A reader whose version has no manifest yet applies the change in memory.
- **Merges** (`merge_plan`): adjacent segments of the same size tier are merged, at most
  MERGE_FACTOR per tier, and a segment with half its rows deleted is rewritten; in a
  background thread of the process that refreshed (never on a query's path, never holding
  up a sync). A merge writes its segment, then swaps it into the newest manifest under
  the stage's lock if its inputs are still there; killed at any point, the index stays
  the one the manifest names and the leftover folder is removed later.

One module per job: `state` (rows, open segments, a version in memory and its top-n),
`files` (a segment folder written whole and opened, checked), `deletions` (deletion
files), `manifest` (manifests and the writer lock), `integrity` (damage in saved
versions), `gc` (removing what no manifest names), `merge` (the policy and the background
thread) and `index` (`SegmentedIndex`). The names below are re-exported for their users;
to patch a setting or a function (tests, benchmarks), patch it in the module that reads
it (`merge.MERGE_FACTOR`, `index.start_merge`), not here.
"""

from __future__ import annotations

from plm_index.segments.gc import GRACE_S, KEEP_MANIFESTS, MAX_SUPERSEDED, collect_garbage
from plm_index.segments.index import SegmentedIndex
from plm_index.segments.integrity import damage
from plm_index.segments.manifest import manifest_name
from plm_index.segments.merge import FLOOR_ROWS, MERGE_FACTOR, merge_plan, start_merge, tier, wait_for_merges
from plm_index.segments.state import Picked, Rows, State

__all__ = [
    "FLOOR_ROWS",
    "GRACE_S",
    "KEEP_MANIFESTS",
    "MAX_SUPERSEDED",
    "MERGE_FACTOR",
    "Picked",
    "Rows",
    "SegmentedIndex",
    "State",
    "collect_garbage",
    "damage",
    "manifest_name",
    "merge_plan",
    "start_merge",
    "tier",
    "wait_for_merges",
]
