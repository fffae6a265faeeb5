"""Base classes for each family of stage. Plugins subclass one and register it.

Array-valued arguments are numpy arrays at run time; the core itself never imports
numpy, so they are typed `Any` here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from plm_core.component import BaseComponent
from plm_core.records import Chunk, Document, ExpandedQuery, FusionConfig, Hit, LoadFailure, Query, ScoredChunk


@dataclass(frozen=True)
class Ranking:
    """A query with its ranked hits: what retrieval, reranking and evaluation pass on."""

    query: ExpandedQuery
    hits: tuple[Hit, ...]
    fusion: FusionConfig | None = None


class Loader(BaseComponent[str, list[Document]]):
    """A path (file or folder) -> documents, in a stable order."""

    family = "loaders"
    input_type = str
    output_type = list[Document]

    def load(self, source: str) -> tuple[list[Document], list[LoadFailure]]:
        """Documents plus one failure per file (or record) that could not be read.

        Raises PlmUserError only when `source` itself is unusable (missing, no matching
        files): an ingest then stops before changing anything. The default has no
        per-file failures: whatever `run` raises stops the ingest.
        """
        return self.run(source), []


class Chunker(BaseComponent[list[Document], list[Chunk]]):
    family = "chunkers"
    input_type = list[Document]
    output_type = list[Chunk]


class ChunkTransform(BaseComponent[list[Chunk], list[Chunk]]):
    """Keyword/entity extractors and enrichers: chunks in, new chunks out (same order)."""

    family = "enrichers"
    input_type = list[Chunk]
    output_type = list[Chunk]


class Embedder(BaseComponent[list[str], Any]):
    """Texts -> float32 matrix (n, dim), rows L2-normalised when configured."""

    family = "embedders"
    input_type = list[str]
    output_type = object

    @property
    def model_name(self) -> str:
        """The model actually loaded (after resolving preferences)."""
        raise NotImplementedError

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        raise NotImplementedError

    def embed_query(self, text: str) -> Any:
        """One query's vector; override when queries are embedded differently (prefixes)."""
        return self.embed([text])[0]

    def run(self, data: list[str]) -> Any:
        return self.embed(data)


class QueryExpander(BaseComponent[Query, ExpandedQuery]):
    family = "expanders"
    input_type = Query
    output_type = ExpandedQuery


class Retriever(BaseComponent[ExpandedQuery, list[ScoredChunk]]):
    """Builds an index over chunks (and/or their vectors) and searches it."""

    family = "retrievers"
    input_type = ExpandedQuery
    output_type = list[ScoredChunk]
    needs_vectors: ClassVar[bool] = False

    def build(
        self, chunks: Sequence[Chunk], vectors: Any, index_dir: Path, version: str = "", save: bool = True
    ) -> None:
        """Index `chunks` (row i of `vectors` belongs to chunks[i]), ready to search, and with
        `save` write it under index_dir for the store `version` the chunks came from.
        Saving must be atomic (write elsewhere, then rename): other processes may be loading.
        Query processes build with save=False: only ingest and `index rebuild` write."""
        raise NotImplementedError

    def index_matches(self, index_dir: Path, version: str) -> bool:
        """False when the saved index is missing or was built for another version or settings."""
        return True

    def load(self, index_dir: Path, chunk_ids: Sequence[str], vectors: Any, version: str = "") -> None:
        """Open what `build` saved for `version`. Raise StaleIndexError when it is missing or
        was built for another version or settings (the caller rebuilds it from the store),
        StoreError when it is corrupt."""
        raise NotImplementedError

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        """Top-n chunks, best first, 0-based ranks. `allowed`: boolean mask over chunk rows."""
        raise NotImplementedError


class Fuser(BaseComponent[Mapping[str, list[ScoredChunk]], list[ScoredChunk]]):
    family = "fusers"
    input_type = object
    output_type = list[ScoredChunk]

    def check_sources(self, names: Sequence[str]) -> None:
        """Raise ConfigError when this fuser's settings do not fit these retriever names."""

    def settings_for(self, query: ExpandedQuery, n_chunks: int) -> FusionConfig:
        raise NotImplementedError

    def fuse(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[ScoredChunk]:
        raise NotImplementedError


class Reranker(BaseComponent[Ranking, Ranking]):
    family = "rerankers"
    input_type = Ranking
    output_type = Ranking


class Store(BaseComponent[object, object]):
    """Persists documents, chunks (with enrichment) and vectors in one index folder."""

    family = "stores"

    def open(self, index_dir: Path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def get_meta(self, key: str) -> str | None:
        raise NotImplementedError

    def set_meta(self, key: str, value: str) -> None:
        raise NotImplementedError

    def version(self) -> str:
        """A token that changes whenever documents, chunks or vectors change."""
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[None]:
        """A context in which every read sees one committed state, even while another
        process writes."""
        return nullcontext()

    def clear(self) -> None:
        """Delete all documents, chunks and vectors (one transaction)."""
        raise NotImplementedError

    def doc_fingerprints(self) -> dict[str, str]:
        """Stored document id -> the fingerprint it was stored with ("" if none)."""
        raise NotImplementedError

    def doc_paths(self) -> dict[str, str]:
        """Stored document id -> the path it was loaded from ("" for in-memory records)."""
        raise NotImplementedError

    def replace_documents(
        self,
        documents: Sequence[Document],
        chunks: Sequence[Chunk],
        matrix: Any = None,
        model: str | None = None,
        fingerprints: Sequence[str] | None = None,
    ) -> None:
        """Store documents with exactly these chunks and vectors, replacing what their ids
        held, in one transaction: a crash leaves each document wholly old or wholly new."""
        raise NotImplementedError

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Remove documents with their chunks and vectors in one transaction; returns the
        ids that were there."""
        raise NotImplementedError

    def write_batch(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> None:
        """Insert documents and their chunks in one transaction."""
        self.replace_documents(documents, chunks)

    def write_vectors(
        self, chunk_ids: Sequence[str], matrix: Any, model: str, texts: Sequence[str] | None = None
    ) -> int:
        """Vectors for stored chunks (one transaction); with `texts`, rows whose chunk no
        longer holds that text are skipped. Returns the rows written."""
        raise NotImplementedError

    def chunks_needing_vectors(self, model: str) -> list[Chunk]:
        """Chunks whose vector is missing, damaged or from another model."""
        raise NotImplementedError

    def chunk_metadata(self) -> list[dict[str, Any]]:
        """Each chunk's metadata in index order."""
        return [dict(c.metadata) for c in self.chunks()]

    def consistency_problems(self) -> list[str]:
        """Broken invariants (chunks without a document or vector, mixed models); [] if none."""
        return []

    def chunks(self) -> list[Chunk]:
        """All chunks in index order (documents in ingest order, chunks in document order)."""
        raise NotImplementedError

    def chunk_ids(self) -> list[str]:
        """All chunk ids in index order (cheaper than `chunks()`)."""
        return [c.id for c in self.chunks()]

    def vector_count(self) -> int:
        return len(self.vectors()[0])

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        raise NotImplementedError

    def vectors(self) -> tuple[list[str], Any, str | None]:
        """(chunk ids, float32 matrix in the same order, model name); matrix None if none."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError
