"""A job: one config turned into live components over one index folder.

`Job.open(config).ingest(paths)` builds the index; `.retrieve(text, k)` queries it. The
store holds everything; derived indexes (BM25, vector matrix) are rebuilt from it.
"""

from __future__ import annotations

import hashlib
import json
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
from plm_core.records import Document, Hit, Query
from plm_core.registry import Registry, default_registry
from plm_core.settings import Settings

INGEST_BATCH_DOCS = 64
FORMAT_VERSION = "1"


@dataclass
class IngestReport:
    documents: int = 0
    chunks: int = 0
    skipped: bool = False
    model: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # stage label -> {"computed": n, "cached": n}: what the content cache saved
    work: dict[str, dict[str, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "model": self.model,
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
        self._checked_nonempty = False

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
    def load(self, sources: Iterable[str | Path | Document | dict[str, Any]]) -> list[Document]:
        docs: list[Document] = []
        for src in sources:
            if isinstance(src, Document):
                docs.append(src)
            elif isinstance(src, dict):
                docs.append(document_from_record(src))
            else:
                if self._loader is None:
                    raise ConfigError(f"{self.config.path}: no loader stage in [index] to read {src}")
                self._loader.ensure_warm()
                docs.extend(self._loader.run(str(src)))
        seen: set[str] = set()
        for d in docs:
            if d.id in seen:
                raise PlmUserError(f"duplicate document id {d.id!r} (from {d.path or 'records'})")
            seen.add(d.id)
        return docs

    def fingerprint(self, docs: Sequence[Document]) -> str:
        h = hashlib.sha256(FORMAT_VERSION.encode())
        spec_json = json.dumps(
            {"index": self.config.raw.get("index", {}), "embedder": self.config.raw.get("embedder", {})},
            sort_keys=True,
            default=str,
        )
        h.update(spec_json.encode())
        for d in docs:
            meta = json.dumps(dict(d.metadata), sort_keys=True, default=str)
            for part in (d.id, d.title, d.path, meta, d.text):
                h.update(part.encode() + b"\0")
        return h.hexdigest()

    def ingest(self, sources: Iterable[str | Path | Document | dict[str, Any]], force: bool = False) -> IngestReport:
        """Index the sources, replacing what the store held; skipped when nothing changed."""
        self.open()
        report = IngestReport()
        t0 = time.perf_counter()
        docs = self.load(sources)
        report.timings["load"] = time.perf_counter() - t0
        report.documents = len(docs)
        if not docs:
            raise PlmUserError("nothing to ingest: no documents found in the given sources")
        fp = self.fingerprint(docs)
        if not force and self.store.get_meta("fingerprint") == fp and self._same_model():
            # Same files, same index-side config: only indexes built with other settings
            # (e.g. a BM25 tokenizer changed in [query]) need work, and they come from the store.
            if not self._derived_ok():
                t0 = time.perf_counter()
                self.rebuild_indexes(report)
                report.timings["rebuild indexes"] = time.perf_counter() - t0
            report.skipped = True
            report.chunks = int(self.store.stats().get("chunks", 0))
            report.model = self.store.get_meta("model")
            return report
        self.store.set_meta("fingerprint", "")
        self.store.clear()
        for stage in self.transform.stages:
            if isinstance(stage, CachedStage):
                stage.read = not force  # --force recomputes everything, refreshing the cache
        batches = [docs[i : i + INGEST_BATCH_DOCS] for i in range(0, len(docs), INGEST_BATCH_DOCS)]
        show = self.settings.progress
        for batch in progress_iter(batches, "enrich", show, total_items=len(docs), unit="docs"):
            result = self.transform.run(batch) if self.transform.stages else None
            chunks = result.output if result else []
            if result:
                for k, v in result.timings.items():
                    report.timings[k] = report.timings.get(k, 0.0) + v
            t1 = time.perf_counter()
            self.store.write_batch(batch, chunks)
            report.timings["store"] = report.timings.get("store", 0.0) + time.perf_counter() - t1
            report.chunks += len(chunks)
        for stage in self.transform.stages:
            if isinstance(stage, CachedStage):
                report.work[stage.label] = {"computed": stage.misses, "cached": stage.hits}
                stage.hits = stage.misses = 0
        self._build_derived(report, read_cache=not force)
        self.store.set_meta("fingerprint", fp)
        return report

    def _build_derived(self, report: IngestReport, read_cache: bool) -> None:
        chunks = self.store.chunks()
        matrix = None
        if self.embedder is not None:
            t0 = time.perf_counter()
            matrix = self._embed_chunks(chunks, report, read_cache)
            report.timings["embed"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            self.store.write_vectors([c.id for c in chunks], matrix, self.embedder.model_name)
            report.timings["store"] = report.timings.get("store", 0.0) + time.perf_counter() - t0
            report.model = self.embedder.model_name
        self.rebuild_indexes(report, chunks, matrix)

    def _embed_chunks(self, chunks: Sequence[Any], report: IngestReport, read_cache: bool) -> Any:
        """Vectors for every chunk; only texts the cache lacks are embedded, in one call."""
        import numpy as np

        assert self.embedder is not None
        self.embedder.ensure_warm()
        texts = [c.index_text for c in chunks]
        if self.cache is None:
            report.work["embed"] = {"computed": len(texts), "cached": 0}
            return self.embedder.embed(texts, progress=self.settings.progress)
        # Keyed by the model actually loaded, not the preference list that chose it.
        settings = self.embedder.config.model_dump(mode="json", exclude={"model"})
        identity = stage_identity(f"embed:{self.embedder.model_name}:{model_version(self.embedder)}", settings)
        keys = [content_key(identity, t) for t in texts]
        found = self.cache.get_many(keys) if read_cache else {}
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            new = self.embedder.embed([texts[first[k]] for k in todo], progress=self.settings.progress)
            fresh = {k: np.asarray(new[j], dtype=np.float32).tobytes() for j, k in enumerate(todo)}
            self.cache.put_many(fresh.items())
            found.update(fresh)
        report.work["embed"] = {"computed": len(todo), "cached": len(keys) - len(todo)}
        return np.stack([np.frombuffer(found[k], dtype=np.float32) for k in keys]) if keys else np.zeros((0, 0), "f4")

    def rebuild_indexes(self, report: IngestReport | None = None, chunks: Any = None, matrix: Any = None) -> None:
        """Rebuild every retrieval index from what the store holds (or was just given)."""
        chunks = self.store.chunks() if chunks is None else chunks
        if matrix is None:
            _, matrix, _ = self.store.vectors()
        for stage in self.query_stages:
            builder = getattr(stage, "build_indexes", None)
            if builder is not None:
                for name, seconds in builder(chunks, matrix).items():
                    if report is not None:
                        report.timings[name] = seconds
        self.store.set_meta("indexes_version", self.store.get_meta("corpus_version") or "")

    def _same_model(self) -> bool:
        """False when the embedder now loads another model than the stored vectors came from
        (e.g. BGE became available after an offline ingest with the MiniLM fallback)."""
        if self.embedder is None:
            return True
        self.embedder.ensure_warm()
        return self.store.get_meta("model") == self.embedder.model_name

    def _derived_ok(self) -> bool:
        return all(getattr(stage, "indexes_ok", lambda: True)() for stage in self.query_stages) and self.store.get_meta(
            "indexes_version"
        ) == (self.store.get_meta("corpus_version") or "")

    # ---------------------------------------------------------------- query
    def search(
        self, query: str | Query, k: int = 5, filters: dict[str, Any] | None = None
    ) -> tuple[Ranking, dict[str, float]]:
        """Run the query pipeline; returns the ranking and per-stage seconds."""
        self.open()
        if not self._checked_nonempty:
            if int(self.store.stats().get("chunks", 0)) == 0:
                raise StoreError(f"the index at {self.index_dir} is empty: run `plm ingest` or `plm run` first")
            self._checked_nonempty = True
        q = query if isinstance(query, Query) else Query(text=query, k=k, filters=filters)
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


def resolve_dataset(config: JobConfig, dataset: str | Path | None) -> Path | None:
    """The dataset folder: the CLI's --dataset, else [job].dataset relative to the config."""
    if dataset is not None:
        path = Path(dataset)
    elif config.job.dataset:
        path = (config.path.parent / config.job.dataset).resolve()
    else:
        return None
    if not path.is_dir():
        raise PlmUserError(f"dataset folder not found: {path}")
    return path


def resolve_corpus(config: JobConfig, dataset: Path, corpus: str | None = None) -> Path:
    """What the loader reads inside a dataset: --corpus, else the first of [job].corpus that exists."""
    candidates = [corpus] if corpus else list(config.job.corpus)
    for cand in candidates:
        if (dataset / cand).exists():
            return dataset / cand
    raise PlmUserError(f"none of {candidates} exists in dataset {dataset}; pass --corpus SUBPATH")
