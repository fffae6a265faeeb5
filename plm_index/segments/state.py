"""What one version of a segmented index is in memory: the rows a segment is built from,
an open segment, and the state (segments, deletions, feed position) with its top-n over
the live rows in the store's index order."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from plm_core.records import CorpusVersion
from plm_index.columns import take_ids
from plm_index.ranking import ranked_rows, top_n, top_n_sparse


class Rows:
    """Chunks a segment is built from, sorted by seq: their seqs, chunk ids, order keys,
    and the texts or the vectors (whichever the index reads)."""

    def __init__(
        self, seqs: Any, ids: Sequence[str], order: Any, texts: Sequence[str] | None = None, vectors: Any = None
    ) -> None:
        import numpy as np

        self.seqs = np.asarray(seqs, dtype=np.int64)
        self.order = np.asarray(order, dtype=np.int64)
        self.ids, self.texts, self.vectors = list(ids), texts, vectors
        if not (len(self.seqs) == len(self.order) == len(self.ids)):
            raise ValueError("rows: seqs, ids and order keys differ in length")
        if len(self.seqs) > 1 and not bool(np.all(self.seqs[1:] > self.seqs[:-1])):
            raise ValueError("rows must be sorted by seq, each seq once")

    def __len__(self) -> int:
        return len(self.ids)


class Segment:
    """One immutable segment, open: row -> seq (ascending), order key, chunk id, and the
    index's own `data` for its rows (read, and checked, when first used: a sync that only
    marks rows deleted in a segment never reads its data)."""

    def __init__(self, name: str, seqs: Any, order: Any, ids: Sequence[str], data: Any, loader: Any = None) -> None:
        self.name, self.seqs, self.order, self.ids = name, seqs, order, ids
        self._data, self._loader = data, loader
        self._lock = threading.Lock()
        self.files: Any = None  # the saved files' sizes and checksums (None: in memory only)
        self.folder: Path | None = None  # where they are
        self.stamp: Any = None  # those checked so far as they were then (`builds.verify`)
        self.watch: Any = None  # (stamp, its files' paths, their size, mtime, inode): `check_segment`

    @property
    def data(self) -> Any:
        if self._loader is not None:
            with self._lock:
                if self._loader is not None:
                    self._data, self._loader = self._loader(), None
        return self._data

    @property
    def data_loaded(self) -> bool:
        return self._loader is None

    @property
    def n(self) -> int:
        return len(self.seqs)

    def rows_of(self, seqs: Any) -> Any:
        """Local rows of those of `seqs` that are in this segment."""
        import numpy as np

        seqs = np.asarray(seqs, dtype=np.int64)
        if not self.n or not len(seqs):
            return np.zeros(0, dtype=np.int64)
        at = np.searchsorted(self.seqs, seqs)
        inside = at < self.n
        at, seqs = at[inside], seqs[inside]
        return at[self.seqs[at] == seqs].astype(np.int64)


class State:
    """One version of a segmented index: its segments, each one's deleted local rows
    (sorted int64), the feed position it describes, and what queries derive from them."""

    def __init__(self, segments: list[Segment], deleted: list[Any], position: int, version: CorpusVersion) -> None:
        import numpy as np

        self.segments, self.deleted, self.position, self.version = segments, deleted, position, version
        self.offsets = np.cumsum([0] + [s.n for s in segments]).astype(np.int64)
        self.total = int(self.offsets[-1])
        self.n_live = self.total - sum(len(d) for d in deleted)
        self.extra: dict[str, Any] = {}  # what the stage records with each version (`manifest_extra`)
        self._cache: dict[str, Any] = {}

    def cached(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def dead(self, i: int) -> Any:
        """Segment i's deleted rows as a boolean mask, or None when none is deleted."""
        import numpy as np

        if not len(self.deleted[i]):
            return None

        def make() -> Any:
            mask = np.zeros(self.segments[i].n, dtype=bool)
            mask[self.deleted[i]] = True
            return mask

        return self.cached(f"dead{i}", make)

    @property
    def live(self) -> Any:
        """Boolean mask over all rows (segments concatenated): False for deleted rows."""
        import numpy as np

        def make() -> Any:
            mask = np.ones(self.total, dtype=bool)
            for off, dead in zip(self.offsets, self.deleted, strict=False):
                mask[off + dead] = False
            return mask

        return self.cached("live", make)

    @property
    def order(self) -> Any:
        import numpy as np

        return self.cached(
            "order",
            lambda: np.concatenate([s.order for s in self.segments]) if self.segments else np.zeros(0, np.int64),
        )

    def by_segment(self, rows: Any) -> Iterator[tuple[int, Any, Any]]:
        """(segment index, where in `rows`, those rows within the segment) for each segment
        holding some of these global rows (any order; ascending rows are cut, not masked)."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return
        if bool(np.all(rows[1:] >= rows[:-1])):
            cuts = np.searchsorted(rows, self.offsets).tolist()
            for i in range(len(self.segments)):
                if cuts[i + 1] > cuts[i]:
                    yield i, slice(cuts[i], cuts[i + 1]), rows[cuts[i] : cuts[i + 1]] - self.offsets[i]
            return
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        for i in np.unique(which).tolist():
            at = np.flatnonzero(which == i)
            yield i, at, rows[at] - self.offsets[i]

    def order_of(self, rows: Any) -> Any:
        """The order keys of these rows (any order), read from their segments' keys."""
        import numpy as np

        if "order" in self._cache:
            return self.order[rows]
        keys = np.empty(len(rows), dtype=np.int64)
        for i, at, local in self.by_segment(rows):
            keys[at] = self.segments[i].order[local]
        return keys

    @property
    def ids(self) -> RowIds:
        return self.cached("ids", lambda: RowIds(self))

    def rows_in_index_order(self) -> Any:
        """Global row of each live chunk, in the store's index order; None when that is
        every row in row order (one segment built whole, nothing deleted)."""
        import numpy as np

        def make() -> Any:
            rows = np.flatnonzero(self.live)
            rows = rows[np.argsort(self.order[rows], kind="stable")]
            return None if len(rows) == self.total and bool(np.all(rows == np.arange(self.total))) else rows

        return self.cached("index_order", make)

    def allowed_rows(self, allowed: Any = None) -> Any:
        """The live rows that an index-order `allowed` mask (or None: all) lets through, as a
        boolean mask over this state's rows."""
        import numpy as np

        if allowed is None:
            return self.live
        allowed = np.asarray(allowed, dtype=bool)
        rows = self.rows_in_index_order()
        if rows is None:
            return allowed & self.live
        mask = np.zeros(self.total, dtype=bool)
        mask[rows[allowed]] = True
        return mask

    def top(self, scores: Any, n: int, source: str, allowed: Any = None, drop_zero: bool = False) -> list[Any]:
        """`top_n` over the live rows in the store's index order (`allowed` is a mask in that
        order): the same hits, in the same order, equal scores included, as an index built
        whole from the same corpus gives."""
        rows = self.rows_in_index_order()
        if rows is None:
            return top_n(scores, n, self.ids, source, allowed, drop_zero)
        return top_n(scores[rows], n, Picked(self.ids, rows), source, allowed, drop_zero)

    def top_of(
        self, rows: Any, values: Any, n: int, source: str, allowed: Any = None, drop_zero: bool = False
    ) -> list[Any] | None:
        """`top` of scores that are zero except at `rows` (live, distinct), found among those
        rows alone (`top_n_sparse`); None where only `top` over every row can tell."""
        if allowed is None:
            # Equal scores ordered by the rows' own order keys: a version's first query needs
            # no index order of every row (25 ms at a million, at every write).
            return top_n_sparse(rows, values, self.n_live, n, self.ids, source, None, drop_zero, self.order_of)
        index = self.rows_in_index_order()
        if index is None:
            return top_n_sparse(rows, values, self.n_live, n, self.ids, source, allowed, drop_zero)
        positions = self.cached("index_positions", lambda: _inverse(index, self.total))[rows]
        return top_n_sparse(positions, values, self.n_live, n, Picked(self.ids, index), source, allowed, drop_zero)

    def ranked(self, rows: Any, scores: list[float], tied: bool, source: str) -> list[Any] | None:
        """The hits of rows already in `top`'s order, with their scores; None where `top` over
        every row must tell (equal scores in a small version, or more rows tied at the last:
        `tied`)."""
        return ranked_rows(self.ids, rows, scores, self.n_live, tied, source)


