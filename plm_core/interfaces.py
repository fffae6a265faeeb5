"""Base classes for each family of stage, and the contracts between the runtime and them.
A plugin subclasses one base and writes its abstract methods (a missing one fails when the
class is defined). Arrays are numpy at run time, typed `Any` here (no numpy in the kernel)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from plm_core.component import BaseComponent, refuse_missing
from plm_core.errors import ConfigError
from plm_core.protocols import BatchProcessor, ProcessorFactory, Snapshot
from plm_core.records import (
    BatchResult,
    Chunk,
    Converted,
    CorpusVersion,
    Document,
    ExpandedQuery,
    FusionConfig,
    LoadFailure,
    Query,
    Ranking,
    ScoredChunk,
)

# The store's base lives in its own module (with its parts); it stays importable from here.
from plm_core.store_contract import Store  # noqa: F401 - re-exported


class Loader(BaseComponent[str, list[Document]]):
    """A path (file or folder) -> documents, in a stable order."""

    family = "loaders"
    input_type = str
    output_type = list[Document]
    # Config keys that only choose which files are read (a glob, an exclude list): changing
    # them re-processes no document, since a document's own fingerprint covers what it is.
    selection_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # `load` or `run` (either reads a source); `load_files` where `files` lists
            missing = ["load"] if cls.load is Loader.load and cls.run is Loader.run else []
            if cls.files is not Loader.files and cls.load_files is Loader.load_files:
                missing.append("load_files")
            refuse_missing(cls, missing)

    def load(self, source: str) -> tuple[list[Document], list[LoadFailure]]:
        """Documents plus one failure per file (or record) that could not be read. Raises
        PlmUserError only when `source` itself is unusable (missing, no matching files): an
        ingest then stops before changing anything. The default: whatever `run` raises stops it."""
        return self.run(source), []

    def files(self, folder: str) -> tuple[list[str], list[LoadFailure]] | None:
        """A loader that reads one document per file may list the files `load(folder)` reads
        (absolute, sorted) without reading them, with a failure per subfolder it could not
        list: a sync then reads only files whose size or modification time changed, and
        prunes only documents whose files are gone. None (the default): every sync reads
        the whole source."""
        return None

    def load_files(self, root: str, files: Sequence[str]) -> tuple[list[Document], list[LoadFailure]]:
        """These files (from `files(root)`, or under `root`) as `load(root)` would give them,
        ids relative to `root`. Only called on loaders whose `files` lists."""
        raise NotImplementedError

    def unread(self) -> Mapping[str, list[str]]:
        """The files the last `files()` passed over because nothing reads their format, by
        extension (`".png"` -> their paths from the folder): an ingest counts them."""
        return {}

    def reads_with(self) -> Mapping[str, str]:
        """What decides the documents besides the files and this loader's config (each
        converter's version): when it changes, every file is read again."""
        return {}


class Converter(BaseComponent[bytes, Converted]):
    """A file format -> Markdown text with its structure: write `convert`. `extensions`
    names the files it reads (lower case, with the dot: `(".pdf",)`); the `folder` loader
    gives every file of those extensions to it, read whole and within the loader's
    `max_file_mb`. A file it cannot use raises PlmUserError saying why (`encrypted: ...`);
    any other exception is reported as that file's failure too, and the other files go on.
    Where two converters read one extension, a third party's wins over a built-in."""

    family = "converters"
    input_type = bytes
    output_type = Converted
    extensions: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def convert(self, data: bytes, path: str) -> Converted:
        """The file's bytes (`path` names it, for messages) as Markdown text and structure."""

    def version(self) -> str:
        """What decides the text besides the file and this converter's settings, e.g. the
        library's version: when it changes, every file is converted again."""
        return ""

    def run(self, data: bytes) -> Converted:
        return self.convert(data, "")


class Chunker(BaseComponent[list[Document], list[Chunk]]):
    """Documents -> chunks, the units retrieval ranks: write `run`. Each chunk names its
    document (`doc_id`), has text and an id unique in the store; a document's chunks come
    together, in reading order (`start_char`), documents in the order given; and a document's
    chunks are the same whatever else is in the batch (a sync retries a failed batch one
    document at a time). `plm.testing.check_chunker` checks each rule."""

    family = "chunkers"
    input_type = list[Document]
    output_type = list[Chunk]

    @abstractmethod
    def run(self, data: list[Document]) -> list[Chunk]:
        """These documents' chunks. The runtime gives each chunk its document's metadata and
        `title` (a key the chunk sets itself wins), so filters on front matter find it."""


