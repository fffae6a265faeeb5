"""A job: one config turned into live components over one index folder.

`Job.open(config).ingest(paths)` builds the index; `.retrieve(text, k)` queries it. The
store holds everything; derived indexes (BM25, vector matrix) are rebuilt from it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plm_core.cache import CachedStage, ContentCache, content_key, stage_identity
from plm_core.component import BaseComponent
from plm_core.config import JobConfig, StageSpec, load_job
from plm_core.errors import ConfigError, PipelineError, PlmUserError, StoreError
from plm_core.interfaces import Embedder, Loader, Ranking, Store
from plm_core.pipeline import Pipeline
from plm_core.progress import progress_iter
from plm_core.records import Chunk, Document, Hit, LoadFailure, Query
from plm_core.registry import Registry, default_registry
from plm_core.settings import Settings

FORMAT_VERSION = "1"

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What a sync did: documents added, updated (re-processed), unchanged (skipped),
    deleted and failed (per file), the chunks stored, and where the time went."""

    documents: int = 0  # documents the sources yielded
    chunks: int = 0  # chunks in the index afterwards
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    failed: list[LoadFailure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    model: str | None = None
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    # stage label -> {"computed": n, "cached": n}: what the content cache saved
    work: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        """Nothing changed: no document added, updated or deleted."""
        return not (self.added or self.updated or self.deleted)

    def summary(self) -> str:
        embed = self.work.get("embed")
        parts = [
            f"added {len(self.added)}, updated {len(self.updated)}, unchanged {self.unchanged}, "
            f"deleted {len(self.deleted)}, failed {len(self.failed)} in {self.seconds:.1f}s"
        ]
        if embed is not None:
            parts.append(f"embedded {embed['computed']} chunks ({embed['cached']} from cache)")
        return "; ".join(parts)

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
            "notes": self.notes,
            "model": self.model,
            "seconds": round(self.seconds, 3),
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "work": self.work,
        }


class JobContext:
    """What components may reach: settings, the store, the embedder, the index folder."""

    def __init__(self, job: Job) -> None:
        self.job = job

    @property
    def settings(self) -> Settings:
        return self.job.settings

    @property
    def store(self) -> Store:
        return self.job.store

    @property
    def embedder(self) -> Embedder | None:
        return self.job.embedder

    @property
    def index_dir(self) -> Path:
        return self.job.index_dir

    def build(self, spec: StageSpec) -> Any:
        return self.job.build(spec)


def _labelled(spec: StageSpec, obj: Any) -> Any:
    obj.label = spec.label.rsplit(".", 1)[-1]
    return obj


