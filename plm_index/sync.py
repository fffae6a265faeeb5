"""Keeping a store in sync with documents: a pure plan, pure batch processing, one writer.

`plan(docs, stored, ...)` decides what to (re)process; `Processor.process(batch)` turns
documents into chunks and vectors without touching the store, so an `Executor` can run it
anywhere (a worker builds its own from a picklable `ProcessorRecipe`); `Syncer` is the
single writer: it commits each processed batch in one transaction, prunes, deletes,
re-embeds what a model change left behind, and reports. `IngestReport` is what a caller
gets back.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plm_core.errors import PipelineError, PlmUserError, TypeValidationError
from plm_core.interfaces import Embedder, Executor, Store
from plm_core.pipeline import Pipeline
from plm_core.records import BatchResult, Chunk, Document, LoadFailure
from plm_index.cache import CachedEmbedder, CachedStage, ContentCache
from plm_index.documents import explain_refused
from plm_index.fingerprints import doc_fingerprint
from plm_index.progress import progress_iter

EMBED_WINDOW = 8192  # chunks embedded in one call across batches (the default of PLM_EMBED_WINDOW)
PROGRESS_CHUNKS = 256  # a window this large shows the embedder's own bar (10 s and more on a CPU)
STOPPABLE_WINDOW = 256  # a sync that may be stopped embeds this many at a time: seconds between checks


class SyncStopped(PlmUserError):
    """A sync asked to stop (a server's SIGTERM) stopped between batches: what is stored stays."""


log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What a sync did: documents added, updated (re-processed), unchanged (skipped),
    deleted and failed (per file), the chunks stored, and where the time went: `timings`
    has one entry per part (reading files, each stage, loading the model, embedding,
    storing, each index's build) and they add up to `seconds` (the rest is "other")."""

    documents: int = 0  # documents the sources yielded
    chunks: int = 0  # chunks in the index afterwards
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: list[LoadFailure] = field(default_factory=list)
    unread: dict[str, list[str]] = field(default_factory=dict)  # extension -> files no converter reads
    notes: list[str] = field(default_factory=list)
    model: str | None = None
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    # stage label -> {"computed": n, "cached": n}: what the content cache saved
    work: dict[str, dict[str, int]] = field(default_factory=dict)
    corpus_version: int | None = None  # the store's version after it (set by a server's sync)

    @property
    def skipped(self) -> bool:
        """Nothing changed: no document added, updated or deleted."""
        return not (self.added or self.updated or self.deleted)

    def time(self, name: str, seconds: float) -> None:
        self.timings[name] = self.timings.get(name, 0.0) + seconds

    def count(self, stage: str, computed: int, cached: int) -> None:
        work = self.work.setdefault(stage, {"computed": 0, "cached": 0})
        work["computed"] += computed
        work["cached"] += cached

    def summary(self) -> str:
        return summary_line(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": self.unchanged,
            "deleted": len(self.deleted),
            "failed": [{"path": f.path, "doc_id": f.doc_id, "error": f.error} for f in self.failed],
            "unread": self.unread,
            "notes": self.notes,
            "model": self.model,
            "seconds": round(self.seconds, 3),
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "work": self.work,
        }


def summary_line(report: Mapping[str, Any]) -> str:
    """The one-line sync summary, from `IngestReport.as_dict()` (what every command prints)."""
    parts = [
        f"added {report['added']}, updated {report['updated']}, unchanged {report['unchanged']}, "
        f"deleted {report['deleted']}, failed {len(report['failed'])} in {report['seconds']:.1f}s"
    ]
    embed = report["work"].get("embed")
    if embed is not None:
        parts.append(f"embedded {embed['computed']} chunks ({embed['cached']} from cache)")
    if unread := sorted((report.get("unread") or {}).items(), key=lambda kv: (-len(kv[1]), kv[0])):
        parts.append(f"skipped {', '.join(f'{len(names)} {ext}' for ext, names in unread)}: no converter")
    return "; ".join(parts)


@dataclass(frozen=True)
class SyncPlan:
    """Which documents to process, and why."""

    todo: list[Document]
    added: list[str]
    updated: list[str]
    unchanged: int
    fingerprints: dict[str, str]


def plan(docs: Sequence[Document], stored: Mapping[str, str], index_fp: str, redo: bool = False) -> SyncPlan:
    """New and changed documents (all of them with `redo`); unchanged ones are skipped."""
    base = hashlib.sha256(index_fp.encode())
    fps = {d.id: doc_fingerprint(base, d) for d in docs}
    todo = [d for d in docs if redo or stored.get(d.id) != fps[d.id]]
    return SyncPlan(
        todo=todo,
        added=[d.id for d in todo if d.id not in stored],
        updated=[d.id for d in todo if d.id in stored],
        unchanged=len(docs) - len(todo),
        fingerprints=fps,
    )


@dataclass(frozen=True)
class ProcessorRecipe:
    """How to build a job's `Processor` from scratch: its validated config and settings.
    Picklable, so a worker in another process or on another machine builds its own stages
    (and opens the content cache under `settings.data_dir`) once, then processes batches."""

    config: Any  # plm_core.config.JobConfig
    settings: Any  # plm_core.settings.Settings

    def build(self) -> Processor:
        from plm_index.assembly import Assembler
        from plm_index.cache import open_cache

        cache = open_cache(self.settings.data_dir) if self.settings.cache else None
        parts = Assembler(self.config, None, self.settings, Path(self.settings.data_dir)).assemble(cache)
        return Processor.of(parts.transform, parts.embedder, cache, window=self.settings.embed_window)


class Processor:
    """Documents -> chunks (the index stages) -> vectors (the embedder, through the cache)."""

    def __init__(
        self,
        transform: Pipeline,
        embedder: CachedEmbedder | None,
        progress: bool = False,
        window: int = EMBED_WINDOW,
    ) -> None:
        self.transform, self.embedder, self.progress, self.window = transform, embedder, progress, window
        self.stop: Any = None  # a threading.Event: set, the sync stops before its next batch

    @classmethod
    def of(
        cls,
        transform: Pipeline,
        embedder: Embedder | None,
        cache: ContentCache | None,
        progress: bool = False,
        window: int = EMBED_WINDOW,
    ) -> Processor:
        """The index stages, and the embedder (if any) reading and filling the content cache;
        `window` chunks embedded in one call (`PLM_EMBED_WINDOW`); with `progress`, the
        embedder's own bar over a large window."""
        return cls(transform, CachedEmbedder(embedder, cache) if embedder is not None else None, progress, window)

    def process_all(self, batches: Iterable[Sequence[Document]], read_cache: bool = True) -> Iterator[BatchResult]:
        """Each batch in this process, one after another, as it is asked for. Their chunks
        are embedded together, up to `window` in one call, in corpus order: an embedder
        that batches by length (sentence-transformers sorts a call's texts) then gives each
        chunk the vector one call over the corpus gives, as the POC computed them, whatever
        the ingest batch. The batches of a window commit when it is embedded."""
        size = min(self.window, STOPPABLE_WINDOW) if self.stop is not None else self.window
        window: list[BatchResult] = []
        chunks = 0
        for batch in batches:
            if self.stop is not None and self.stop.is_set():
                raise SyncStopped("stopped before the sync's end: the batches stored stay; the next sync does the rest")
            if self.embedder is None:
                yield self.process(batch, read_cache)
                continue
            window.append(self.process(batch, read_cache, embed=False))
            chunks += len(window[-1].chunks)
            if chunks >= size:
                yield from self._embed_window(window, read_cache)
                window, chunks = [], 0
        yield from self._embed_window(window, read_cache)

    def _embed_window(self, window: list[BatchResult], read_cache: bool) -> list[BatchResult]:
        texts = [c.index_text for r in window for c in r.chunks]
        if not texts:
            return window
        assert self.embedder is not None
        first = next(r for r in window if r.chunks)  # the window's embedding is accounted to it
        t0, loading = time.perf_counter(), self.embedder.load_seconds
        was = self.embedder.computed, self.embedder.cached
        matrix = self.embedder.embed(texts, read=read_cache, progress=self.progress and len(texts) >= PROGRESS_CHUNKS)
        _time_embedding(first.timings, time.perf_counter() - t0, self.embedder.load_seconds - loading)
        first.work["embed"] = (self.embedder.computed - was[0], self.embedder.cached - was[1])
        start, model = 0, self.embedder.model_name()  # this process's: a Ray worker may load another
        for result in window:
            if result.chunks:
                result.vectors, start = matrix[start : start + len(result.chunks)], start + len(result.chunks)
                result.model = model
        return window

    def cached_stages(self) -> list[CachedStage]:
        return [s for s in self.transform.stages if isinstance(s, CachedStage)]

    def process(self, batch: Sequence[Document], read_cache: bool = True, embed: bool = True) -> BatchResult:
        """When a stage fails on the batch, its documents are retried one by one; those
        that fail are reported and the rest go on, unless every one fails with the same
        unexpected error, which is raised: a broken stage, not bad documents. `embed` false:
        the chunks' vectors are left to the caller (`process_all` embeds a window of batches)."""
        for stage in self.cached_stages():
            stage.read = read_cache
        before = self.counters()
        result = BatchResult(list(batch), [])
        try:
            result.chunks = self._chunks(batch, result)
        except PipelineError as err:
            if isinstance(err.cause, TypeValidationError):
                raise  # a stage that returns the wrong type fails every document: it is the stage
            first = err
            kept: list[Document] = []
            unexpected: set[str] = set()
            for doc in batch:
                try:
                    result.chunks.extend(self._chunks([doc], result))
                    kept.append(doc)
                except PipelineError as one:
                    if not isinstance(one.cause, PlmUserError):  # its traceback once, then a line a document
                        kind = type(one.cause).__name__
                        log.warning(
                            "document %r failed", doc.id, exc_info=one.cause if kind not in unexpected else None
                        )
                        unexpected.add(kind)
                    result.failed.append(LoadFailure(doc.path or "records", str(one), doc.id))
            if not kept and len(batch) > 1 and len(unexpected) == 1 and not isinstance(first.cause, PlmUserError):
                raise first from None
            result.documents = kept
        if embed and self.embedder is not None and result.chunks:
            t0, loading = time.perf_counter(), self.embedder.load_seconds
            result.vectors = self.embedder.embed([c.index_text for c in result.chunks], read=read_cache)
            result.model = self.embedder.model_name()
            _time_embedding(result.timings, time.perf_counter() - t0, self.embedder.load_seconds - loading)
        for label, (computed, cached) in self.counters().items():
            was = before.get(label, (0, 0))
            if label != "embed" or (computed, cached) != was:  # embedding ran only if the batch had chunks
                result.work[label] = (computed - was[0], cached - was[1])
        return result

    def counters(self) -> dict[str, tuple[int, int]]:
        """Stage label -> (computed, cached) so far, for every cached stage and the embedder."""
        stages = {s.label: (s.misses, s.hits) for s in self.cached_stages()}
        if self.embedder is not None:
            stages["embed"] = (self.embedder.computed, self.embedder.cached)
        return stages

    def _chunks(self, docs: Sequence[Document], result: BatchResult) -> list[Chunk]:
        if not self.transform.stages:
            return []
        out = self.transform.run(list(docs))
        for name, seconds in out.timings.items():
            result.timings[name] = result.timings.get(name, 0.0) + seconds
        return list(out.output)


def _time_embedding(timings: dict[str, float], seconds: float, loading: float) -> None:
    """An embedding call's time, the model's loading (if it had to) apart."""
    if loading:
        timings["load model"] = loading
    timings["embed"] = seconds - loading


def scope(sources: Sequence[Any]) -> Callable[[str], bool]:
    """Whether a stored document's path lies under one of these sources (path-less
    documents: when in-memory records were given). Paths are compared absolute without
    following links, as loaders store them, from whatever directory this runs. Cost: one
    prefix test per path, whatever the number of sources (a watcher's batch of 500 files
    against 1,000 stored documents, a prune of 100,000)."""
    roots = {os.path.abspath(s) for s in sources if isinstance(s, (str, Path))}
    prefixes = tuple(r.rstrip(os.sep) + os.sep for r in roots)
    records = any(not isinstance(s, (str, Path)) for s in sources)

    def covered(path: str) -> bool:
        if not path:
            return records
        p = path if os.path.isabs(path) and "/." not in path and "//" not in path else os.path.abspath(path)
        return p in roots or p.startswith(prefixes)

    return covered


def note_other_sources(
    stored_paths: Mapping[str, str], sources: Sequence[Any], report: IngestReport, roots: Sequence[str] = ()
) -> None:
    """Say when the index also holds documents these sources did not name: a user's own
    documents must never silently join another collection (e.g. the demo's evaluation).
    A folder ingested before (`roots`) that holds a source is that source's collection: a
    subfolder's ingest does not call the rest of its folder other sources."""
    given = [s for s in sources if isinstance(s, (str, Path))]
    above = [r for r in roots if any(scope([r])(os.fspath(g)) for g in given)]
    covered = scope([*sources, *above])
    others = [path or doc_id for doc_id, path in stored_paths.items() if not covered(path)]
    if others:
        report.notes.append(
            f"note: this index also holds {len(others)} document(s) from other sources (e.g. {others[0]}); "
            "pass --index FOLDER to keep collections apart"
        )


class Syncer:
    """The single writer of one store: its executor processes batches (here or on a
    cluster), and it commits each result as it arrives."""

    def __init__(
        self,
        store: Store,
        processor: Processor,
        batch_size: int,
        progress: bool,
        executor: Executor | None = None,
        recipe: ProcessorRecipe | None = None,
    ) -> None:
        self.store, self.processor = store, processor
        self.batch_size, self.progress = batch_size, progress
        self.executor, self.recipe = executor, recipe

    @property
    def model(self) -> str | None:
        embedder = self.processor.embedder
        return embedder.model_name() if embedder is not None else None  # loads no model the sync did not need

    def run(
        self,
        sync_plan: SyncPlan,
        report: IngestReport,
        read_cache: bool = True,
        stored: Callable[[list[str]], None] | None = None,
        stop: Any = None,
    ) -> None:
        """Process and commit the plan's documents batch by batch: each batch is one
        transaction, so an interrupted sync keeps every batch before it. `stored` is given
        each committed batch's index texts, in order; `stop` (an Event), once set, ends the
        sync before its next batch with SyncStopped."""
        report.added, report.updated, report.unchanged = sync_plan.added, sync_plan.updated, sync_plan.unchanged
        todo = sync_plan.todo
        if not todo:
            return
        batches = batches_of(todo, self.batch_size, self.progress)
        self.processor.stop = stop
        try:
            if self.executor is None or self.recipe is None:
                results: Iterable[BatchResult] = self.processor.process_all(batches, read_cache)
            else:
                results = self.executor.process(batches, self.processor, self.recipe, read_cache)
            for result in progress_iter(
                results, "index", self.progress, total_items=len(todo), unit="docs", step=_documents_in
            ):
                self.commit(result, sync_plan.fingerprints, report)
                if stored is not None and result.documents:
                    stored([c.index_text for c in result.chunks])
        finally:
            self.processor.stop = None

    def commit(self, result: BatchResult, fingerprints: Mapping[str, str], report: IngestReport) -> None:
        """Store a processed batch in one transaction and account for it."""
        for name, seconds in result.timings.items():
            report.time(name, seconds)
        for label, (computed, cached) in result.work.items():
            report.count(label, computed, cached)
        if result.failed:
            report.failed.extend(result.failed)
            gone = {f.doc_id for f in result.failed}
            report.added = [i for i in report.added if i not in gone]
            report.updated = [i for i in report.updated if i not in gone]
        if result.documents:  # every document of it may have failed
            t0 = time.perf_counter()
            fps = [fingerprints[d.id] for d in result.documents]
            model = result.model or self.model  # the model that gave these vectors, wherever they were made
            try:
                self.store.replace_documents(result.documents, result.chunks, result.vectors, model, fps)
            except Exception as exc:
                explain_refused(exc, self.store, result.documents, result.chunks)
                raise
            report.time("store", time.perf_counter() - t0)

    def prune(
        self,
        sources: Sequence[Any],
        yielded: set[str],
        report: IngestReport,
        read: set[str] = frozenset(),  # type: ignore[assignment]
        unread_too: bool = False,
    ) -> None:
        """Delete stored documents these sources used to yield and no longer do, among those
        whose stored path is one of the source paths or lies under one (documents from other
        folders are left alone), or path-less ones when in-memory records were given: a
        document whose file is gone, or whose file was `read` and gave other documents. A
        document whose file still exists but was not read (a pattern or exclude change) is
        listed in a note and kept, unless `unread_too`."""
        stored = self._paths(sources)
        # A record that failed before its id was read may be stored; a listed file no document came from cannot.
        paths = set(stored.values())
        if unknown := [f for f in report.failed if not f.doc_id and (f.path not in read or f.path in paths)]:
            why = "failure(s) without a known document id; fix them and run again"
            return report.notes.append(f"--prune skipped: {len(unknown)} {why}")
        covered = scope(sources)
        keep = yielded | {f.doc_id for f in report.failed}
        gone: list[str] = []
        unread: list[tuple[str, str]] = []
        for doc_id, path in stored.items():
            if doc_id in keep or not covered(path):
                continue
            if not path or path in read or not os.path.lexists(path) or unread_too:
                gone.append(doc_id)
            else:
                unread.append((doc_id, path))
        if gone:
            report.deleted += [d for d in self.store.delete_documents(gone) if d not in report.deleted]
        if unread:
            shown = ", ".join(path for _, path in unread[:5]) + (", ..." if len(unread) > 5 else "")
            report.notes.append(
                f"note: kept {len(unread)} document(s) whose files still exist but are no longer read "
                f"(the loader's pattern or exclude): {shown}; `plm ingest ... --prune-unread` removes them"
            )

    def _paths(self, sources: Sequence[Any]) -> dict[str, str]:
        """Stored id -> path of the documents `prune` must look at: when every source is a
        file (a watcher's batch), those stored under these files' paths (as given, absolute
        or relative to here), found by the store; else all of them."""
        files = [s for s in sources if isinstance(s, (str, Path)) and os.path.isfile(s)]
        if not files or len(files) != len(sources):
            return self.store.doc_paths()
        names = {form for f in files for form in (str(f), os.path.abspath(f), os.path.relpath(f))}
        return self.store.doc_paths(sorted(names))

    def complete_vectors(self, report: IngestReport, read_cache: bool) -> None:
        """Embed stored chunks whose vector is missing, damaged or from another model: after
        a model change, documents this sync did not yield (other folders, files that failed)
        are re-embedded from their stored texts, so models never mix."""
        embedder = self.processor.embedder
        if embedder is None:
            return
        # The name found without loading: a store whose vectors are all current loads no model.
        broken = self.store.chunks_needing_vectors(embedder.embedder.expected_model_name)
        if not broken:
            return
        t0 = time.perf_counter()
        was = embedder.computed, embedder.cached
        step = self.batch_size * 8
        for i in range(0, len(broken), step):
            part = broken[i : i + step]
            texts = [c.index_text for c in part]  # another process may replace a document meanwhile
            matrix = embedder.embed(texts, read=read_cache)
            self.store.write_vectors([c.id for c in part], matrix, embedder.model_name(), texts)
        report.count("embed", embedder.computed - was[0], embedder.cached - was[1])
        report.time("embed", time.perf_counter() - t0)
        report.notes.append(f"re-embedded {len(broken)} stored chunks whose vectors were missing or stale")


def batches_of(todo: Sequence[Any], size: int, progress: bool) -> list[Sequence[Any]]:
    """`todo` cut into batches of `size`. With a progress bar the first batch is small: the bar
    moves when a batch commits, and a first batch of 64 documents kept it at 0 for a minute."""
    first = min(size, FIRST_BATCH) if progress else size
    return [todo[:first]] + [todo[i : i + size] for i in range(first, len(todo), size)]


FIRST_BATCH = 8


def _documents_in(result: BatchResult) -> int:
    """How far a processed batch moves the progress bar: every document it held."""
    return len(result.documents) + len(result.failed)