class ChunkTransform(BaseComponent[list[Chunk], list[Chunk]]):
    """Keyword/entity extractors and enrichers: chunks in, new chunks out (same order). One
    listing the Chunk fields it sets in `cache_fields` is cached by content (the runtime's
    `plm_index.cache.CachedStage`): only texts it has not seen with these settings reach it."""

    family = "enrichers"
    input_type = list[Chunk]
    output_type = list[Chunk]
    cache_fields: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def run(self, data: list[Chunk]) -> list[Chunk]:
        """The chunks with what this stage adds (`dataclasses.replace`), one for each, in order."""


class Embedder(BaseComponent[list[str], Any]):
    """Texts -> float32 matrix (n, dim), rows L2-normalised when configured."""

    family = "embedders"
    input_type = list[str]
    output_type = object

    @property
    @abstractmethod
    def model_name(self) -> str:
        """The model actually loaded (after resolving preferences); warms up if needed."""

    @property
    def expected_model_name(self) -> str:
        """The name `model_name` will have, found without loading the model where the embedder
        can: opening an index checks its vectors against it, and a service or a cold query
        should not wait for the weights before they are needed. Default: `model_name`."""
        return self.model_name

    @property
    def model_version(self) -> str:
        """Where the loaded weights live and when they changed ("" if unknown): part of the
        cache keys, so a model retrained in place never serves another model's vectors."""
        return ""

    @abstractmethod
    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        """A float32 matrix, one row per text."""

    def embed_query(self, text: str) -> Any:
        """One query's vector (warming up first); override when queries are embedded differently."""
        self.ensure_warm()
        return self.embed([text])[0]

    def run(self, data: list[str]) -> Any:
        return self.embed(data)


def require_embedder(component: BaseComponent[Any, Any], why: str) -> Embedder:
    """The component's injected embedder (`needs = ("embedder",)`), or a ConfigError saying
    to add an [embedder] table; call it from `check()` so `plm config check` catches it."""
    embedder = getattr(component, "embedder", None)
    if embedder is None:
        raise ConfigError(
            f"stage {component.label!r} ({getattr(component, 'name', '?')}) {why}: add an [embedder] "
            'table (e.g. use = "sentence_transformers") to the config'
        )
    return embedder  # type: ignore[no-any-return]


