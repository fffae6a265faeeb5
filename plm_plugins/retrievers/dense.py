"""Exact dense retrieval: dot product of the query vector with every chunk vector.

Every query is scored against all rows (brute force is exact,
and fast enough for tens of thousands of chunks). The store holds the vectors; after an
ingest they are also saved as segments of float32 rows (plm_index.segments: a sync adds
one for what changed), which a new process memory-maps instead of reading every row from
the store: opening costs nothing proportional to the corpus.

With `quantize`, each segment also holds its rows as codes (int8: a byte a dimension and a
scale a row; binary: a bit a dimension, its sign), a query scans the codes for
`oversample` x n candidates and scores those exactly on their float32 rows, which stay on
disk, memory-mapped: only the rows rescored are read (the Qdrant and Elasticsearch BBQ way).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, cast

from pydantic import Field

from plm import (
    ComponentConfig,
    EmbeddedQuery,
    Embedder,
    ExpandedQuery,
    Retriever,
    ScoredChunk,
    SegmentedIndex,
    Snapshot,
    StaleIndexError,
    StoreError,
    hookimpl,
    require_embedder,
)
from plm.indexes import VECTORS_FILE, Picked, Rows, load_npy, load_vectors, save_vectors, take_ids

if TYPE_CHECKING:
    from plm import Registry

VECTORS_FORMAT = 2
CODES_FILE = "codes.npy"  # a quantised segment's codes (int8 rows, or packed sign bits)
SCALES_FILE = "scales.npy"  # int8: each row's scale (its largest |component| / 127)
MIN_CANDIDATES = 100  # a quantised search rescores at least this many rows
EXACT_UP_TO = 50_000  # up to this many rows a quantised index scores every row exactly (a few ms)


class Quantized(NamedTuple):
    """A quantised segment's data: its float32 rows (memory-mapped) and their codes."""

    vectors: Any
    codes: Any
    scales: Any  # None for binary codes


class DenseConfig(ComponentConfig):
    """What every dense retriever's config holds (`dense`, `faiss`, `dense_rocchio`)."""

    score: Literal["cosine", "unit"] = "cosine"
    """The score hits carry: "cosine" (in [-1, 1]) or "unit", (1 + cosine) / 2 in [0, 1]
    (for people reading scores, e.g. papers); the ranking is the same."""