def _inverse(rows: Any, total: int) -> Any:
    """Each row's place in `rows` (-1 where absent)."""
    import numpy as np

    where = np.full(total, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows), dtype=np.int64)
    return where


class Picked(Sequence[str]):
    """ids[rows[i]] for each i, looked up when needed."""

    def __init__(self, ids: Sequence[str], rows: Any) -> None:
        self._ids, self._rows = ids, rows

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._ids[int(r)] for r in self._rows[i]]
        return self._ids[int(self._rows[i])]

    def take(self, positions: Any) -> list[str]:
        return take_ids(self._ids, self._rows[positions])


class RowIds(Sequence[str]):
    """Chunk id of each row of a state (segments concatenated), looked up when needed."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._starts = state.offsets[:-1].tolist()  # each segment's first row
        self._ids = [s.ids for s in state.segments]

    def __len__(self) -> int:
        return self._state.total

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        row = int(row) + (self._state.total if row < 0 else 0)
        if not 0 <= row < self._state.total:
            raise IndexError(f"row {row} of {self._state.total}")
        seg = bisect.bisect_right(self._starts, row) - 1
        return self._ids[seg][row - self._starts[seg]]

    def take(self, rows: Any) -> list[str]:
        """The ids of `rows` (an integer array of valid rows), in that order."""
        import numpy as np

        rows = np.asarray(rows, dtype=np.int64)
        if len(self._ids) == 1:
            return take_ids(self._ids[0], rows)
        out = np.empty(len(rows), dtype=object)
        for s, at, local in self._state.by_segment(rows):
            out[at] = take_ids(self._ids[s], local)
        return out.tolist()  # type: ignore[no-any-return]