class Tokenizer(BaseComponent[list[str], list[list[str]]]):
    """Texts -> tokens, deterministic: a part of the stage that tokenizes (`tokenizer = "snowball"`).
    `identity` goes into that index's build settings: a changed tokenizer rebuilds the index."""

    family = "tokenizers"
    input_type = list[str]
    output_type = list[list[str]]

    @abstractmethod
    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens, in order, repeats kept (BM25 counts them)."""

    @property
    def identity(self) -> dict[str, Any]:
        """What the tokens depend on: name and settings (override to add e.g. a data version)."""
        return {"name": getattr(self, "name", type(self).__name__), **self.config.model_dump(mode="json")}

    def run(self, data: list[str]) -> list[list[str]]:
        return self.tokenize(data)


class QueryExpander(BaseComponent[Query, ExpandedQuery]):
    """A query -> what retrieval searches for: its text and alternatives, the fusion profile
    it should get (`ExpandedQuery.profile`; the fuser's config maps names to settings), or
    its vector (`embed_query`). A query stage before the `[query.retrieve]` stage."""

    family = "expanders"
    input_type = Query
    output_type = ExpandedQuery

    @abstractmethod
    def run(self, data: Query) -> ExpandedQuery:
        """The query as retrieval should search for it (`ExpandedQuery.of(data)` to start from)."""


class Index(ABC):
    """An index derived from the store (BM25, an ANN graph), rebuildable from a snapshot alone:
    `refresh` after a sync, `build` on `plm index rebuild` (with a folder: save there,
    atomically), `load` at query time, or `build` in memory when `load` raises StaleIndexError."""

    needs_vectors: ClassVar[bool] = False  # the snapshot's vectors are read (and checked) for it

    @abstractmethod
    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        """Index the snapshot, ready to search; with `index_dir`, also save it there."""

    def refresh(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Save the index for the snapshot's version by its cheapest path (default: `build`)."""
        self.build(snapshot, index_dir)

    @abstractmethod
    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        """True when a saved index exists for this version and these settings."""

    @abstractmethod
    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        """Open what `build` saved for the snapshot's version. Raise StaleIndexError when
        there is none (the core rebuilds it in memory), StoreError when it is corrupt."""

    def ahead(self, texts: Sequence[str]) -> None:  # noqa: B027 - optional, a no-op by default
        """The index texts of chunks a sync has just stored, in the order it stored them,
        before the build that reads them: an index may start that build's work on other
        cores (BM25 tokenizes them), as long as the build gives what it gives without.
        Default: nothing."""

    def ahead_done(self) -> None:  # noqa: B027 - optional, a no-op by default
        """The sync is over (built, or failed): drop what `ahead` kept. Default: nothing."""


class Retriever(BaseComponent[ExpandedQuery, list[ScoredChunk]], Index):
    """Searches its index. Works inside a fan-out stage (`hybrid`) or as the whole
    `[query.retrieve]` stage, where the core turns its candidates into hits."""

    family = "retrievers"
    input_type = ExpandedQuery
    output_type = list[ScoredChunk]

    @abstractmethod
    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        """Top-n chunks, best first, 0-based ranks; `allowed`: a boolean mask over chunk
        rows (index order), applied before the cut so n hits come back when n rows pass."""

    def run(self, data: ExpandedQuery) -> list[ScoredChunk]:
        return self.search(data, data.depth)


class Fuser(BaseComponent[Mapping[str, list[ScoredChunk]], list[ScoredChunk]]):
    """Several retrievers' rankings -> one (inside the `hybrid` stage): `settings_for` picks
    this query's settings (how many candidates each retriever returns, the weights), `fuse`
    combines the rankings, keyed by each retriever's table name, into one, best first.

    What a fuser reads from the query: `query.depth`, the hits the stages after retrieval
    want (k, or a reranker's deeper pool; at least 1 at query time), to size each source's
    candidates; `query.weights`, per-query weights by retriever name (`plm query --weight
    dense=2`, `Job.search(weights=...)`), which a fuser applies or, by ignoring them, makes
    `--weight` do nothing. `ScoredChunk.rank` is 0-based in each ranking in and out; the
    fused chunks' `source` is free text (the built-ins say "fused"). A fuser whose settings
    name retrievers checks them in `check_sources`, which the runtime calls at assembly."""

    family = "fusers"
    input_type = object
    output_type = list[ScoredChunk]

    def check_sources(self, names: Sequence[str]) -> None:
        """Raise ConfigError when this fuser's settings do not fit these retriever names."""

    @abstractmethod
    def settings_for(self, query: ExpandedQuery, n_chunks: int) -> FusionConfig:
        """The settings for this query (profile, candidates per source) over n_chunks rows."""

    @abstractmethod
    def fuse(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[ScoredChunk]:
        """One ranking from the sources' rankings."""

    def fuse_top(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig, n: int) -> list[ScoredChunk]:
        """The first n of `fuse`'s ranking (the `hybrid` stage needs only the query's depth).
        A fuser may override it to make only those; it must equal `fuse(...)[:n]`."""
        return self.fuse(rankings, settings)[: max(0, n)]

    def run(self, data: Mapping[str, list[ScoredChunk]]) -> list[ScoredChunk]:
        n = max((len(r) for r in data.values()), default=0)
        return self.fuse(data, self.settings_for(ExpandedQuery(text="", k=max(1, n)), n))


class Retrieval(BaseComponent[ExpandedQuery, Ranking]):
    """The `[query.retrieve]` stage: a query -> a ranking of hits, from one or more
    retrievers (`hybrid` fans out and fuses; a bare retriever there is wrapped by the core).
    Not a `Retriever`: a slot that takes a retriever (hybrid's `retrievers`) refuses it."""

    family = "retrieval"
    input_type = ExpandedQuery
    output_type = Ranking

    @abstractmethod
    def run(self, data: ExpandedQuery) -> Ranking:
        """The query's ranking, `data.depth` hits at most (`Corpus.hits` makes them)."""


class RankingStage(BaseComponent[Ranking, Ranking]):
    """A stage after retrieval (reranking, deduplication, filtering). It may want more
    candidates than the final k: the core asks every ranking stage for its `depth(k)`,
    retrieval returns the deepest, and the cut to k happens once, at the end."""

    family = "rankers"
    input_type = Ranking
    output_type = Ranking

    @abstractmethod
    def run(self, data: Ranking) -> Ranking:
        """The ranking this stage makes of the one it gets (`plm.rescore` to reorder and renumber)."""

    def depth(self, k: int) -> int:
        """How many hits this stage wants to receive for a final k (at least k)."""
        return k


class Reranker(RankingStage):
    """A ranking stage that rescores hits (a cross-encoder, a title boost): write `run`, and
    `depth` to see more candidates than the final k; `plm.rescore` reorders and renumbers."""

    family = "rerankers"


# ---------------------------------------------------------------------------- executors
class Executor(BaseComponent[object, object]):
    """Where a sync's documents become chunks and vectors: `local` (this process) or a
    cluster, with the job's live processor or, elsewhere, one built from the picklable
    recipe. It yields each batch's result once, as soon as ready, in any order, and never
    writes the store: the job commits each result (whole documents: a retry is harmless)."""

    family = "executors"

    @abstractmethod
    def process(
        self, batches: Sequence[Sequence[Document]], local: BatchProcessor, recipe: ProcessorFactory, read_cache: bool
    ) -> Iterator[BatchResult]:
        """Each batch's result, once, as soon as it is ready, in any order: here with
        `local.process(batch, read_cache)`, elsewhere with `recipe.build()`'s processor."""
