"""Exact dense retrieval: dot product of the query vector with every chunk vector.

The vectors live in the store, so `build` saves nothing; the matrix is held as one
contiguous float32 array and every query is scored against all rows, which is what the
POC did (brute force is exact, and fast enough for tens of thousands of chunks).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plm_core.component import ComponentConfig
from plm_core.errors import ConfigError, StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Retriever
from plm_core.records import Chunk, EmbeddedQuery, ExpandedQuery, ScoredChunk
from plm_plugins.retrievers.ranking import top_n

if TYPE_CHECKING:
    from plm_core.registry import Registry


class DenseRetriever(Retriever):
    """Ranks chunks by the dot product of normalised embeddings (cosine similarity)."""

    name = "dense"
    label = "dense"  # the Job replaces this with the config table's name
    needs_vectors = True

    class Config(ComponentConfig):
        pass

    def _take(self, chunk_ids: Sequence[str], vectors: Any) -> None:
        import numpy as np

        if vectors is None and not chunk_ids:  # an empty index (every document deleted)
            vectors = np.zeros((0, 0), dtype=np.float32)
        if vectors is None:
            raise StoreError(
                f"retriever {self.label!r} needs chunk vectors but the store has none: add an "
                "[embedder] table to the config and run `plm ingest --force`"
            )
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(chunk_ids):
            raise StoreError(
                f"retriever {self.label!r}: {matrix.shape[0] if matrix.ndim else 0} vectors for "
                f"{len(chunk_ids)} chunks; run `plm ingest --force` to rebuild them"
            )
        self._matrix, self._chunk_ids = matrix, list(chunk_ids)

    def build(
        self, chunks: Sequence[Chunk], vectors: Any, index_dir: Path, version: str = "", save: bool = True
    ) -> None:
        self._take([c.id for c in chunks], vectors)

    def load(self, index_dir: Path, chunk_ids: Sequence[str], vectors: Any, version: str = "") -> None:
        self._take(chunk_ids, vectors)

    def index_matches(self, index_dir: Path, version: str) -> bool:
        """True when the store holds one vector per chunk (the vectors are the index)."""
        store = getattr(self.context, "store", None)
        if store is None:
            return False
        n_chunks = int(store.stats().get("chunks", 0))
        return n_chunks > 0 and store.vector_count() == n_chunks

    def query_vector(self, query: ExpandedQuery) -> Any:
        import numpy as np

        vector = getattr(query, "vector", None) if isinstance(query, EmbeddedQuery) else None
        if vector is None:
            embedder = getattr(self.context, "embedder", None)
            if embedder is None:
                raise ConfigError(
                    f"retriever {self.label!r} needs the query embedded: add an [embedder] table "
                    "to the config (or an `embed_query` stage before retrieval)"
                )
            embedder.ensure_warm()
            embed_query = getattr(embedder, "embed_query", None)
            vector = embed_query(query.text) if embed_query else embedder.embed([query.text])[0]
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self._matrix.shape[1]:
            raise StoreError(
                f"retriever {self.label!r}: the query vector has {vector.shape[0]} dimensions but the "
                f"stored chunk vectors have {self._matrix.shape[1]}; the embedder changed since "
                "ingest, run `plm ingest --force`"
            )
        return vector

    def scores(self, query: ExpandedQuery) -> Any:
        """The similarity of every chunk (row order) to the query."""
        return self._matrix @ self.query_vector(query)

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        # Exact scores for every chunk, then the POC's tie order (see ranking.top_n).
        scores = self.scores(query)
        return top_n(scores, n, self._chunk_ids, self.label, allowed)

    def run(self, data: ExpandedQuery) -> list[ScoredChunk]:
        return self.search(data, data.k)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DenseRetriever)
