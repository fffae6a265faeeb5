"""A job: one config turned into live components over one index location, as a thin facade.

`Job.from_config(path).ingest(paths)` syncs the index; `.retrieve(text, k)` queries it.
The work is done by the parts a watcher, a server or a distributed executor can use
alone: `assembly` (config -> components), `sources` (paths and records -> documents),
`sync` (plan, process, commit), `search` (indexes, snapshots, hits).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from plm_core.config import JobConfig, load_job
from plm_core.errors import PlmUserError
from plm_core.interfaces import Chunker, Embedder, Loader
from plm_core.records import Document, Hit, Query, Ranking
from plm_core.registry import Registry
from plm_core.settings import Settings, load_settings
from plm_index.assembly import Assembler
from plm_index.cache import ContentCache, open_cache
from plm_index.collector import few_full_collections
from plm_index.file_stats import FileStats, Seen
from plm_index.fingerprints import index_fingerprint
from plm_index.plugins import default_registry
from plm_index.search import Searcher
from plm_index.sources import Source, as_sources, lists_files, load_sources
from plm_index.sync import (
    IngestReport,
    Processor,
    ProcessorRecipe,
    Syncer,
    note_other_sources,
    plan,
)

__all__ = ["IngestReport", "Job", "index_dir_for", "settings_for"]


class Job:
    def __init__(
        self,
        config: JobConfig,
        index_dir: Path,
        settings: Settings | None = None,
        registry: Registry | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        """`embedder`: an already loaded one to share (see `Assembler.assemble`)."""
        self.config = config
        self.settings = settings or load_settings()
        self.registry = registry or default_registry()
        self.index_dir = Path(index_dir)
        self.cache: ContentCache | None = open_cache(self.settings.data_dir) if self.settings.cache else None
        parts = Assembler(config, self.registry, self.settings, self.index_dir).assemble(self.cache, embedder)
        self.store, self.embedder, self.loader = parts.store, parts.embedder, parts.loader
        self.transform, self.query_stages = parts.transform, parts.query_stages
        self.built = parts.built  # each config table's label -> its component
        self.processor = Processor.of(
            self.transform, self.embedder, self.cache, self.settings.progress, self.settings.embed_window
        )
        # Workers run elsewhere (another folder, another machine): give them absolute paths.
        data_dir = str(Path(self.settings.data_dir).resolve())
        recipe = ProcessorRecipe(config, self.settings.model_copy(update={"data_dir": data_dir}))
        self.syncer = Syncer(
            self.store, self.processor, self.settings.ingest_batch, self.settings.progress, parts.executor, recipe
        )
        self.searcher = Searcher(self.store, self.query_stages, self.index_dir, parts.corpus, self.embedder)
        self._opened = False
        self._file_stats: FileStats | None = None

    @classmethod
    def from_config(
        cls,
        path: str | Path,
        overrides: Sequence[str] = (),
        index_dir: str | Path | None = None,
        dataset: str | Path | None = None,
        settings: Settings | None = None,
        registry: Registry | None = None,
    ) -> Job:
        registry = registry or default_registry()
        settings = settings or load_settings()
        config = load_job(path, registry, list(overrides))
        settings = settings_for(config.path, settings)
        if index_dir is None:
            index_dir = index_dir_for(config.job.name, settings.data_dir, dataset, config.path.stem)
            before = index_dir_for(config.job.name, settings.data_dir, dataset)  # plm run's, before plm eval's name
            if before != index_dir and before.is_dir() and not index_dir.exists():
                print(
                    f"note: this config's index of {Path(str(dataset)).name} is now {index_dir}, the folder plm eval "
                    f"uses (named by the config file, {config.path.name}); it no longer reads {before}",
                    file=sys.stderr,
                )
        return cls(config, Path(index_dir), settings, registry)

    def open(self, create: bool = True) -> Job:
        """Open the store; read-only callers pass create=False and never create an index."""
        if not self._opened:
            self.store.open(str(self.index_dir), create=create)
            self._opened = True
        return self

    def close(self) -> None:
        if self._opened:
            self.store.close()
            self._opened = False
        if self._file_stats is not None:
            self._file_stats.close()

    # ---------------------------------------------------------------- sync
    def index_fingerprint(self) -> str:
        """What every stored document depends on besides its own content (found without
        loading the model: a sync with nothing to do loads none)."""
        model = version = None
        if self.embedder is not None:
            model, version = self.embedder.expected_model_name, self.embedder.model_version
        index = dict(self.config.raw.get("index", {}))
        if self.loader is not None and self.loader.selection_fields:  # which files, not what they become
            name = self.config.index[0].label.rsplit(".", 1)[-1]
            index[name] = {k: v for k, v in index[name].items() if k not in self.loader.selection_fields}
        spec: dict[str, Any] = {"index": index, "embedder": self.config.raw.get("embedder", {})}
        if self.loader is not None and (reads_with := self.loader.reads_with()):  # a new converter reads anew
            spec["reads_with"] = dict(reads_with)
        # A third party's chunker or enricher: its package's version and every setting, given
        # or not, so that a new release (or a new default) chunks again; the content cache
        # keeps what did not change. Its chunks also carry their document's fields since the
        # runtime adds them: an index built before is chunked again once.
        theirs = [s for s in self.config.index if s.cls.__module__.split(".")[0] != "plm_plugins"]
        for s in theirs:
            if not issubclass(s.cls, Loader):  # what a loader reads is in each document's own fingerprint
                found = self.registry.get(s.use, s.family)
                settings = canonical(s.config.model_dump())
                spec.setdefault("plugins", {})[s.label] = [found.package, found.version, settings]
        if any(issubclass(s.cls, Chunker) for s in theirs):
            spec["chunks"] = "document fields"
        return index_fingerprint(spec, model, version or "")

    def ingest(
        self,
        sources: Iterable[Source] | Source,
        force: bool = False,
        prune: bool = False,
        prune_unread: bool = False,
        stop: Any = None,
    ) -> IngestReport:
        """Sync the index with the sources: new and changed documents are processed and
        stored (each batch of documents in one transaction with its chunks and vectors),
        unchanged ones skipped (a file whose size and modification time are unchanged is
        not even read), and with `prune` documents whose files are gone from the folders
        read are deleted. A stored document whose file still exists but is no longer read
        (a pattern or `exclude` change) is only listed in a note, unless `prune_unread`.
        `force` re-processes every document and recomputes instead of reading the cache.
        `stop` (a threading.Event), once set, ends the sync before its next batch: SyncStopped."""
        items = as_sources(sources)
        return self._sync(items, force=force, prune=prune or prune_unread, prune_unread=prune_unread, stop=stop)

    def sync(
        self, changed: Iterable[Source] | Source = (), deleted: Sequence[str] = (), prune: bool = False
    ) -> IngestReport:
        """For callers that already know what changed (a folder watcher): process these
        files or records (unchanged ones are still skipped) and delete these document ids,
        touching nothing else; one index refresh at the end. With `prune`, documents a
        changed file used to yield and no longer does (a record removed from a JSON file)
        are deleted too (see `ingest`)."""
        return self._sync(as_sources(changed), prune=prune, deleted=list(deleted), note_others=False)

    @property
    def file_stats(self) -> FileStats:
        """What syncs remember of the files they read (beside the index)."""
        if self._file_stats is None:
            self._file_stats = FileStats(self.index_dir)
        return self._file_stats

    def roots(self) -> list[str]:
        """The folders given to ingest so far (a file's id is its path from the nearest):
        in files.sqlite and, since that may be deleted, damaged or reset, in the store too."""
        try:
            stored = json.loads(self.store.get_meta("roots") or "[]")
        except ValueError:
            stored = []
        kept = [r for r in stored if isinstance(r, str)] if isinstance(stored, list) else []
        return list(dict.fromkeys([*self.file_stats.roots(), *kept]))

    def _trusted(self, index_fp: str, paths: list[str]) -> dict[str, Seen]:
        """The remembered files among `paths` whose document the store still holds as read."""
        entries = self.file_stats.seen(index_fp, paths)
        if not entries:
            return {}
        ids = [e.doc_id for e in entries.values()]
        stored = self.store.doc_fingerprints(ids if len(ids) <= 20_000 else None)
        return {p: e for p, e in entries.items() if stored.get(e.doc_id) == e.fingerprint}

    @few_full_collections()
    def _sync(
        self,
        items: list[Source],
        force: bool = False,
        prune: bool = False,
        deleted: Sequence[str] = (),
        note_others: bool = True,
        prune_unread: bool = False,
        stop: Any = None,
    ) -> IngestReport:
        try:
            return self._sync_steps(items, force, prune, deleted, note_others, prune_unread, stop)
        finally:
            self.searcher.ahead_done()  # what the build did not take, or a failed sync left

    def _sync_steps(
        self,
        items: list[Source],
        force: bool,
        prune: bool,
        deleted: Sequence[str],
        note_others: bool,
        prune_unread: bool,
        stop: Any = None,
    ) -> IngestReport:
        if items and not self.config.index:
            raise PlmUserError(
                f"{self.config.path} has no [index] stages: it can query an index, not build one; add a loader "
                'and a chunker, e.g. [index.load] use = "markdown_dir" and [index.chunk] use = "markdown_semantic"'
            )
        self.open()
        report = IngestReport()
        start = t0 = time.perf_counter()
        stored_model = self.store.get_meta("model")
        # Fingerprints name the model, but vectors written by other means must not mix either.
        expected = self.embedder.expected_model_name if self.embedder is not None else None
        redo = force or (expected is not None and stored_model not in (None, expected))
        index_fp = self.index_fingerprint()
        stats = self.file_stats
        seen = None if redo else functools.partial(self._trusted, index_fp)
        roots = self.roots()
        loaded = load_sources(items, self.loader, str(self.config.path), seen, roots)
        docs, report.failed, report.unread = loaded.docs, loaded.failed, loaded.unread
        report.time("read", time.perf_counter() - t0)
        report.documents = len(docs) + len(loaded.unchanged)
        if not docs and not loaded.unchanged and not report.failed and not deleted:
            raise PlmUserError("nothing to ingest: no documents found in the given sources")
        # Only these documents' fingerprints: a one-file sync into a million documents reads one row.
        todo = plan(docs, self.store.doc_fingerprints([d.id for d in docs]), index_fp, redo)
        # Each batch's texts go to the indexes as it is stored: BM25 tokenizes them on the
        # other cores meanwhile, for the build that follows.
        self.syncer.run(todo, report, read_cache=not force, stored=self.searcher.ahead, stop=stop)
        report.unchanged += len(loaded.unchanged)
        synced = set(todo.fingerprints) | {e.doc_id for e in loaded.unchanged.values()}
        failed = {f.doc_id for f in report.failed}
        if lists_files(self.loader):
            # every file read, not only the added: a sync killed after storing a file's new
            # id, before removing its old one, leaves that file unchanged for the next
            self._supersede(docs, {d.id for d in docs} - failed, synced, report)
            for root in loaded.roots:
                stats.add_root(root)
            if set(loaded.roots) - set(roots):  # the store keeps them too: files.sqlite may be lost
                self.store.set_meta("roots", json.dumps(sorted({*roots, *loaded.roots})))
            ok = [d for d in docs if d.id not in failed and d.path in loaded.signatures]
            seen_now = {d.path: Seen(*loaded.signatures[d.path], d.id, todo.fingerprints[d.id]) for d in ok}
            stats.record(index_fp, seen_now, loaded.listed_ns)
        del docs, todo  # the documents' texts are stored: free them before the index builds
        self._remove_emptied(report)
        if prune:
            self.syncer.prune(items, synced, report, loaded.read, prune_unread)
        # An id stored again by this sync (a file renamed between folders) is not deleted.
        deleted = [d for d in deleted if d not in synced]
        folders = note_others and any(isinstance(i, (str, Path)) and Path(i).is_dir() for i in items)
        if deleted:
            report.deleted += [d for d in self.store.delete_documents(deleted) if d not in report.deleted]
        elif folders and not prune:
            # Folders only (the note reads every stored path): not for a watcher's sync or a file.
            note_other_sources(self.store.doc_paths(), items, report, self.roots())
        if report.deleted:
            stats.forget(report.deleted)
        # Every stored vector is checked (a model change, a row left without one) by a folder's
        # ingest, or when the store's model is not this one. A watcher's, an API's or `plm
        # ingest FILE`'s sync of a few documents wrote its chunks' vectors with them, in one
        # transaction, by this model: checking all the others reads every vector (30 s and
        # more at a million; 0.2-0.9 s of a one-file ingest at 100,000).
        check_all = folders or force or stored_model != expected
        if check_all:
            self.syncer.complete_vectors(report, read_cache=not force)
        return self._finish(report, start, check=check_all)

    def _remove_emptied(self, report: IngestReport) -> None:
        """A file emptied since it was stored: its failure stays (it holds nothing to index),
        and its stored document is deleted, so that its old text is no longer found."""
        emptied = sorted({f.doc_id for f in report.failed if f.emptied and f.doc_id})
        removed = set(self.store.delete_documents(emptied)) if emptied else set()
        if not removed:
            return
        report.deleted += [d for d in sorted(removed) if d not in report.deleted]
        report.failed = [
            dataclasses.replace(f, error=f"{f.error} (its stored version was removed)") if f.doc_id in removed else f
            for f in report.failed
        ]

    def _supersede(self, docs: Sequence[Document], added: set[str], synced: set[str], report: IngestReport) -> None:
        """A file read under a new id (ids became paths, or its folder is now read from a
        folder above it) replaces the document stored from that file under the old id."""
        paths = sorted({d.path for d in docs if d.id in added and d.path})
        if not paths:
            return
        old = {i: p for i, p in self.store.doc_paths(paths).items() if i not in synced}
        if not old:
            return
        gone = self.store.delete_documents(sorted(old))
        report.deleted += gone
        new = {d.path: d.id for d in docs if d.id in added}
        example = next(iter(gone))
        report.notes.append(
            f"note: {len(gone)} document(s) now named by their path from the folder read "
            f"(e.g. {example!r} is now {new.get(old[example], '?')!r}); their old ids were removed"
        )

    def delete(self, doc_ids: Sequence[str]) -> IngestReport:
        """Remove documents (one transaction) and rebuild the derived indexes."""
        self.open(create=False)
        start = time.perf_counter()
        # Removing rows cannot leave a chunk without its vector: no store-wide count.
        return self._finish(IngestReport(deleted=self.store.delete_documents(doc_ids)), start, check=False)

    def rebuild(self, report: IngestReport | None = None) -> IngestReport:
        """Regenerate everything derived from the stored chunks: vectors that are missing,
        damaged or from another model (re-embedded, through the cache), then every index."""
        self.open(create=False)
        report = report or IngestReport()
        start = time.perf_counter()
        self.syncer.complete_vectors(report, read_cache=True)
        return self._finish(report, start, rebuild=True)

    def rebuild_indexes(self, report: IngestReport | None = None, whole: bool = True, check: bool = True) -> None:
        """Build and save every retrieval index from what the store holds (with `whole`
        false, each by its cheapest path: a segment for what changed; with `check` false,
        without counting the whole store's consistency first)."""
        try:
            self.searcher.rebuild(report.timings if report is not None else None, whole, check)
        except OSError as err:
            if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise PlmUserError(
                f"the disk holding the index {self.index_dir} is full ({err.strerror}) while its search indexes were "
                "saved: the documents are stored and the indexes as they were; free space and run `plm ingest` "
                "again (or `plm index rebuild`)"
            ) from None

    def _finish(self, report: IngestReport, start: float, rebuild: bool = False, check: bool = True) -> IngestReport:
        """Rebuild the derived indexes if the store changed since they were built (or
        always, with `rebuild`), then fill in the report's totals."""
        with self.store.snapshot():
            counted = None
            if rebuild or not self.searcher.indexes_current(self.store.version()):
                t0, timed = time.perf_counter(), sum(report.timings.values())
                self.rebuild_indexes(report, whole=rebuild, check=check)
                # Each index's build is timed as `index:NAME`; this is the rest (snapshot, saving).
                rest = time.perf_counter() - t0 - (sum(report.timings.values()) - timed)
                report.time("rebuild indexes" if rebuild else "update indexes", max(rest, 0.0))
                counted = self.searcher.corpus.n_chunks  # counted by that rebuild, in this snapshot
            # Not stats(): it counts every document too (30 ms at a million, at every write).
            report.chunks = self.store.chunk_count() if counted is None else counted
        report.model = self.store.get_meta("model")
        report.seconds = time.perf_counter() - start
        # The parts add up to the total: what no part timed (planning, pruning) is "other".
        rest = report.seconds - sum(report.timings.values())
        if rest >= 0.0005:
            report.time("other", rest)
        return report

    # ---------------------------------------------------------------- query
    def search(
        self,
        query: str | Query,
        k: int = 5,
        filters: dict[str, Any] | None = None,
        weights: dict[str, float] | None = None,
    ) -> tuple[Ranking, dict[str, float]]:
        """The ranking for a query and seconds per stage; `weights` replace the fuser
        profile's weights of the sources they name, for this query."""
        self.open(create=False)
        q = query if isinstance(query, Query) else Query(text=query, k=k, filters=filters, weights=weights)
        return self.searcher.search(q)

    def retrieve(self, query: str | Query, k: int = 5, filters: dict[str, Any] | None = None) -> list[Hit]:
        return list(self.search(query, k, filters)[0].hits)


def canonical(value: Any) -> Any:
    """`value` as JSON that is the same in every process: a set sorted, a value JSON has no
    form for named by its type (a callable's repr holds its address, a set's order its hash)."""
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    text = str(value)
    return f"<{type(value).__qualname__}>" if " at 0x" in text else text


def index_dir_for(job_name: str, data_dir: str, dataset: str | Path | None, stem: str = "") -> Path:
    """One index per job, plus one per named dataset given with --dataset: `<job>-<dataset>`,
    or `<job>.<stem>-<dataset>` when the config file's stem is not the job's name (two
    variants of a recipe often keep its name), the same for `plm run`, `plm eval`, `plm
    tune` and `plm query --dataset`."""
    if dataset is None:
        return Path(data_dir) / job_name
    base = job_name if stem in ("", job_name) else f"{job_name}.{stem}"
    return Path(data_dir) / f"{base}-{Path(dataset).resolve().name}"


def settings_for(config_path: str | Path, settings: Settings) -> Settings:
    """`settings` with an absolute `data_dir`: PLM_DATA_DIR as given (relative to the working
    directory), or, when it is not set, `.plm` in the config file's folder, so that a config
    finds its index from any working directory, as it finds the other paths it names."""
    chosen = "data_dir" in settings.model_fields_set
    base = Path(settings.data_dir) if chosen else Path(config_path).resolve().parent / ".plm"
    return settings.model_copy(update={"data_dir": str(base.resolve())})
