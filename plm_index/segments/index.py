"""`SegmentedIndex`: the `Index` a stage subclasses to be kept as segments (build, refresh,
load, merge_once), on top of the files, deletions and manifests of this package."""

from __future__ import annotations

import logging
import uuid
from abc import abstractmethod
from pathlib import Path
from typing import Any

from plm_core.errors import IndexDamagedError, StaleIndexError, StoreError
from plm_core.interfaces import Index, Snapshot
from plm_core.records import CorpusVersion
from plm_index import builds
from plm_index.segments.deletions import _none, _read_deletes, _write_deletes
from plm_index.segments.files import FORMAT, _open_segment, _write_segment, check_segment
from plm_index.segments.gc import collect_garbage
from plm_index.segments.integrity import _discard_damaged_manifests, _missing, _still_names
from plm_index.segments.manifest import _locked, _manifests, _read_manifest, _warn_once, _write_manifest, manifest_name
from plm_index.segments.merge import merge_plan, start_merge
from plm_index.segments.state import Rows, Segment, State

log = logging.getLogger(__name__)


class SegmentedIndex(Index):
    """An `Index` kept as segments (see the docstring of `plm_index.segments`). Write
    `build_data`, `save_data`, `open_data`, `merge_data`, and `segment_settings`; search the
    open `self.state` (its segments' `data`, `state.live`, `state.top(...)`)."""

    reads = "texts"  # what build_data needs of new rows: "texts" or "vectors"
    _state_base: Path | None = None  # the stage folder `state` was opened from (None: memory only)
    segment_kind: str | None = None  # the stage folder's name (default: the stage's `name`)
    state: State | None = None

    @abstractmethod
    def segment_settings(self) -> dict[str, Any]:
        """What a segment's data depends on besides its rows (a stage folder per settings)."""

    @abstractmethod
    def build_data(self, rows: Rows) -> Any:
        """This index's data for these rows (row i for rows.ids[i])."""

    @abstractmethod
    def save_data(self, data: Any, folder: Path) -> None:
        """Write `data` into `folder` (a fresh temp folder; names other than seqs.npy,
        order.npy and ids.npy)."""

    @abstractmethod
    def open_data(self, folder: Path, n_rows: int) -> Any:
        """Read what save_data wrote (memory-mapped where it can be)."""

    @abstractmethod
    def merge_data(self, parts: list[Any], keep: list[Any]) -> Any:
        """One segment's data from several: the rows where keep[i] is True of parts[i],
        in that order."""

    def on_state(self) -> None:
        """Called after `self.state` changed (reset what the stage derives from it)."""

    def manifest_extra(self, snapshot: Snapshot) -> dict[str, Any]:
        """What to record with a version besides its segments (e.g. the vectors' model)."""
        return {}

    def accept(self, extra: dict[str, Any], snapshot: Snapshot, what: str) -> None:
        """Raise StaleIndexError when a saved version recorded with `extra` must not serve
        this snapshot (it is then rebuilt from the store)."""

    # ------------------------------------------------------------- folders
    def stage_base(self, index_dir: Path) -> Path:
        name = str(getattr(self, "segment_kind", None) or getattr(self, "name", type(self).__name__))
        return builds.stage_folder(index_dir, name, {"segmented": FORMAT, **self.segment_settings()})

    def manifest_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        """Where the manifest of `version` is (or would be) saved."""
        return self.stage_base(index_dir) / "manifests" / manifest_name(version)

    def _what(self, base: Path) -> str:
        return f"index {getattr(self, 'label', type(self).__name__)!r} under {base}"

    # ------------------------------------------------------------- build paths
    def _rows(self, snapshot: Snapshot, position: int) -> Rows:
        seqs, ids, order, texts = snapshot.rows_since(position)
        if self.reads == "vectors":
            vseqs, matrix, _ = snapshot.vectors_since(position)
            if matrix is None and len(seqs):
                raise StoreError(
                    f"the index at {getattr(snapshot, 'location', '?')} has no chunk vectors: add an [embedder] "
                    "table to the config and run `plm ingest --force`"
                )
            if matrix is not None and list(vseqs) != list(seqs):
                raise StoreError(
                    f"the store at {getattr(snapshot, 'location', '?')} has chunks without vectors: run `plm ingest` "
                    "on the same sources to finish, or `plm index rebuild`"
                )
            return Rows(seqs, ids, order, vectors=matrix)
        return Rows(seqs, ids, order, texts=texts)

    def _segment(self, rows: Rows, base: Path | None) -> Segment:
        data = self.build_data(rows)
        name = (
            f"s{int(rows.seqs[0]) if len(rows) else 0}-{int(rows.seqs[-1]) if len(rows) else 0}-{uuid.uuid4().hex[:8]}"
        )
        if base is None:
            return Segment(name, rows.seqs, rows.order, rows.ids, data)
        _write_segment(base, name, rows, data, self.save_data)
        return _open_segment(base, name, self.open_data)

    def _commit(self, base: Path, state: State) -> None:
        names = [_write_deletes(base, s.name, d) for s, d in zip(state.segments, state.deleted, strict=True)]
        _write_manifest(base, state, self.segment_settings(), names)

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        """One segment of every chunk (a whole rebuild)."""
        base = None if index_dir is None else self.stage_base(index_dir)
        position = int(snapshot.position)
        rows = self._rows(snapshot, 0)
        segments = [self._segment(rows, base)] if len(rows) else []
        state = State(segments, [_none() for _ in segments], position, snapshot.version)
        state.extra = self.manifest_extra(snapshot)
        if base is not None:
            with _locked(base):
                self._commit(base, state)
                _discard_damaged_manifests(base, base / "manifests" / manifest_name(state.version))
            collect_garbage(base)
        self._set(state, base)

    def refresh(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Bring the saved index to the snapshot's version by adding what changed since
        the newest saved version (one segment, some deletions); a whole build when there
        is none to start from. Then start a background merge if the policy asks for one."""
        base = self.stage_base(index_dir)
        with _locked(base):
            start = self._newest(base, snapshot)
            if start is None:
                state = None
            else:
                state = self._advance(start, snapshot, base)
            if state is not None:
                self._commit(base, state)
        if state is None:
            self.build(snapshot, index_dir)
            return
        collect_garbage(base)
        self._set(state, base)
        if merge_plan(state) is not None:  # a thread's start cost a write 10 ms, merging or not
            start_merge(self, base)

    def _newest(self, base: Path, snapshot: Snapshot, data: bool = False) -> State | None:
        """The open state of the newest saved version this snapshot's feed can advance."""
        position = int(snapshot.position)
        for _, manifest in reversed(_manifests(base)):
            if (
                manifest.get("store") != snapshot.version.store_id
                or manifest.get("settings") != self.segment_settings()
            ):
                continue
            if int(manifest["position"]) > position:
                continue
            try:
                self.accept(dict(manifest.get("extra") or {}), snapshot, self._what(base))
                return self._open_manifest(base, manifest, data)
            except IndexDamagedError as err:
                _warn_once(base, f"{err} (an older version is used meanwhile)")
                continue
            except StaleIndexError:
                continue
        return None

    def _open_manifest(self, base: Path, manifest: dict[str, Any], data: bool = True) -> State:
        """The state a manifest names; with `data`, every segment's data read and checked
        now (a reader: damage found before it serves), else when first used."""
        segments, deleted = [], []
        for entry in manifest.get("segments", []):
            try:
                seg = _open_segment(base, str(entry["name"]), self.open_data)
                if data:
                    seg.data  # noqa: B018 - read and checked now
                if seg.n != int(entry["rows"]):
                    raise StoreError(
                        f"index segment {base / 'segments' / entry['name']} holds {seg.n} rows, its manifest says "
                        f"{entry['rows']}: run `plm index rebuild`"
                    )
                segments.append(seg)
                deleted.append(_read_deletes(base, entry.get("deleted"), seg.n))
            except StaleIndexError as err:
                if isinstance(err, IndexDamagedError) or not _still_names(base, manifest, entry):
                    raise
                raise IndexDamagedError(_missing(base, manifest, entry)) from None
        version = CorpusVersion(str(manifest["store"]), int(manifest["counter"]), str(manifest["nonce"]))
        state = State(segments, deleted, int(manifest["position"]), version)
        state.extra = dict(manifest.get("extra") or {})
        return state

    def _advance(self, start: State, snapshot: Snapshot, base: Path | None) -> State | None:
        """`start` moved to the snapshot's version: its removed rows deleted, one segment
        for the rows added since; None when the feed does not reach back to it."""
        import numpy as np

        listed = snapshot.removed_since(start.position)
        if listed is None:
            return None
        removed = np.asarray(listed, dtype=np.int64)
        segments, deleted = [], []
        for seg, dead in zip(start.segments, start.deleted, strict=True):
            gone = seg.rows_of(removed)
            dead = np.union1d(dead, gone).astype(np.int64) if len(gone) else dead
            if len(dead) == seg.n:
                continue  # every row deleted: the segment leaves the index
            segments.append(seg)
            deleted.append(dead)
        rows = self._rows(snapshot, start.position)
        if len(rows):
            segments.append(self._segment(rows, base))
            deleted.append(_none())
        state = State(segments, deleted, int(snapshot.position), snapshot.version)
        state.extra = self.manifest_extra(snapshot)
        return state

    def _set(self, state: State, base: Path | None = None) -> None:
        self.state, self._state_base = state, base
        self.on_state()

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        manifest = _read_manifest(self.stage_base(index_dir) / "manifests" / manifest_name(version))
        return (
            manifest is not None
            and manifest.get("version") == version.token
            and manifest.get("settings") == self.segment_settings()
        )

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Open the snapshot's version: its manifest when saved, else the newest saved one
        (or the one open now) advanced in memory; StaleIndexError when there is neither."""
        base = self.stage_base(index_dir)
        version = snapshot.version
        manifest = _read_manifest(base / "manifests" / manifest_name(version))
        if manifest is not None and manifest.get("version") == version.token:
            if manifest.get("settings") != self.segment_settings():
                raise StaleIndexError(f"{self._what(base)} was saved with other settings")
            self.accept(dict(manifest.get("extra") or {}), snapshot, self._what(base))
            self._set(self._open_manifest(base, manifest), base)
            self._check(snapshot, base)
            return
        start = self.state if self.state is not None and self._state_base == base else None
        if start is not None and start.version.store_id != version.store_id:
            start = None
        if start is None or start.position > int(snapshot.position):
            start = self._newest(base, snapshot, data=True)
        state = None if start is None else self._advance(start, snapshot, None)
        if start is None or state is None:
            raise StaleIndexError(f"{self._what(base)} has no build for the store's corpus version {version}")
        log.info("%s: version %s applied in memory from %s", self._what(base), version, start.version)
        self._set(state, base)
        self._check(snapshot, base)

    def check_files(self) -> None:
        """The open version's saved segments are still the files they were read from (a stat
        of each file, their content read again only when one changed); StoreError naming a
        segment changed on disk since. The runtime calls it before every query."""
        if self.state is not None and self._state_base is not None:
            for seg in self.state.segments:
                check_segment(seg)

    def _check(self, snapshot: Snapshot, base: Path) -> None:
        assert self.state is not None
        n = snapshot.n_chunks
        if self.state.n_live != n:
            raise StoreError(
                f"{self._what(base)} holds {self.state.n_live} chunks but the store's version "
                f"{snapshot.version} has {n}: run `plm index rebuild`"
            )

    # ------------------------------------------------------------- merging
    def merge_once(self, base: Path) -> bool:
        """Run one merge the policy asks for on the newest saved version; False when none."""
        import numpy as np

        with _locked(base):
            found = _manifests(base)
            if not found:
                return False
            manifest = found[-1][1]
            state = self._open_manifest(base, manifest, data=False)
        plan = merge_plan(state)
        if plan is None:
            return False
        inputs = [state.segments[i] for i in plan]
        keep = [~m if (m := state.dead(i)) is not None else np.ones(state.segments[i].n, bool) for i in plan]
        seqs = np.concatenate([s.seqs[k] for s, k in zip(inputs, keep, strict=True)])
        order = np.concatenate([s.order[k] for s, k in zip(inputs, keep, strict=True)])
        ids = [s.ids[int(r)] for s, k in zip(inputs, keep, strict=True) for r in np.flatnonzero(k)]
        rows = Rows(seqs, ids, order)
        data = self.merge_data([s.data for s in inputs], keep)
        name = f"s{int(seqs[0]) if len(seqs) else 0}-{int(seqs[-1]) if len(seqs) else 0}-m{uuid.uuid4().hex[:8]}"
        _write_segment(base, name, rows, data, self.save_data)
        merged = _open_segment(base, name, self.open_data)
        with _locked(base):
            newest = _manifests(base)[-1][1]
            now = self._open_manifest(base, newest, data=False)
            names = [s.name for s in now.segments]
            wanted = [s.name for s in inputs]
            at = next((i for i in range(len(names)) if names[i : i + len(wanted)] == wanted), None)
            if at is None:
                return False  # another merge or a rebuild got there first: ours is garbage
            gone = np.concatenate(
                [
                    s.seqs[d]
                    for s, d in zip(
                        now.segments[at : at + len(wanted)], now.deleted[at : at + len(wanted)], strict=True
                    )
                ]
            )
            segments = now.segments[:at] + ([merged] if merged.n else []) + now.segments[at + len(wanted) :]
            dead = [merged.rows_of(gone)] if merged.n else []
            deleted = now.deleted[:at] + dead + now.deleted[at + len(wanted) :]
            fresh = State(segments, deleted, now.position, now.version)
            fresh.extra = now.extra
            self._commit(base, fresh)
        collect_garbage(base)
        return True