class Job:
    def __init__(
        self,
        config: JobConfig,
        index_dir: Path,
        settings: Settings | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.config = config
        self.settings = settings or Settings()
        self.registry = registry or default_registry()
        self.index_dir = Path(index_dir)
        self.context = JobContext(self)
        self.store: Store = self.build(config.store)
        self.embedder: Embedder | None = self.build(config.embedder) if config.embedder else None
        self.index_stages = [self.build(s) for s in config.index]
        self.query_stages = [self.build(s) for s in config.query]
        self._loader: Loader | None = None
        if self.index_stages and isinstance(self.index_stages[0], Loader):
            self._loader = self.index_stages[0]
        self.cache = ContentCache(Path(self.settings.data_dir) / "cache.sqlite") if self.settings.cache else None
        self.transform = Pipeline()  # type errors surface here, at assembly
        specs = config.index[1:] if self._loader else config.index
        for spec, stage in zip(specs, self.index_stages[len(self.index_stages) - len(specs) :], strict=True):
            if self.cache is not None and getattr(stage, "cache_fields", None):
                stage = CachedStage(stage, spec.use, self.cache)
            self.transform.add(stage)
        self.query_pipeline = Pipeline()
        for stage in self.query_stages:
            self.query_pipeline.add(stage)
        try:
            for stage in self.query_stages:
                stage.check()
        except PlmUserError as err:
            raise ConfigError(f"{config.path}: {err}") from None
        self._opened = False
        self._version: str | None = None  # the store version the query stages are warm for
        self._empty = False  # whether that version holds no chunk

    # ---------------------------------------------------------------- construction
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
        settings = settings or Settings()
        config = load_job(path, registry, list(overrides))
        if index_dir is None:
            index_dir = index_dir_for(config.job.name, settings.data_dir, dataset)
        return cls(config, Path(index_dir), settings, registry)

    def build(self, spec: StageSpec) -> Any:
        obj = spec.cls(spec.config)
        if not isinstance(obj, BaseComponent):
            raise ConfigError(f"{spec.label}: {spec.use} is not a plm component")
        _labelled(spec, obj)
        for key, value in spec.nested.items():
            if isinstance(value, dict):
                setattr(obj, key, {n: self.build(s) for n, s in value.items()})
            else:
                setattr(obj, key, self.build(value))
        obj.bind(self.context)
        return obj

    def open(self) -> Job:
        if not self._opened:
            self.index_dir.mkdir(parents=True, exist_ok=True)
            self.store.open(self.index_dir)
            self._opened = True
        return self

    def close(self) -> None:
        if self._opened:
            self.store.close()
            self._opened = False

    # ---------------------------------------------------------------- ingest
    def load(
        self, sources: Iterable[str | Path | Document | dict[str, Any]]
    ) -> tuple[list[Document], list[LoadFailure]]:
        """Documents from every source, plus the files (or records) that could not be read.

        A source that is itself unusable (a missing path) raises before anything changes;
        a second document with an id already seen is a failure, the first one wins.
        """
        docs: list[Document] = []
        failures: list[LoadFailure] = []
        # id -> where it was first claimed: by a document, or by a file that failed (whose
        # stored version must stay, not be replaced by a later source's file of that id).
        owner: dict[str, str] = {}

        def take(found: Sequence[Document], failed: Sequence[LoadFailure]) -> None:
            for d in found:
                if d.id in owner:
                    msg = f"duplicate document id {d.id!r} (also {owner[d.id]}, which keeps it)"
                    failures.append(LoadFailure(d.path or "records", msg, d.id))
                else:
                    owner[d.id] = d.path or "an earlier record"
                    docs.append(d)
            for f in failed:
                failures.append(f)
                if f.doc_id:
                    owner.setdefault(f.doc_id, f.path)

        for src in sources:
            if isinstance(src, Document):
                take([src], [])
            elif isinstance(src, dict):
                take([document_from_record(src)], [])
            else:
                if self._loader is None:
                    raise ConfigError(f"{self.config.path}: no loader stage in [index] to read {src}")
                self._loader.ensure_warm()
                take(*self._loader.load(str(src)))
        return docs, failures

    def index_fingerprint(self) -> str:
        """What every stored document depends on besides its own content: the index-side
        config and the embedding model actually loaded."""
        h = hashlib.sha256(FORMAT_VERSION.encode())
        spec = {"index": self.config.raw.get("index", {}), "embedder": self.config.raw.get("embedder", {})}
        h.update(json.dumps(spec, sort_keys=True, default=str).encode())
        if self.embedder is not None:
            self.embedder.ensure_warm()
            h.update(f"{self.embedder.model_name}\0{model_version(self.embedder)}".encode())
        return h.hexdigest()

    @staticmethod
    def doc_fingerprint(index_fp: str, doc: Document) -> str:
        h = hashlib.sha256(index_fp.encode())
        meta = json.dumps(dict(doc.metadata), sort_keys=True, default=str)
        for part in (doc.id, doc.title, doc.path, meta, doc.text):
            h.update(part.encode("utf-8", "surrogatepass") + b"\0")
        return h.hexdigest()

    def ingest(
        self,
        sources: Iterable[str | Path | Document | dict[str, Any]],
        force: bool = False,
        prune: bool = False,
    ) -> IngestReport:
        """Sync the index with the sources: new and changed documents are processed and
        stored (each document in one transaction with its chunks and vectors), unchanged
        ones skipped, and with `prune` stored documents the sources no longer yield are
        deleted. Derived indexes are rebuilt when anything changed. `force` re-processes
        every document and recomputes instead of reading the content cache.
        """
        self.open()
        sources = list(sources)
        report = IngestReport()
        start = t0 = time.perf_counter()
        docs, report.failed = self.load(sources)
        report.timings["load"] = time.perf_counter() - t0
        report.documents = len(docs)
        if not docs and not report.failed:
            raise PlmUserError("nothing to ingest: no documents found in the given sources")
        index_fp = self.index_fingerprint()
        fps = {d.id: self.doc_fingerprint(index_fp, d) for d in docs}
        stored = self.store.doc_fingerprints()
        stored_model = self.store.get_meta("model")
        # Fingerprints name the model, but vectors written by other means must not mix either.
        redo = force or (self.embedder is not None and stored_model not in (None, self.embedder.model_name))
        todo = [d for d in docs if redo or stored.get(d.id) != fps[d.id]]
        report.added = [d.id for d in todo if d.id not in stored]
        report.updated = [d.id for d in todo if d.id in stored]
        report.unchanged = len(docs) - len(todo)
        for stage in self.transform.stages:
            if isinstance(stage, CachedStage):
                stage.read = not force  # --force recomputes everything, refreshing the cache
        if todo:
            self._process(todo, fps, report, read_cache=not force)
        if prune:
            self._prune(sources, set(fps), report)
        if self.embedder is not None:
            self._complete_vectors(report, read_cache=not force)
        return self._finish(report, start)

    def _finish(self, report: IngestReport, start: float, rebuild: bool = False) -> IngestReport:
        """Rebuild the derived indexes if the store changed since they were built (or
        always, with `rebuild`), then fill in the report's totals."""
        with self.store.snapshot():
            if rebuild or not self._derived_ok(self.store.version()):
                t0 = time.perf_counter()
                self.rebuild_indexes(report)
                report.timings["rebuild indexes"] = time.perf_counter() - t0
            report.chunks = int(self.store.stats().get("chunks", 0))
        report.model = self.store.get_meta("model")
        report.seconds = time.perf_counter() - start
        return report

    def _prune(self, sources: Sequence[Any], yielded: set[str], report: IngestReport) -> None:
        """Delete stored documents these sources used to yield and no longer do: those whose
        stored path is one of the source paths or lies under one (documents from other
        folders are left alone), or path-less ones when in-memory records were given."""
        unknown = [f for f in report.failed if not f.doc_id]
        if unknown:  # a record that failed before its id was read may be a stored document
            report.notes.append(
                f"--prune skipped: {len(unknown)} failure(s) without a known document id; fix them and run again"
            )
            return
        # Absolute without following links, as loaders store paths: a stored path is only
        # in scope when it lies under a source path, from whatever directory this runs.
        roots = [Path(os.path.abspath(s)) for s in sources if isinstance(s, (str, Path))]
        records = any(isinstance(s, (Document, dict)) for s in sources)

        def covered(path: str) -> bool:
            if not path:
                return records
            p = Path(os.path.abspath(path))
            return any(p == root or root in p.parents for root in roots)

        keep = yielded | {f.doc_id for f in report.failed}
        gone = [doc_id for doc_id, path in self.store.doc_paths().items() if doc_id not in keep and covered(path)]
        if gone:
            report.deleted = self.store.delete_documents(gone)

    def _complete_vectors(self, report: IngestReport, read_cache: bool) -> None:
        """Embed stored chunks whose vector is missing, damaged or from another model: after
        a model change, documents this sync did not yield (other folders, files that failed)
        are re-embedded from their stored texts, so models never mix."""
        assert self.embedder is not None
        broken = self.store.chunks_needing_vectors(self.embedder.model_name)
        if broken:
            t0 = time.perf_counter()
            batch = self.settings.ingest_batch * 8
            for i in range(0, len(broken), batch):
                part = broken[i : i + batch]
                matrix = self._embed_chunks(part, report, read_cache)
                texts = [c.index_text for c in part]  # another process may replace a document meanwhile
                self.store.write_vectors([c.id for c in part], matrix, self.embedder.model_name, texts)
            report.timings["embed"] = report.timings.get("embed", 0.0) + time.perf_counter() - t0
            report.notes.append(f"re-embedded {len(broken)} stored chunks whose vectors were missing or stale")

    def _process(self, docs: list[Document], fps: dict[str, str], report: IngestReport, read_cache: bool) -> None:
        """Chunk, enrich and embed documents batch by batch; each batch is stored in one
        transaction, so an interrupted ingest keeps every batch before it."""
        size = self.settings.ingest_batch
        batches = [docs[i : i + size] for i in range(0, len(docs), size)]
        for batch in progress_iter(batches, "index", self.settings.progress, total_items=len(docs), unit="docs"):
            batch, chunks = self._transform(batch, report)
            matrix = None
            if self.embedder is not None and chunks:
                t0 = time.perf_counter()
                matrix = self._embed_chunks(chunks, report, read_cache)
                report.timings["embed"] = report.timings.get("embed", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()
            model = self.embedder.model_name if self.embedder is not None else None
            if batch:  # every document of it may have failed
                self.store.replace_documents(batch, chunks, matrix, model, [fps[d.id] for d in batch])
            report.timings["store"] = report.timings.get("store", 0.0) + time.perf_counter() - t0
        for stage in self.transform.stages:
            if isinstance(stage, CachedStage):
                report.work[stage.label] = {"computed": stage.misses, "cached": stage.hits}
                stage.hits = stage.misses = 0

    def _transform(self, batch: list[Document], report: IngestReport) -> tuple[list[Document], list[Chunk]]:
        """Chunks for a batch. When a stage fails on the batch, its documents are retried one
        by one and those that fail are reported (and not stored) while the rest go on;
        unless every one fails with the same unexpected error, which is then raised: that
        is a broken stage or environment, not bad documents."""
        if not self.transform.stages:
            return batch, []
        try:
            return batch, self._run_transform(batch, report)
        except PipelineError as err:
            first = err
        kept: list[Document] = []
        chunks: list[Chunk] = []
        unexpected: set[str] = set()
        for doc in batch:
            try:
                chunks.extend(self._run_transform([doc], report))
                kept.append(doc)
            except PipelineError as err:
                if not isinstance(err.cause, PlmUserError):
                    unexpected.add(type(err.cause).__name__)
                    log.warning("document %r failed", doc.id, exc_info=err.cause)
                report.failed.append(LoadFailure(doc.path or "records", str(err), doc.id))
        if not kept and len(batch) > 1 and len(unexpected) == 1 and not isinstance(first.cause, PlmUserError):
            raise first
        done = {d.id for d in kept}
        tried = {d.id for d in batch}
        report.added = [i for i in report.added if i in done or i not in tried]
        report.updated = [i for i in report.updated if i in done or i not in tried]
        return kept, chunks

    def _run_transform(self, docs: list[Document], report: IngestReport) -> list[Chunk]:
        result = self.transform.run(docs)
        for k, v in result.timings.items():
            report.timings[k] = report.timings.get(k, 0.0) + v
        return list(result.output)

    def _embed_chunks(self, chunks: Sequence[Any], report: IngestReport, read_cache: bool) -> Any:
        """Vectors for the chunks; only texts the cache lacks are embedded."""
        import numpy as np

        assert self.embedder is not None
        self.embedder.ensure_warm()
        texts = [c.index_text for c in chunks]
        work = report.work.setdefault("embed", {"computed": 0, "cached": 0})
        if self.cache is None:
            work["computed"] += len(texts)
            return self.embedder.embed(texts, progress=False)
        # Keyed by the model actually loaded, not the preference list that chose it.
        settings = self.embedder.config.model_dump(mode="json", exclude={"model"})
        identity = stage_identity(f"embed:{self.embedder.model_name}:{model_version(self.embedder)}", settings)
        keys = [content_key(identity, t) for t in texts]
        found = self.cache.get_many(keys) if read_cache else {}
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            new = self.embedder.embed([texts[first[k]] for k in todo], progress=False)
            fresh = {k: np.asarray(new[j], dtype=np.float32).tobytes() for j, k in enumerate(todo)}
            self.cache.put_many(fresh.items())
            found.update(fresh)
        work["computed"] += len(todo)
        work["cached"] += len(keys) - len(todo)
        return np.stack([np.frombuffer(found[k], dtype=np.float32) for k in keys])

    def delete(self, doc_ids: Sequence[str]) -> IngestReport:
        """Remove documents (one transaction) and rebuild the derived indexes."""
        self.open()
        start = time.perf_counter()
        return self._finish(IngestReport(deleted=self.store.delete_documents(doc_ids)), start)

    def rebuild(self, report: IngestReport | None = None) -> IngestReport:
        """Regenerate everything derived from the stored chunks: vectors that are missing,
        damaged or from another model (re-embedded, through the cache), then every index."""
        self.open()
        report = report or IngestReport()
        start = time.perf_counter()
        if self.embedder is not None:
            self._complete_vectors(report, read_cache=True)
        return self._finish(report, start, rebuild=True)

    def rebuild_indexes(self, report: IngestReport | None = None) -> None:
        """Rebuild every retrieval index from what the store holds (call inside a snapshot)."""
        with self.store.snapshot():
            problems = self.store.consistency_problems()
            if self.embedder is None:  # vectors are not used: leftovers of another config do not matter
                problems = [p for p in problems if "vector" not in p]
            if problems:
                raise StoreError(
                    f"the store in {self.index_dir} is inconsistent ({'; '.join(problems)}): run `plm ingest` "
                    "on the same sources to finish, or `plm index rebuild`"
                )
            version = self.store.version()
            chunks = self.store.chunks()
            matrix = self.store.vectors()[1] if self.embedder is not None else None
            for stage in self.query_stages:
                builder = getattr(stage, "build_indexes", None)
                if builder is not None:
                    for name, seconds in builder(chunks, matrix, version).items():
                        if report is not None:
                            report.timings[name] = seconds
            self._version, self._empty = version, not chunks

    def _derived_ok(self, version: str) -> bool:
        return all(getattr(stage, "indexes_ok", lambda v: True)(version) for stage in self.query_stages)

    # ---------------------------------------------------------------- query
    def search(
        self, query: str | Query, k: int = 5, filters: dict[str, Any] | None = None
    ) -> tuple[Ranking, dict[str, float]]:
        """Run the query pipeline; returns the ranking and per-stage seconds."""
        self.open()
        q = query if isinstance(query, Query) else Query(text=query, k=k, filters=filters)
        # One snapshot per query: another process may be ingesting; this query sees the
        # state of one moment, and a newer corpus version re-warms the indexes first.
        with self.store.snapshot():
            version = self.store.version()
            if version != self._version:
                for stage in self.query_stages:
                    if hasattr(stage, "build_indexes"):
                        stage.reset()
                self._version, self._empty = version, int(self.store.stats().get("chunks", 0)) == 0
            if self._empty:
                raise StoreError(f"the index at {self.index_dir} is empty: run `plm ingest` or `plm run` first")
            try:
                result = self.query_pipeline.run(q)
            except PipelineError as err:
                if isinstance(err.cause, PlmUserError):
                    raise err.cause from None
                raise
        ranking = result.output
        if not isinstance(ranking, Ranking):
            raise ConfigError(f"{self.config.path}: the last [query] stage must produce a ranking of hits")
        return ranking, dict(result.timings)

    def retrieve(self, query: str | Query, k: int = 5, filters: dict[str, Any] | None = None) -> list[Hit]:
        return list(self.search(query, k, filters)[0].hits)


def model_version(embedder: Any) -> str:
    """Where the loaded weights live and when they last changed: a model retrained in place
    or a new hub snapshot gets new cache keys, never another model's vectors."""
    path = getattr(embedder, "model_path", None)
    if path is None:
        return ""
    path = Path(path)
    files = [p for p in path.iterdir() if p.is_file()] if path.is_dir() else []
    return f"{path.resolve()}@{max((p.stat().st_mtime_ns for p in files), default=0)}"


def index_dir_for(job_name: str, data_dir: str, dataset: str | Path | None) -> Path:
    """One index per job, plus one per named dataset given with --dataset."""
    base = Path(data_dir) / job_name
    return base if dataset is None else Path(f"{base}-{Path(dataset).resolve().name}")


def document_from_record(rec: dict[str, Any], text_field: str = "text") -> Document:
    if "id" not in rec and "_id" not in rec:
        raise PlmUserError(f"record has no 'id' or '_id': {str(rec)[:80]}")
    if text_field not in rec:
        raise PlmUserError(f"record {rec.get('id', rec.get('_id'))!r} has no {text_field!r} field")
    return Document(
        id=str(rec.get("id", rec.get("_id"))),
        text=str(rec[text_field]),
        title=str(rec.get("title", "")),
        metadata=dict(rec.get("metadata") or {}),
    )
