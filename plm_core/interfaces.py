"""Base classes for each family of stage. Plugins subclass one and register it.

Array-valued arguments are numpy arrays at run time; the core itself never imports
numpy, so they are typed `Any` here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from plm_core.component import BaseComponent
from plm_core.records import Chunk, Document, ExpandedQuery, FusionConfig, Hit, Query, ScoredChunk


@dataclass(frozen=True)
class Ranking:
    """A query with its ranked hits: what retrieval, reranking and evaluation pass on."""

    query: ExpandedQuery
    hits: tuple[Hit, ...]
    fusion: FusionConfig | None = None


class Loader(BaseComponent[str, list[Document]]):
    """A path (file or folder) -> documents, in a stable order."""

    family = "loader"
    input_type = str
    output_type = list[Document]


class Chunker(BaseComponent[list[Document], list[Chunk]]):
    family = "chunker"
    input_type = list[Document]
    output_type = list[Chunk]


class ChunkTransform(BaseComponent[list[Chunk], list[Chunk]]):
    """Keyword/entity extractors and enrichers: chunks in, new chunks out (same order)."""

    family = "enricher"
    input_type = list[Chunk]
    output_type = list[Chunk]


class Embedder(BaseComponent[list[str], Any]):
    """Texts -> float32 matrix (n, dim), rows L2-normalised when configured."""

    family = "embedder"
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
    family = "expander"
    input_type = Query
    output_type = ExpandedQuery


class Retriever(BaseComponent[ExpandedQuery, list[ScoredChunk]]):
    """Builds an index over chunks (and/or their vectors) and searches it."""

    family = "retriever"
    input_type = ExpandedQuery
    output_type = list[ScoredChunk]
    needs_vectors: ClassVar[bool] = False

    def build(self, chunks: Sequence[Chunk], vectors: Any, index_dir: Path) -> None:
        """Index `chunks` (row i of `vectors` belongs to chunks[i]) and save under index_dir."""
        raise NotImplementedError

    def index_matches(self, index_dir: Path, n_chunks: int) -> bool:
        """False when the saved index is missing or does not cover `n_chunks` chunks."""
        return True

    def load(self, index_dir: Path, chunk_ids: Sequence[str], vectors: Any) -> None:
        """Open what `build` saved; raise StoreError if it is missing or corrupt."""
        raise NotImplementedError

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        """Top-n chunks, best first, 0-based ranks. `allowed`: boolean mask over chunk rows."""
        raise NotImplementedError


class Fuser(BaseComponent[Mapping[str, list[ScoredChunk]], list[ScoredChunk]]):
    family = "fuser"
    input_type = object
    output_type = list[ScoredChunk]

    def check_sources(self, names: Sequence[str]) -> None:
        """Raise ConfigError when this fuser's settings do not fit these retriever names."""

    def settings_for(self, query: ExpandedQuery, n_chunks: int) -> FusionConfig:
        raise NotImplementedError

    def fuse(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[ScoredChunk]:
        raise NotImplementedError


class Reranker(BaseComponent[Ranking, Ranking]):
    family = "reranker"
    input_type = Ranking
    output_type = Ranking


class Store(BaseComponent[object, object]):
    """Persists documents, chunks (with enrichment) and vectors in one index folder."""

    family = "store"

    def open(self, index_dir: Path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def get_meta(self, key: str) -> str | None:
        raise NotImplementedError

    def set_meta(self, key: str, value: str) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        """Delete all documents, chunks and vectors (one transaction)."""
        raise NotImplementedError

    def write_batch(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> None:
        """Insert documents and their chunks in one transaction."""
        raise NotImplementedError

    def write_vectors(self, chunk_ids: Sequence[str], matrix: Any, model: str) -> None:
        raise NotImplementedError

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
