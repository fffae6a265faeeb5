"""A job: one config turned into live components over one index location, as a thin facade.

`Job.from_config(path).ingest(paths)` syncs the index; `.retrieve(text, k)` queries it.
The work is done by the parts a watcher, a server or a distributed executor can use
alone: `assembly` (config -> components), `sources` (paths and records -> documents),
`sync` (plan, process, commit), `search` (indexes, snapshots, hits).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from plm_core.config import JobConfig, load_job
from plm_core.errors import PlmUserError
from plm_core.interfaces import Embedder
from plm_core.records import Hit, Query, Ranking
from plm_core.registry import Registry, default_registry
from plm_core.settings import Settings, load_settings
from plm_index.assembly import Assembler
from plm_index.cache import ContentCache, open_cache
from plm_index.search import Searcher
from plm_index.sources import Source, as_sources, load_sources
from plm_index.sync import IngestReport, Processor, ProcessorRecipe, Syncer, index_fingerprint, note_other_sources, plan

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
        self.processor = Processor.of(self.transform, self.embedder, self.cache)
        # Workers run elsewhere (another folder, another machine): give them absolute paths.
        data_dir = str(Path(self.settings.data_dir).resolve())
        recipe = ProcessorRecipe(config, self.settings.model_copy(update={"data_dir": data_dir}))
        self.syncer = Syncer(
            self.store, self.processor, self.settings.ingest_batch, self.settings.progress, parts.executor, recipe
        )
        self.searcher = Searcher(self.store, self.query_stages, self.index_dir, parts.corpus, self.embedder)
        self._opened = False

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
            index_dir = index_dir_for(config.job.name, settings.data_dir, dataset)
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

    # ---------------------------------------------------------------- sync
    def index_fingerprint(self) -> str:
        """What every stored document depends on besides its own content."""
        model = version = None
        if self.embedder is not None:
            model, version = self.embedder.model_name, self.embedder.model_version
        spec = {"index": self.config.raw.get("index", {}), "embedder": self.config.raw.get("embedder", {})}
        return index_fingerprint(spec, model, version or "")

    def ingest(self, sources: Iterable[Source] | Source, force: bool = False, prune: bool = False) -> IngestReport:
        """Sync the index with the sources: new and changed documents are processed and
        stored (each batch of documents in one transaction with its chunks and vectors),
        unchanged ones skipped, and with `prune` stored documents the sources no longer
        yield are deleted. `force` re-processes every document and recomputes instead of
        reading the content cache."""
        return self._sync(as_sources(sources), force=force, prune=prune)

    def sync(
        self, changed: Iterable[Source] | Source = (), deleted: Sequence[str] = (), prune: bool = False
    ) -> IngestReport:
        """For callers that already know what changed (a folder watcher): process these
        files or records (unchanged ones are still skipped) and delete these document ids,
        touching nothing else; one index refresh at the end. With `prune`, documents a
        changed file used to yield and no longer does (a record removed from a JSON file)
        are deleted too (see `ingest`)."""
        return self._sync(as_sources(changed), prune=prune, deleted=list(deleted), note_others=False)

    def _sync(
        self,
        items: list[Source],
        force: bool = False,
        prune: bool = False,
        deleted: Sequence[str] = (),
        note_others: bool = True,
    ) -> IngestReport:
        if items and not self.config.index:
            raise PlmUserError(
                f"{self.config.path} has no [index] stages: it can query an index, not build one; add a loader "
                'and a chunker, e.g. [index.load] use = "markdown_dir" and [index.chunk] use = "markdown_semantic"'
            )
        self.open()
        report = IngestReport()
        start = t0 = time.perf_counter()
        docs, report.failed = load_sources(items, self.loader, str(self.config.path))
        report.time("load", time.perf_counter() - t0)
        report.documents = len(docs)
        if not docs and not report.failed and not deleted:
            raise PlmUserError("nothing to ingest: no documents found in the given sources")
        stored_model = self.store.get_meta("model")
        # Fingerprints name the model, but vectors written by other means must not mix either.
        redo = force or (self.embedder is not None and stored_model not in (None, self.embedder.model_name))
        # Only these documents' fingerprints: a one-file sync into a million documents reads one row.
        todo = plan(docs, self.store.doc_fingerprints([d.id for d in docs]), self.index_fingerprint(), redo)
        self.syncer.run(todo, report, read_cache=not force)
        synced = set(todo.fingerprints)
        del docs, todo  # the documents' texts are stored: free them before the index builds
        if prune:
            self.syncer.prune(items, synced, report)
        # An id stored again by this sync (a file renamed between folders) is not deleted.
        deleted = [d for d in deleted if d not in synced]
        if deleted:
            report.deleted += [d for d in self.store.delete_documents(deleted) if d not in report.deleted]
        elif (
            items and not prune and note_others and any(isinstance(i, (str, Path)) and Path(i).is_dir() for i in items)
        ):
            # Folders only (the note reads every stored path): not for a watcher's sync or a file.
            note_other_sources(self.store.doc_paths(), items, report)
        self.syncer.complete_vectors(report, read_cache=not force)
        return self._finish(report, start)

    def delete(self, doc_ids: Sequence[str]) -> IngestReport:
        """Remove documents (one transaction) and rebuild the derived indexes."""
        self.open(create=False)
        start = time.perf_counter()
        return self._finish(IngestReport(deleted=self.store.delete_documents(doc_ids)), start)

    def rebuild(self, report: IngestReport | None = None) -> IngestReport:
        """Regenerate everything derived from the stored chunks: vectors that are missing,
        damaged or from another model (re-embedded, through the cache), then every index."""
        self.open(create=False)
        report = report or IngestReport()
        start = time.perf_counter()
        self.syncer.complete_vectors(report, read_cache=True)
        return self._finish(report, start, rebuild=True)

    def rebuild_indexes(self, report: IngestReport | None = None, whole: bool = True) -> None:
        """Build and save every retrieval index from what the store holds (with `whole`
        false, each by its cheapest path: a segment for what changed)."""
        self.searcher.rebuild(report.timings if report is not None else None, whole)

    def _finish(self, report: IngestReport, start: float, rebuild: bool = False) -> IngestReport:
        """Rebuild the derived indexes if the store changed since they were built (or
        always, with `rebuild`), then fill in the report's totals."""
        with self.store.snapshot():
            if rebuild or not self.searcher.indexes_current(self.store.version()):
                t0 = time.perf_counter()
                self.rebuild_indexes(report, whole=rebuild)
                report.time("rebuild indexes" if rebuild else "update indexes", time.perf_counter() - t0)
            report.chunks = int(self.store.stats().get("chunks", 0))
        report.model = self.store.get_meta("model")
        report.seconds = time.perf_counter() - start
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


def index_dir_for(job_name: str, data_dir: str, dataset: str | Path | None) -> Path:
    """One index per job, plus one per named dataset given with --dataset."""
    base = Path(data_dir) / job_name
    return base if dataset is None else Path(f"{base}-{Path(dataset).resolve().name}")


def settings_for(config_path: str | Path, settings: Settings) -> Settings:
    """`settings` with an absolute `data_dir`: PLM_DATA_DIR as given (relative to the working
    directory), or, when it is not set, `.plm` in the config file's folder, so that a config
    finds its index from any working directory, as it finds the other paths it names."""
    chosen = "data_dir" in settings.model_fields_set
    base = Path(settings.data_dir) if chosen else Path(config_path).resolve().parent / ".plm"
    return settings.model_copy(update={"data_dir": str(base.resolve())})