class DenseRetriever(Retriever, SegmentedIndex):
    """Ranks chunks by the dot product of normalised embeddings (cosine similarity)."""

    name = "dense"
    needs_vectors = True
    needs = ("embedder",)
    embedder: Embedder | None

    class Config(DenseConfig):
        quantize: Literal["none", "int8", "binary"] = "none"
        """Candidates from quantised copies of the vectors, then scored exactly: "int8" (a
        quarter of the memory), "binary" (a 32nd: one bit a dimension, scanned by popcount);
        "none": every row scored exactly. The hits' scores are exact either way; a hit the
        codes rank below the candidates is missed (BENCHMARKS.md gives recall@10)."""
        oversample: int = Field(10, ge=1, le=1000)
        """With `quantize`: rows rescored exactly per hit asked for (at least 100 rows)."""

    config: DenseConfig  # dense's own Config, or a subclass stage's (faiss, dense_rocchio)

    def check(self) -> None:
        require_embedder(self, "needs chunk and query vectors")

    # ------------------------------------------------------------------ index
    # Segments (plm_index.segments) under index_dir/dense-<format hash>/, each a float32
    # matrix of its rows' vectors, memory-mapped when opened: a sync adds the new vectors as
    # a segment and marks replaced rows deleted; a query scores every segment.
    reads = "vectors"
    segment_kind: str | None = "vectors"  # one set of segments for every dense stage (faiss reads them too)

    def segment_settings(self) -> dict[str, Any]:
        quantize = getattr(self.config, "quantize", "none")
        return {"format": VECTORS_FORMAT, **({"quantize": quantize} if quantize != "none" else {})}

    def _quantize(self) -> str:
        return str(getattr(self.config, "quantize", "none"))  # dense's own key: not in DenseConfig

    def vectors_base(self, index_dir: Path) -> Path:
        return self.stage_base(index_dir)

    def build_data(self, rows: Rows) -> Any:
        import numpy as np

        if rows.vectors is None:
            raise StoreError(
                f"retriever {self.label!r} needs chunk vectors but the snapshot has none: add an "
                "[embedder] table to the config and run `plm ingest --force`"
            )
        matrix = np.ascontiguousarray(rows.vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(rows):
            raise StoreError(
                f"retriever {self.label!r}: {matrix.shape[0] if matrix.ndim else 0} vectors for "
                f"{len(rows)} chunks; run `plm ingest --force` to rebuild them"
            )
        return quantized(matrix, self._quantize()) if self._quantize() != "none" else matrix

    def save_data(self, data: Any, folder: Path) -> None:
        import numpy as np

        if isinstance(data, Quantized):
            np.save(folder / CODES_FILE, data.codes, allow_pickle=False)
            if data.scales is not None:
                np.save(folder / SCALES_FILE, data.scales, allow_pickle=False)
        save_vectors(folder / VECTORS_FILE, _rows(data))

    def open_data(self, folder: Path, n_rows: int) -> Any:
        vectors = load_vectors(folder / VECTORS_FILE, n_rows)
        if self._quantize() == "none":
            return vectors
        read_at_random(vectors)  # only rescored rows are read: no readahead of their neighbours
        codes = load_npy(folder / CODES_FILE)
        scales = load_npy(folder / SCALES_FILE) if self._quantize() == "int8" else None
        if len(codes) != n_rows or (scales is not None and len(scales) != n_rows):
            raise ValueError(f"{CODES_FILE} holds {len(codes)} rows, not {n_rows}")
        return Quantized(vectors, codes, scales)

    def merge_data(self, parts: list[Any], keep: list[Any]) -> Any:
        import numpy as np

        matrix = np.concatenate([np.asarray(_rows(p))[k] for p, k in zip(parts, keep, strict=True)])
        if self._quantize() == "none":
            return matrix
        codes = np.concatenate([np.asarray(p.codes)[k] for p, k in zip(parts, keep, strict=True)])
        scales = (
            None
            if parts[0].scales is None
            else np.concatenate([np.asarray(p.scales)[k] for p, k in zip(parts, keep, strict=True)])
        )
        return Quantized(matrix, codes, scales)

    @property
    def _matrix(self) -> Any:
        """The live rows' vectors in the store's index order, one matrix (what faiss builds
        from): the open segment itself when it is the only one and nothing is deleted."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")

        def make() -> Any:
            if not state.segments:
                return np.zeros((0, 0), dtype=np.float32)
            rows = state.rows_in_index_order()
            if rows is None and len(state.segments) == 1:
                return self.vectors_of(state.segments[0].data)
            matrix = np.concatenate([self.vectors_of(seg.data) for seg in state.segments])
            return matrix if rows is None else matrix[rows]

        return state.cached("matrix", make)

    @property
    def _chunk_ids(self) -> Sequence[str]:
        """Chunk id of each row of `_matrix`."""
        assert self.state is not None
        rows = self.state.rows_in_index_order()
        return self.state.ids if rows is None else Picked(self.state.ids, rows)

    def manifest_extra(self, snapshot: Snapshot) -> dict[str, Any]:
        return {"model": snapshot.vectors_model}  # the store's; checked against snapshot.model when read

    def accept(self, extra: dict[str, Any], snapshot: Snapshot, what: str) -> None:
        saved = extra.get("model")
        if saved != snapshot.vectors_model or snapshot.model not in (None, saved):
            # Rebuilt from the store, whose check names both models when they differ.
            raise StaleIndexError(f"{what} come from {saved!r}; the store says {snapshot.vectors_model!r}")

    def vectors_of(self, data: Any) -> Any:
        """A segment's float32 rows within its data (dense's data is the matrix itself, or
        a `Quantized` holding it)."""
        return _rows(data)

    def _dim(self) -> int | None:
        state = self.state
        return None if state is None or not state.segments else int(self.vectors_of(state.segments[0].data).shape[1])

    def query_vector(self, query: ExpandedQuery) -> Any:
        import numpy as np

        vector = query.vector if isinstance(query, EmbeddedQuery) else None
        if vector is None:
            vector = require_embedder(self, "needs chunk and query vectors").embed_query(query.text)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        dim = self._dim()
        if dim is not None and vector.shape[0] != dim:
            raise StoreError(
                f"retriever {self.label!r}: the query vector has {vector.shape[0]} dimensions but the "
                f"stored chunk vectors have {dim}; the embedder changed since "
                "ingest, run `plm ingest --force`"
            )
        return vector

    def scores(self, query: ExpandedQuery) -> Any:
        """The similarity of every row of the open segments to the query."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")
        if not state.total:
            return np.zeros(0, dtype=np.float32)
        vector = self.query_vector(query)
        return np.concatenate([similarities(self.vectors_of(seg.data), vector) for seg in state.segments])

    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        if self._quantize() != "none":
            return self._rescored(query, n, allowed)
        # Exact scores for every chunk, then top_n's tie order (equal scores: the later row first).
        scores = self._scaled(self.scores(query))  # "unit" in float64: close scores stay distinct
        assert self.state is not None
        return self.state.top(scores, n, self.label, allowed)

    def _rescored(self, query: ExpandedQuery, n: int, allowed: Any) -> list[ScoredChunk]:
        """The n best of `oversample` x n candidates the codes rank first, scored exactly;
        equal scores later row first, as `top_n` orders them above EXACT_UP_TO rows (below
        it, where its tie order is a full sort's own, every row is scored exactly)."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")
        if state.total <= EXACT_UP_TO:
            return state.top(self._scaled(self.scores(query)), n, self.label, allowed)
        if n <= 0 or not state.n_live:
            return []
        vector = self.query_vector(query)
        keep = state.allowed_rows(allowed)
        approx = np.concatenate([approximate(seg.data, vector) for seg in state.segments])
        approx[~keep] = -np.inf
        oversample = cast(DenseRetriever.Config, self.config).oversample  # only dense's own Config quantizes
        m = min(int(keep.sum()), max(n * oversample, MIN_CANDIDATES))
        if m <= 0:
            return []
        rows = np.sort(np.argpartition(-approx, m - 1)[:m])
        exact = np.empty(m, dtype=np.float32)
        for i, at, local in state.by_segment(rows):  # ascending rows: each segment's in order
            exact[at] = similarities(np.asarray(self.vectors_of(state.segments[i].data))[local], vector)
        index = state.rows_in_index_order()
        places = rows if index is None else state.cached("index_places", lambda: _places(index, state.total))[rows]
        best = np.lexsort((-places, -exact))[:n]
        scores = self._scaled(exact[best])
        found = zip(take_ids(state.ids, rows[best]), scores.tolist(), strict=True)
        return [ScoredChunk(chunk_id=c, score=float(s), source=self.label, rank=r) for r, (c, s) in enumerate(found)]

    def _scaled(self, scores: Any) -> Any:
        return (1.0 + scores.astype("float64")) / 2.0 if self.config.score == "unit" else scores


def similarities(matrix: Any, vector: Any) -> Any:
    """Each row's dot product with `vector`, in float32. einsum, not `matrix @ vector`: BLAS
    sums a row in an order that depends on its place in the matrix (blocks of rows take
    other kernels), so the same vector in another segment or position could score one ulp
    apart; einsum's sum depends on the row alone, so any segment layout scores every
    chunk exactly as a whole build does (and as fast, bench: 7 vs 9 ms at 100k x 384)."""
    import numpy as np

    return np.einsum("ij,j->i", matrix, vector)


def quantized(matrix: Any, kind: str) -> Quantized:
    """`matrix`'s rows with their codes: int8 (each row scaled by its largest |component|)
    or binary (the sign of each component, 8 to a byte)."""
    import numpy as np

    if kind == "binary":
        return Quantized(matrix, np.packbits(matrix > 0, axis=1), None)
    top = np.abs(matrix).max(axis=1) if len(matrix) else np.zeros(0, dtype=np.float32)
    scales = np.where(top > 0, top / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)
    return Quantized(matrix, codes, scales)


def approximate(data: Quantized, vector: Any) -> Any:
    """Each row's approximate similarity from its codes (higher is closer): int8 codes times
    the query quantised the same way; binary: minus the Hamming distance of signs."""
    import numpy as np

    codes = np.asarray(data.codes)
    if data.scales is None:
        words = codes.shape[1] // 8 * 8
        bits = np.packbits(np.asarray(vector) > 0)
        far = np.zeros(len(codes), dtype=np.int32)
        if words:  # 8 bytes at a time: one popcount per 64 dimensions
            far += np.bitwise_count(codes[:, :words].view(np.uint64) ^ bits[:words].view(np.uint64)).sum(
                axis=1, dtype=np.int32
            )
        if codes.shape[1] > words:
            far += np.bitwise_count(codes[:, words:] ^ bits[words:]).sum(axis=1, dtype=np.int32)
        return -far.astype(np.float32)
    vector = np.asarray(vector, dtype=np.float32)
    top = float(np.abs(vector).max()) or 1.0
    query = np.clip(np.rint(vector * (127.0 / top)), -127, 127).astype(np.int8)  # the query as codes too
    # int8 x int8 summed in int32 (einsum's integer loop: 3x the float32 widening's speed)
    products = np.einsum("ij,j->i", codes, query, dtype=np.int32)
    return products.astype(np.float32) * np.asarray(data.scales) * np.float32(top / 127.0)


def _rows(data: Any) -> Any:
    """The float32 rows of dense's segment data (a matrix, or a `Quantized` holding one)."""
    return data.vectors if isinstance(data, Quantized) else data


def read_at_random(matrix: Any) -> None:
    """Tell the kernel a memory-mapped matrix is read a row here and there: without it, each
    row rescored pulls its neighbours in by readahead, and a million rows' file (1.5 GB)
    ends up resident after a few dozen queries."""
    import mmap

    mapped = getattr(matrix, "_mmap", None)
    if mapped is not None and hasattr(mapped, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        mapped.madvise(mmap.MADV_RANDOM)


def _places(index: Any, total: int) -> Any:
    """Each row's place in the index order `index` (a permutation of the live rows)."""
    import numpy as np

    places = np.full(total, -1, dtype=np.int64)
    places[index] = np.arange(len(index), dtype=np.int64)
    return places


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DenseRetriever)
