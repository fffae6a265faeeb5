"""Immutable records that flow between stages.

Every stage takes one of these (or a list of them) and returns another; nothing is
mutated in place, so a stage can be re-run or cached on its input alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class Document:
    """One source document (a Markdown file, a JSON record)."""

    id: str
    text: str
    title: str = ""
    path: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True)
class LoadFailure:
    """A file (or record) a loader could not turn into a document, and why.

    `doc_id` is set when the id is known (e.g. the file stem), so a sync keeps the stored
    version of that document instead of pruning it.
    """

    path: str
    error: str
    doc_id: str = ""


@dataclass(frozen=True)
class Chunk:
    """A retrievable span of a document, plus what enrichment added to it."""

    id: str
    doc_id: str
    text: str
    heading_path: tuple[str, ...] = ()
    start_char: int = 0
    end_char: int = 0
    stable_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    keywords: tuple[str, ...] = ()
    # label -> values, labels in first-seen order
    entities: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: EMPTY)
    # The text both indexes are built from; None means "use text".
    enriched: str | None = None

    @property
    def index_text(self) -> str:
        return self.text if self.enriched is None else self.enriched


@dataclass(frozen=True)
class Query:
    """A user query and how many hits are wanted."""

    text: str
    k: int = 5
    filters: Mapping[str, Any] | None = None
    id: str = ""


@dataclass(frozen=True)
class ExpandedQuery(Query):
    """A query after expansion; `text` is the expanded text."""

    original: str = ""
    fired: tuple[str, ...] = ()

    @property
    def expanded(self) -> bool:
        return bool(self.fired)

    @classmethod
    def of(cls, query: Query) -> ExpandedQuery:
        """`query` as an ExpandedQuery (unchanged when it already is one)."""
        if isinstance(query, ExpandedQuery):
            return query
        return cls(text=query.text, k=query.k, filters=query.filters, id=query.id, original=query.text)


# The POC's name for a query rewritten before retrieval.
RewrittenQuery = ExpandedQuery


@dataclass(frozen=True)
class EmbeddedQuery(ExpandedQuery):
    """An expanded query with its embedding (a normalised float32 vector)."""

    vector: Any = None
    model: str = ""

    @classmethod
    def with_vector(cls, query: Query, vector: Any, model: str) -> EmbeddedQuery:
        q = ExpandedQuery.of(query)
        return cls(
            text=q.text,
            k=q.k,
            filters=q.filters,
            id=q.id,
            original=q.original,
            fired=q.fired,
            vector=vector,
            model=model,
        )


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk id with a score from one source, rank 0-based within that source."""

    chunk_id: str
    score: float
    source: str
    rank: int


@dataclass(frozen=True)
class FusionConfig:
    """The fusion settings chosen for one query."""

    rrf_k: float
    weights: Mapping[str, float]
    candidates: int
    profile: str = "default"


@dataclass(frozen=True)
class Hit:
    """One fused result with everything a caller needs to show or judge it."""

    chunk_id: str
    doc_id: str
    score: float
    rank: int
    text: str = ""
    heading_path: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    # source name -> (0-based rank, score) within that source's candidates
    sources: Mapping[str, tuple[int, float]] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True)
class PipelineResult:
    """The output of a pipeline run plus wall time per stage, in seconds."""

    output: Any
    timings: Mapping[str, float]
