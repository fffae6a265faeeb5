"""The small protocols the runtime hands a stage: what an index reads (`Snapshot`), what a
retrieval stage looks rows and hits up in (`Corpus`), and what an executor runs
(`BatchProcessor`, `ProcessorFactory`). Each names only what a stage may use; the runtime's
classes (`plm_index.corpus.CorpusSnapshot`, `plm_index.search.CorpusView`,
`plm_index.sync.Processor`) satisfy them, and a test may pass any object that does."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from plm_core.records import BatchResult, Chunk, CorpusVersion, Document, Hit, ScoredChunk


class Snapshot(Protocol):
    """One committed state of a store as an `Index` reads it (plm_index.corpus.CorpusSnapshot)."""

    version: CorpusVersion
    chunk_ids: Sequence[str]  # row -> chunk id, index order
    chunks: list[Chunk]
    index_texts: list[str]  # each chunk's `index_text`, row i for chunk_ids[i]
    metadata: list[dict[str, Any]]
    n_chunks: int
    vectors: Any  # float32 (n_chunks, dim), checked against the job's model
    vectors_model: str | None  # the model the store records for its vectors
    model: str | None  # the model the job loads (vectors of another are refused)
    position: int  # the change feed (see ChunkReader): what changed since a position

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]: ...
    def removed_since(self, position: int) -> list[int] | None: ...
    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]: ...
    @property
    def empty(self) -> bool: ...


class BatchProcessor(Protocol):
    """Documents -> chunks and vectors, the store untouched (the runtime's `plm_index.sync.Processor`)."""

    def process(self, batch: Sequence[Document], read_cache: bool = True) -> BatchResult: ...

    def process_all(self, batches: Any, read_cache: bool = True) -> Iterator[BatchResult]: ...


class ProcessorFactory(Protocol):
    """A picklable recipe a worker elsewhere builds its own `BatchProcessor` from."""

    def build(self) -> BatchProcessor: ...


class Corpus(Protocol):
    """The chunk rows of the corpus version being searched, as a stage that `needs =
    ("corpus",)` receives it: filter masks over the rows and hits looked up by chunk id."""

    store: Any  # the job's Store
    n_chunks: int

    def allowed(self, filters: Mapping[str, Any] | None) -> tuple[Any, int]:
        """(a boolean row mask, or None for every row; how many rows pass) for a filter spec."""
        ...

    def hits(self, ranked: Sequence[ScoredChunk], sources: Mapping[str, Sequence[ScoredChunk]]) -> tuple[Hit, ...]:
        """Hits for ranked candidates (ranks from 1), with each source's rank and score of that chunk."""
        ...
