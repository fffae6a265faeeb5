"""Immutable records that flow between stages (nothing is mutated in place, so a stage can
be re-run or cached on its input alone), and the plain values of the index runtime."""

from __future__ import annotations

import copyreg
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypedDict

EMPTY: Mapping[str, Any] = MappingProxyType({})


def read_only(items: dict[Any, Any]) -> Mapping[Any, Any]:
    """A read-only view of a new dict (how records hold mappings)."""
    return MappingProxyType(items)


def _pickle_mapping_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[Any, ...]]:
    return read_only, (dict(proxy),)


# Records cross process boundaries (an executor's workers, multiprocessing stages), and
# their read-only mappings are MappingProxyType, which pickle refuses by default.
copyreg.pickle(MappingProxyType, _pickle_mapping_proxy)


@dataclass(frozen=True)
class Document:
    """One source document (a Markdown file, a JSON record)."""

    id: str
    text: str
    title: str = ""
    path: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True)
class Converted:
    """What a converter makes of one file: its text as Markdown (headings as `#` lines, so
    one chunker gives every format its heading paths; code in fences), the title ("": the
    file's own rule), metadata such as `author` and `date` (filterable, as front matter is),
    and, for a paged format, a form feed (`\\f`) before each page after the first: a chunk
    then knows its page (`page` in its metadata)."""

    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True)
class LoadFailure:
    """A file (or record) a loader could not turn into a document, and why; `doc_id` when
    known (e.g. the file stem), so a sync keeps the stored document instead of pruning it.
    `emptied`: the file is there but holds no text, so its stored document (if any) is
    removed rather than kept: a user who empties a file wants its old text gone."""

    path: str
    error: str
    doc_id: str = ""
    emptied: bool = False


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
    """A user query: how many hits are wanted (`k`) and how many candidates retrieval
    should pass on (`depth`, at least k: stages after retrieval, e.g. a reranker, may ask
    for more; the core cuts to k once, at the end)."""

    text: str
    k: int = 5
    filters: Mapping[str, Any] | None = None
    id: str = ""
    depth: int = 0
    # Per-query fusion weights, source label -> weight (e.g. {"dense": 0.3, "bm25": 1.0}, a
    # UI's keyword/semantic slider): they replace the profile's weights for the sources they
    # name, for this query only. None: the profile's.
    weights: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.k, int) and isinstance(self.depth, int) and self.depth < self.k:
            object.__setattr__(self, "depth", self.k)


@dataclass(frozen=True)
class ExpandedQuery(Query):
    """A query after expansion; `text` is the expanded text."""

    original: str = ""
    fired: tuple[str, ...] = ()
    # The fusion profile the expander asks for ("" = the fuser's default), e.g. "expanded",
    # which the dictionary expander asks for when a trigger fired; the fuser's config maps
    # names to settings.
    profile: str = ""
    # More texts to retrieve for besides `text` (an LLM rewriter's alternative queries): the
    # hybrid stage retrieves and fuses for each, then combines the lists by RRF. () = just `text`.
    alternatives: tuple[str, ...] = ()

    @property
    def expanded(self) -> bool:
        return bool(self.fired)

    @classmethod
    def of(cls, query: Query) -> ExpandedQuery:
        """`query` as an ExpandedQuery (unchanged when it already is one)."""
        if isinstance(query, ExpandedQuery):
            return query
        return cls(**{f.name: getattr(query, f.name) for f in dataclasses.fields(Query)}, original=query.text)


