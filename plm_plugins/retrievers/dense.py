"""Exact dense retrieval: dot product of the query vector with every chunk vector.

Every query is scored against all rows, which is what the POC did (brute force is exact,
and fast enough for tens of thousands of chunks). The store holds the vectors; after an
ingest they are also saved as one float32 matrix with its chunk id column in a build
folder (`vectors-<format hash>/`, plm_index.builds: one per corpus version, atomic, checksummed),
which a new process memory-maps instead of reading every row from the store: opening
costs nothing proportional to the corpus, and the first query pages the matrix in.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from plm_core.component import ComponentConfig
from plm_core.errors import StaleIndexError, StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Embedder, Retriever, Snapshot, require_embedder
from plm_core.records import CorpusVersion, EmbeddedQuery, ExpandedQuery, ScoredChunk
from plm_index import builds
from plm_index.ranking import top_n
from plm_plugins.retrievers.columns import IDS_FILE, VECTORS_FILE, load_ids, load_vectors, save_ids, save_vectors

if TYPE_CHECKING:
    from plm_core.registry import Registry

VECTORS_META = "plm_vectors.json"
VECTORS_FORMAT = 1


class DenseRetriever(Retriever):
    """Ranks chunks by the dot product of normalised embeddings (cosine similarity)."""

    name = "dense"
    needs_vectors = True
    needs = ("embedder",)
    embedder: Embedder | None

    class Config(ComponentConfig):
        score: Literal["cosine", "unit"] = "cosine"
        """The score hits carry: "cosine" (in [-1, 1]) or "unit", (1 + cosine) / 2 in [0, 1]
        (for people reading scores, e.g. papers); the ranking is the same."""

    config: Config

    def check(self) -> None:
        require_embedder(self, "needs chunk and query vectors")

    def _take(self, chunk_ids: Sequence[str], vectors: Any) -> None:
        import numpy as np

        if vectors is None:
            if chunk_ids:
                raise StoreError(
                    f"retriever {self.label!r} needs chunk vectors but the snapshot has none: add an "
                    "[embedder] table to the config and run `plm ingest --force`"
                )
            vectors = np.zeros((0, 0), dtype=np.float32)  # an empty index (every document deleted)
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(chunk_ids):
            raise StoreError(
                f"retriever {self.label!r}: {matrix.shape[0] if matrix.ndim else 0} vectors for "
                f"{len(chunk_ids)} chunks; run `plm ingest --force` to rebuild them"
            )
        self._matrix, self._chunk_ids = matrix, list(chunk_ids)  # type: Any, Sequence[str]

    # ------------------------------------------------------------------ index
    def vectors_base(self, index_dir: Path) -> Path:
        return builds.stage_folder(index_dir, "vectors", {"format": VECTORS_FORMAT})

    def _vectors_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        return builds.build_path(self.vectors_base(index_dir), version, {"format": VECTORS_FORMAT})

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        self._take(snapshot.chunk_ids, snapshot.vectors)
        if index_dir is not None:
            matrix, ids = self._matrix, self._chunk_ids

            def write(folder: Path) -> None:
                save_vectors(folder / VECTORS_FILE, matrix)
                save_ids(folder / IDS_FILE, ids)

            meta = {"format": VECTORS_FORMAT, "version": snapshot.version.token, "num_docs": len(ids)}
            meta["model"] = snapshot.vectors_model  # the store's; checked against snapshot.model when read
            builds.save_build(self._vectors_path(index_dir, snapshot.version), write, meta, VECTORS_META)

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        path = self._vectors_path(index_dir, version)
        return builds.build_matches(path, version, {"format": VECTORS_FORMAT}, VECTORS_META)

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        path, version, rows = self._vectors_path(index_dir, snapshot.version), snapshot.version, snapshot.n_chunks
        what = f"vectors of {self.label!r} under {self.vectors_base(index_dir)}"
        meta = builds.open_build(path, version, {"format": VECTORS_FORMAT}, what, VECTORS_META)
        saved = meta.get("model")
        if saved != snapshot.vectors_model or snapshot.model not in (None, saved):
            # Rebuilt from the store, whose check names both models when they differ.
            raise StaleIndexError(f"{what} come from {saved!r}; the store says {snapshot.vectors_model!r}")
        if meta.get("num_docs") != rows:
            raise StoreError(
                f"{what} hold {meta.get('num_docs')} rows but the store's version {version} has {rows} chunks: "
                "run `plm index rebuild`"
            )
        try:
            ids = load_ids(path / IDS_FILE, rows)
            matrix = load_vectors(path / VECTORS_FILE, rows)
        except FileNotFoundError:  # removed by a newer build while we read it
            raise StaleIndexError(f"{what} were replaced while loading") from None
        except (OSError, ValueError) as err:
            raise StoreError(f"{what}: {path} is corrupt ({err}): run `plm index rebuild`") from None
        self._matrix, self._chunk_ids = matrix, ids

    def query_vector(self, query: ExpandedQuery) -> Any:
        import numpy as np

        vector = query.vector if isinstance(query, EmbeddedQuery) else None
        if vector is None:
            vector = require_embedder(self, "needs chunk and query vectors").embed_query(query.text)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._matrix.shape[0] and vector.shape[0] != self._matrix.shape[1]:
            raise StoreError(
                f"retriever {self.label!r}: the query vector has {vector.shape[0]} dimensions but the "
                f"stored chunk vectors have {self._matrix.shape[1]}; the embedder changed since "
                "ingest, run `plm ingest --force`"
            )
        return vector

    def scores(self, query: ExpandedQuery) -> Any:
        """The similarity of every chunk (row order) to the query."""
        import numpy as np

        if not self._matrix.shape[0]:
            return np.zeros(0, dtype=np.float32)
        return self._matrix @ self.query_vector(query)

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        # Exact scores for every chunk, then the POC's tie order (see ranking.top_n).
        scores = self.scores(query)
        if self.config.score == "unit":
            scores = (1.0 + scores.astype("float64")) / 2.0  # float64: close scores stay distinct
        return top_n(scores, n, self._chunk_ids, self.label, allowed)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DenseRetriever)
