"""Assembly: a validated job config -> live components, with every slot checked by type.

The config loader already checked each slot's kind (`[store]` a Store, `[embedder]` an
Embedder, nested parts what their owner's `parts` declares). Here: `[index.*]` is an
optional loader then stages that turn documents into chunks, `[query.*]` stages end in a
ranking, and every component's `check()` passes. Components get what they `need` through
their constructor. So `plm config check` fails before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plm_core.component import BaseComponent, fits, type_name
from plm_core.config import JobConfig, StageSpec
from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Chunker, Converter, Embedder, Executor, Loader, Retriever, Store
from plm_core.pipeline import Pipeline, stage_name
from plm_core.records import Chunk, Document, Ranking
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.cache import CachedStage, ContentCache
from plm_index.documents import DocumentFields
from plm_index.search import CorpusView, SingleRetrieval

# What a slot holds, in words, for error messages.
KINDS: dict[type, str] = {
    Store: "store",
    Embedder: "embedder",
    Loader: "loader",
    Retriever: "retriever",
    Executor: "executor",
}


@dataclass
class Assembly:
    """The live parts of a job."""

    store: Store
    embedder: Embedder | None
    loader: Loader | None
    transform: Pipeline  # documents -> chunks (cacheable stages behind the content cache)
    query_stages: list[Any]
    corpus: CorpusView
    executor: Executor | None = None  # None: process in this process
    built: dict[str, Any] = field(default_factory=dict)  # each config table's label -> its component


def _kind(base: type) -> str:
    return KINDS.get(base) or str(getattr(base, "family", base.__name__))


class Assembler:
    """Builds one job's components from its config."""

    def __init__(self, config: JobConfig, registry: Registry | None, settings: Settings, location: Path) -> None:
        self.config, self.registry, self.settings = config, registry, settings
        self.path = config.path
        self.resources: dict[str, Any] = {"settings": settings, "config_dir": config.path.parent, "embedder": None}
        self.location = location
        self.built: dict[str, Any] = {}

    def build(self, spec: StageSpec) -> Any:
        cls = spec.cls
        if not (isinstance(cls, type) and issubclass(cls, BaseComponent)):
            raise ConfigError(f"{self.path} [{spec.label}]: {spec.use!r} is not a plm component")
        if "converters" in cls.needs and "converters" not in self.resources:
            found = self.registry.all() if self.registry is not None else []
            self.resources["converters"] = {r.name: r for r in found if issubclass(r.cls, Converter)}
        kwargs = {need: self.resources[need] for need in cls.needs}
        for key in spec.nested:
            if key not in cls.parts:
                raise ConfigError(f"{self.path} [{spec.label}.{key}]: {spec.use!r} takes no component table here")
        for key, base in cls.parts.items():
            nested = spec.nested.get(key)
            field = type(spec.config).model_fields.get(key)
            if nested is None and field is not None and not field.is_required():
                continue  # left to its default, which the component resolves (bm25s's tokenizer)
            if nested is None:
                raise ConfigError(
                    f"{self.path} [{spec.label}]: {spec.use!r} needs [{spec.label}.{key}] table(s) naming a "
                    f"{_kind(base)} (see `plm plugins`)"
                )
            if isinstance(nested, Mapping):
                kwargs[key] = {name: self.build(part) for name, part in nested.items()}
            else:
                kwargs[key] = self.build(nested)
        self.built[spec.label] = cls(spec.config, label=spec.label.rsplit(".", 1)[-1], **kwargs)
        return self.built[spec.label]

    def assemble(self, cache: ContentCache | None, embedder: Embedder | None = None) -> Assembly:
        """Build every component; `embedder`, when given, is used instead of building the
        config's (a service shares one loaded model between its jobs)."""
        cfg = self.config
        store: Store = self.build(cfg.store)
        if cfg.embedder is None:
            embedder = None
        elif embedder is None:
            embedder = self.build(cfg.embedder)
        self.resources.update(embedder=embedder, corpus=CorpusView(store, self.location))
        loader, transform = self._index_side(cache)
        query = [self._query_stage(spec) for spec in cfg.query]
        executor = self.build(cfg.executor) if cfg.executor is not None else None
        assembly = Assembly(store, embedder, loader, transform, query, self.resources["corpus"], executor, self.built)
        self._check(assembly)
        return assembly

    def _index_side(self, cache: ContentCache | None) -> tuple[Loader | None, Pipeline]:
        specs = list(self.config.index)
        loader = None
        if specs and issubclass(specs[0].cls, Loader):
            loader = self.build(specs.pop(0))
        transform = Pipeline()
        produced: Any = list[Document]
        for spec in specs:
            wrong = [base for base in KINDS if issubclass(spec.cls, base)]
            if wrong:
                raise ConfigError(
                    f"{self.path} [{spec.label}]: {spec.use!r} is a {_kind(wrong[0])}; [index] tables after the "
                    "loader turn documents into chunks (chunkers, extractors, enrichers)"
                )
            stage = self.build(spec)
            if not fits(produced, stage.input_type):
                raise ConfigError(
                    f"{self.path} [{spec.label}]: {spec.use!r} ({spec.family}) takes {type_name(stage.input_type)} but "
                    f"receives {type_name(produced)}"
                    + ('; put a chunker first, e.g. use = "markdown_semantic"' if produced == list[Document] else "")
                )
            if cache is not None and tuple(getattr(stage, "cache_fields", ())):
                stage = CachedStage(stage, spec.use, cache)
            elif isinstance(stage, Chunker):  # its chunks carry their document's fields from here on
                stage = DocumentFields(stage)
            transform.add(stage)
            produced = stage.output_type
        if self.config.index and not fits(produced, list[Chunk]):
            raise ConfigError(
                f"{self.path}: the [index] stages must end in chunks, but they end in {type_name(produced)}: add a "
                'chunker, e.g. [index.chunk] use = "markdown_semantic"'
            )
        return loader, transform

    def _query_stage(self, spec: StageSpec) -> Any:
        if issubclass(spec.cls, (Loader, Store, Embedder, Executor)):
            raise ConfigError(f"{self.path} [{spec.label}]: {spec.use!r} ({spec.family}) cannot be a query stage")
        stage = self.build(spec)
        if isinstance(stage, Retriever):  # a bare retriever is the whole retrieval stage
            stage = SingleRetrieval(label=stage.label, retriever=stage, corpus=self.resources["corpus"])
        return stage

    def _check(self, assembly: Assembly) -> None:
        first = assembly.query_stages[0] if assembly.query_stages else None
        if first is not None and fits(first.input_type, Ranking):  # named from its own side, not the next's
            raise ConfigError(
                f"{self.path} [query.{first.label}]: {stage_name(first)} takes {type_name(first.input_type)}, "
                "but the [query] stages start from the query: a stage that takes a ranking goes after "
                "[query.retrieve]"
            )
        pipeline = Pipeline()
        try:
            for stage in assembly.query_stages:
                pipeline.add(stage)
        except PlmUserError as err:
            raise ConfigError(f"{self.path} [query]: {err}") from None
        if not fits(pipeline.output_type, Ranking):
            raise ConfigError(
                f"{self.path}: the last [query] stage must produce a ranking of hits, but "
                f"{assembly.query_stages[-1].label!r} produces {type_name(pipeline.output_type)}; end with a "
                'retrieval stage, e.g. [query.retrieve] use = "hybrid"'
            )
        parts = [assembly.store, *([assembly.embedder] if assembly.embedder else []), *assembly.query_stages]
        parts += [assembly.loader] if assembly.loader else []
        parts += [assembly.executor] if assembly.executor else []
        parts += [getattr(s, "stage", s) for s in assembly.transform.stages]
        try:
            for part in parts:
                for component in part.components():
                    component.check()
        except PlmUserError as err:
            raise ConfigError(f"{self.path}: {err}") from None