@dataclass(frozen=True)
class EmbeddedQuery(ExpandedQuery):
    """An expanded query with its embedding (a normalised float32 vector)."""

    vector: Any = field(default=None, repr=False)  # a printed ranking shows no 384 floats
    model: str = ""

    @classmethod
    def with_vector(cls, query: Query, vector: Any, model: str) -> EmbeddedQuery:
        q = ExpandedQuery.of(query)
        fields = {f.name: getattr(q, f.name) for f in dataclasses.fields(ExpandedQuery)}
        return cls(**fields, vector=vector, model=model)


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk id with a score from one source, rank 0-based within it (hits shown to users count from 1)."""

    chunk_id: str
    score: float
    source: str
    rank: int


@dataclass(frozen=True)
class FusionConfig:
    """The fusion settings chosen for one query: candidates per source, the weight of each
    source, and the fuser's own parameters (e.g. RRF's `k`)."""

    candidates: int
    weights: Mapping[str, float] = field(default_factory=lambda: EMPTY)
    profile: str = "default"
    params: Mapping[str, Any] = field(default_factory=lambda: EMPTY)


class SourceScore(TypedDict):
    """A hit's rank (from 1) and score among one source's candidates: `hit.sources["bm25"]`
    is `{"rank": 1, "score": 8.41}`, the same object in Python as in the JSON of
    `plm query --json` and the service, so one piece of code reads either."""

    rank: int
    score: float


@dataclass(frozen=True)
class Hit:
    """One result with everything a caller needs to show or judge it. Ranks a user sees
    count from 1, everywhere: `rank` (1 = best) and each source's rank in `sources`."""

    chunk_id: str
    doc_id: str
    score: float
    rank: int
    text: str = ""
    heading_path: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: EMPTY)
    # source name -> {"rank": 1-based rank, "score": score} within that source's candidates
    sources: Mapping[str, SourceScore] = field(default_factory=lambda: EMPTY)

    def as_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready data (what `plm query --json` and the service print)."""
        return {
            "rank": self.rank,
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "title": str(self.metadata.get("title", "")),
            "score": self.score,
            "heading_path": list(self.heading_path),
            "sources": {name: {"rank": int(s["rank"]), "score": float(s["score"])} for name, s in self.sources.items()},
            "metadata": dict(self.metadata),
            "text": self.text,
        }


@dataclass(frozen=True)
class Ranking:
    """A query with its ranked hits: what retrieval, reranking and evaluation pass on."""

    query: ExpandedQuery
    hits: tuple[Hit, ...]
    fusion: FusionConfig | None = None


@dataclass(frozen=True)
class PipelineResult:
    """The output of a pipeline run plus wall time per stage, in seconds."""

    output: Any
    timings: Mapping[str, float]


# ---------------------------------------------------------------- plain values of the index runtime
@dataclass(frozen=True)
class CorpusVersion:
    """One committed state of one store. `counter` orders a store's states; `nonce` is new
    with every change, so a store restored from a backup never matches an index built for
    the state it reaches again later; `store_id` is new for every store created."""

    store_id: str
    counter: int
    nonce: str = ""

    @property
    def token(self) -> str:
        """The version as one string, "<store_id>:<nonce>.<counter>" (what index builds record)."""
        return f"{self.store_id}:{self.nonce}.{self.counter}"

    def __str__(self) -> str:
        return self.token


@dataclass(frozen=True)
class StoreProblem:
    """A broken store invariant: `kind` is one of the constants below."""

    kind: str
    count: int
    message: str

    ORPHAN_CHUNKS = "orphan_chunks"  # chunks whose document is gone
    MISSING_VECTORS = "missing_vectors"  # some chunks have vectors, these have none
    MIXED_MODELS = "mixed_models"  # vectors from more than one model

    @property
    def about_vectors(self) -> bool:
        """A problem only a config that uses vectors cares about."""
        return self.kind in (self.MISSING_VECTORS, self.MIXED_MODELS)

    def __str__(self) -> str:
        return self.message


@dataclass
class BatchResult:
    """A processed batch: the documents that made it with their chunks and vectors, and those that failed."""

    documents: list[Document]
    chunks: list[Chunk]
    vectors: Any = None
    failed: list[LoadFailure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    # stage label -> (computed, cached) for this batch: what the content cache saved
    work: dict[str, tuple[int, int]] = field(default_factory=dict)
    # the embedding model that gave `vectors` ("": none, or the committing process's)
    model: str = ""
