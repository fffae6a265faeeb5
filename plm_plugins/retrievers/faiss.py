"""Approximate dense retrieval with a faiss index (HNSW, IVF or flat; float32, 8-bit
scalar-quantised or binary) built from the store's vectors.

The index is kept as segments (plm_index.segments: a sync adds one, merges run in the
background): each holds its rows' exact vectors and, once it has `exact_below` rows, an
inner-product faiss index of them, memory-mapped where faiss can; a query asks every
segment for its best n and keeps the n best. The exact vectors serve two purposes:

- a filter that leaves fewer than `exact_below` rows, a request for at least as many hits as
  there are candidate rows, or an ANN answer with fewer than n hits (HNSW or IVF under a
  filter can return too few) is answered by an exact scan of the allowed rows, so n hits
  come back whenever n chunks match;
- the candidates faiss returns are re-scored with exact inner products (n dot products), so
  a hit's score means what `dense`'s means, whatever the index kind or quantiser, and ties
  are ordered as `dense` orders them (the later row first). Which candidates come back is
  faiss's choice: with `quantizer = "sq8"` they are chosen on approximate scores.

With `quantizer = "binary"` the index holds one bit a dimension, its sign (a 32nd of the
float32 bytes: faiss's IndexBinaryHNSW, IndexBinaryIVF or IndexBinaryFlat over Hamming
distance), asked for `oversample` x n candidates (at least 100, as `dense`'s `quantize`),
which are scored exactly on the float32 rows; those stay on disk, memory-mapped, and only
the rows rescored are read. faiss's binary IVF takes no row filter: a few rows left out
(deletions) are asked for on top and dropped, a wider filter scans the allowed rows' codes
(`codes.npy`, the same bits) by popcount instead.

    [query.retrieve.retrievers.dense]
    use = "faiss"
    index = "hnsw"
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from plm import ExpandedQuery, MissingDependencyError, ScoredChunk, StaleIndexError, hookimpl
from plm.indexes import Rows, take_ids
from plm_plugins.retrievers.dense import (
    CODES_FILE,
    MIN_CANDIDATES,
    DenseConfig,
    DenseRetriever,
    Quantized,
    approximate,
    read_at_random,
    similarities,
)

if TYPE_CHECKING:
    from plm import Registry

INDEX_FILE = "index.faiss"
BINARY_FILE = "binary.faiss"  # quantizer "binary": faiss's binary index (its own reader and writer)
# In every build's settings: raised when saved segments change meaning, so older builds are
# rebuilt, never misread. (quantizer "binary" only added files, in its own settings folder.)
FORMAT = 2
MIN_POINTS_PER_LIST = 39  # below this faiss's k-means warns that it has too few training points
TRAIN_POINTS_PER_LIST = 64  # IVF k-means trains on a sample of at most this many rows per list
SIGN_BLOCK = 65_536  # rows turned into sign bits at a time


class FaissRetriever(DenseRetriever):
    """Ranks chunks by inner product of normalised embeddings through a faiss ANN index."""

    name = "faiss"

    class Config(DenseConfig):
        index: Literal["flat", "hnsw", "ivf"] = "hnsw"
        """The faiss index: "hnsw" (a graph; fast, no training), "ivf" (k-means lists; the
        query scans `nprobe` of `nlist` lists) or "flat" (an exact scan inside faiss)."""
        quantizer: Literal["none", "sq8", "binary"] = "none"
        """How vectors are stored inside the index: "none" (float32), "sq8" (8-bit scalar
        quantisation: a quarter of the memory, candidates chosen on approximate scores) or
        "binary" (a bit a dimension, its sign: a 32nd of the memory; `oversample` x k
        candidates by Hamming distance, scored exactly on the float32 rows, which stay on
        disk). The hits' scores are exact whatever it is."""
        oversample: int = Field(10, ge=1, le=1000)
        """With quantizer "binary": rows scored exactly per hit asked for (at least 100), as
        `dense`'s `oversample`; more is better recall and slower queries. No rebuild."""
        hnsw_m: int = Field(32, ge=2, le=256)
        """HNSW: neighbours per node; more is better recall, a bigger graph and a slower build."""
        ef_construction: int = Field(80, ge=1)
        """HNSW: search width while building; more is better recall and a slower build."""
        ef_search: int = Field(64, ge=1)
        """HNSW: search width per query (raised to the candidates asked for: the hits, or
        with quantizer "binary" `oversample` x the hits)."""
        nlist: int | None = Field(None, ge=1)
        """IVF: number of lists; unset: about 4 x sqrt(rows), at most rows / 39."""
        nprobe: int = Field(16, ge=1)
        """IVF: lists scanned per query; more is better recall and slower queries."""
        exact_below: int = Field(2000, ge=0)
        """Search exactly (over the rows a filter leaves, or the whole corpus) when fewer rows
        than this are candidates: faster than the index there, and never short of hits."""

    config: Config

    def check(self) -> None:
        super().check()
        _import_faiss()

    # ------------------------------------------------------------------ index
    # Segments (plm_index.segments) under index_dir/faiss-<settings hash>/: each holds its
    # rows' exact vectors and, when it has at least `exact_below` rows, its own faiss index
    # (memory-mapped where faiss can). A sync adds a small segment, scanned exactly; merges
    # in the background build the graphs of the bigger ones.
    segment_kind = None  # its own segments: vectors and a graph together

    def segment_settings(self) -> dict[str, Any]:
        # Not exact_below: a segment without a graph is scanned exactly whatever it says.
        return self._settings()

    def index_base(self, index_dir: Path) -> Path:
        return self.stage_base(index_dir)

    def build_data(self, rows: Rows) -> FaissSegment:
        _import_faiss()  # needed for this stage at all, whether or not this segment gets a graph
        return self._segment_of(super().build_data(rows))

    def _segment_of(self, vectors: Any) -> FaissSegment:
        """These rows' segment data: the vectors, their sign bits (binary) and a faiss index,
        None when a segment this small is scanned exactly."""
        codes = sign_bits(vectors) if self._binary else None
        graph = len(vectors) > 0 and len(vectors) >= self.config.exact_below
        return FaissSegment(vectors, self._new_index(vectors if codes is None else codes) if graph else None, codes)

    @property
    def _binary(self) -> bool:
        return self.config.quantizer == "binary"

    def save_data(self, data: FaissSegment, folder: Path) -> None:
        import numpy as np

        super().save_data(data.vectors, folder)
        faiss = _import_faiss()
        if data.codes is not None:
            np.save(folder / CODES_FILE, data.codes, allow_pickle=False)
        if data.index is not None and self._binary:
            faiss.write_index_binary(data.index, str(folder / BINARY_FILE))
        elif data.index is not None:
            faiss.write_index(data.index, str(folder / INDEX_FILE))

    def open_data(self, folder: Path, n_rows: int) -> FaissSegment:
        from plm.indexes import load_npy

        vectors = super().open_data(folder, n_rows)
        # A folder of the other kind is another settings hash, never opened here; a file
        # missing from its own kind's folder fails the segment's checksums first.
        name = BINARY_FILE if self._binary else INDEX_FILE
        index = self._read(folder, name) if (folder / name).exists() else None
        codes = None
        if self._binary:
            read_at_random(vectors)  # only rescored rows are read: no readahead of their neighbours
            codes = load_npy(folder / CODES_FILE)
            if codes.shape != (n_rows, _code_bytes(vectors.shape[1])):
                raise ValueError(f"{CODES_FILE} holds {codes.shape} codes, not {n_rows} of {vectors.shape[1]} bits")
        bits = vectors.shape[1] if index is None or not self._binary else _code_bytes(vectors.shape[1]) * 8
        if index is not None and (index.ntotal != n_rows or index.d != bits):
            raise ValueError(f"{name} holds {index.ntotal} vectors of {index.d} dimensions, not {n_rows}")
        return FaissSegment(vectors, index, codes)

    def merge_data(self, parts: list[FaissSegment], keep: list[Any]) -> FaissSegment:
        return self._segment_of(super().merge_data([p.vectors for p in parts], keep))

    def vectors_of(self, data: FaissSegment) -> Any:
        return data.vectors

    def _settings(self) -> dict[str, Any]:
        """What the saved index depends on: its kind and build options (search-time ones and
        the other kinds' options left out, so changing them never forces a rebuild)."""
        c = self.config
        own: dict[str, dict[str, Any]] = {
            "hnsw": {"hnsw_m": c.hnsw_m, "ef_construction": c.ef_construction},
            "ivf": {"nlist": c.nlist},
        }
        return {"format": FORMAT, "index": c.index, "quantizer": c.quantizer, **own.get(c.index, {})}

    def factory(self, rows: int) -> str:
        """The faiss index_factory string for a corpus of `rows` vectors."""
        sq = self.config.quantizer == "sq8"
        if self._binary:  # faiss's binary index_factory: "B" and the kind
            return {"hnsw": f"BHNSW{self.config.hnsw_m}", "ivf": f"BIVF{self.nlist(rows)}", "flat": "BFlat"}[
                self.config.index
            ]
        if self.config.index == "hnsw":
            return f"HNSW{self.config.hnsw_m}" + (",SQ8" if sq else "")
        if self.config.index == "ivf":
            return f"IVF{self.nlist(rows)}," + ("SQ8" if sq else "Flat")
        return "SQ8" if sq else "Flat"

    def nlist(self, rows: int) -> int:
        if self.config.nlist is not None:
            return max(1, min(self.config.nlist, rows))  # k-means needs a point per list
        return max(1, min(round(4 * math.sqrt(rows)), rows // MIN_POINTS_PER_LIST))

    def _new_index(self, matrix: Any) -> Any:
        index = self.empty_index(matrix)
        index.add(matrix)
        return index

    def empty_index(self, matrix: Any) -> Any:
        """A trained index of this kind for these vectors (binary: their `sign_bits`), with
        no rows added yet."""
        import numpy as np

        faiss = _import_faiss()
        rows, dim = matrix.shape
        if self._binary:
            index = faiss.index_binary_factory(dim * 8, self.factory(rows))
        else:
            index = faiss.index_factory(dim, self.factory(rows), faiss.METRIC_INNER_PRODUCT)
        if self.config.index == "hnsw":
            index.hnsw.efConstruction = self.config.ef_construction
        if not index.is_trained:
            sample = matrix
            if self.config.index == "ivf" and rows > TRAIN_POINTS_PER_LIST * self.nlist(rows):
                # k-means on every row costs minutes at a million; a fixed sample keeps builds
                # reproducible. (SQ8 alone trains on all rows: its ranges come from the extremes.)
                picked = np.random.default_rng(0).choice(rows, TRAIN_POINTS_PER_LIST * self.nlist(rows), replace=False)
                sample = matrix[np.sort(picked)]
            index.train(sample)
        return index

    def _read(self, path: Path, name: str = INDEX_FILE) -> Any:
        faiss = _import_faiss()
        file = str(path / name)
        read = faiss.read_index_binary if name == BINARY_FILE else faiss.read_index
        # IO_FLAG_MMAP_IFC (faiss >= 1.11) maps the stored vectors / codes of every kind used
        # here instead of reading them; IO_FLAG_MMAP maps only IVF lists. A faiss or an index
        # kind that supports neither raises, and the file is read into memory instead.
        flags = [getattr(faiss, "IO_FLAG_MMAP_IFC", None), faiss.IO_FLAG_MMAP, 0]
        error: Exception | None = None
        for flag in flags:
            if flag is None:
                continue
            try:
                return read(file, flag)
            except RuntimeError as err:
                error = err
        reason = str(error).strip().splitlines()[-1] if error else "?"
        raise ValueError(f"faiss cannot read {name}: {reason}")

    # ------------------------------------------------------------------ search
    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        """Each segment's best n allowed rows (its index's candidates when it has one and
        more rows pass than candidates are asked for, else an exact scan), rescored exactly;
        then the n best of them all."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")
        if n <= 0 or not state.n_live:
            return []
        vector = self.query_vector(query)
        mask = state.allowed_rows(allowed)
        m = max(n * self.config.oversample, MIN_CANDIDATES) if self._binary else n  # candidates per segment
        rows, scores = [], []
        for i, seg in enumerate(state.segments):
            lo = int(state.offsets[i])
            local = mask[lo : lo + seg.n]
            # Unfiltered, a segment's pool is its live rows, known without counting them.
            pool = seg.n - len(state.deleted[i]) if allowed is None else int(local.sum())
            if not pool:
                continue
            data: FaissSegment = seg.data
            ids = None
            if data.index is not None and pool >= self.config.exact_below and m < pool:
                if self._binary and self.config.index == "ivf" and pool < seg.n:
                    ids = self._binary_ivf(data, vector, m, local, seg.n - pool)
                else:
                    ids = self._ann(data.index, vector, m, None if pool == seg.n else local)
                if len(ids) < n:  # the index came back short (under a filter): scan instead
                    ids = None
            if ids is None:
                ids = np.flatnonzero(local)
            found = similarities(np.asarray(data.vectors)[ids], vector)
            if len(found) > n:  # keep every row tied with the n-th: the final cut orders ties
                kth = np.partition(found, len(found) - n)[len(found) - n]
                keep = found >= kth
                ids, found = ids[keep], found[keep]
            rows.append(ids + lo)
            scores.append(found)
        if not rows:
            return []
        return self._ranked(np.concatenate(rows), np.concatenate(scores), n)

    def _ann(self, index: Any, vector: Any, n: int, mask: Any) -> Any:
        """Row ids of the index's top n (fewer when it finds fewer), restricted to `mask`
        (binary: by the Hamming distance of the query's sign bits)."""
        import numpy as np

        faiss = _import_faiss()
        # Options go in per-query SearchParameters, never on the shared index: concurrent
        # queries (a service's threads) must not change each other's search width.
        if self.config.index == "hnsw":
            params = faiss.SearchParametersHNSW()
            params.efSearch = max(self.config.ef_search, n)
        elif self.config.index == "ivf":
            params = faiss.SearchParametersIVF()
            params.nprobe = self.config.nprobe  # faiss caps it at nlist
        else:
            params = faiss.SearchParameters()
        selector = None  # a local, so it (and the bitmap it holds) lives until search returns
        if mask is not None:
            # One bit per row: bit i % 8 of byte i // 8.
            selector = faiss.IDSelectorBitmap(np.packbits(mask, bitorder="little"))
            params.sel = selector
        # One query: one OpenMP thread. A second one only waits, spinning on the other core
        # that the other retrievers of a hybrid query use (2 ms of a query on 2 cores). The
        # setting is this thread's own (an OpenMP ICV), and is put back.
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            query = sign_bits(vector.reshape(1, -1)) if self._binary else vector.reshape(1, -1)
            _, ids = index.search(query, n, params=params)
        finally:
            faiss.omp_set_num_threads(threads)
        found = ids[0]
        return found[found >= 0].astype(np.int64)

    def _binary_ivf(self, data: FaissSegment, vector: Any, m: int, mask: Any, excluded: int) -> Any:
        """The m best candidates of `mask`'s rows in a binary IVF segment, which faiss cannot
        restrict: a few rows left out (deletions) are asked for on top and dropped; a wider
        filter is answered by a popcount scan of the allowed rows' codes."""
        if excluded <= m:
            ids = self._ann(data.index, vector, m + excluded, None)
            return ids[mask[ids]][:m]
        return _hamming_top(data.codes, vector, m, mask)

    def _ranked(self, rows: Any, scores: Any, n: int) -> list[ScoredChunk]:
        """The n best (row, exact score) pairs as candidates: best first, 0-based ranks; exact
        ties put the later chunk (in the store's index order) first."""
        import numpy as np

        assert self.state is not None
        order = np.lexsort((-self.state.order[rows], -scores))[:n]
        best = scores[order].astype("float64")
        if self.config.score == "unit":
            best = (1.0 + best) / 2.0
        found = zip(take_ids(self.state.ids, rows[order]), best.tolist(), strict=True)
        return [ScoredChunk(chunk_id=c, score=s, source=self.label, rank=r) for r, (c, s) in enumerate(found)]


class FaissSegment:
    """One segment's exact vectors, its faiss index (None: scanned exactly) and, with
    quantizer "binary", the vectors' sign bits (what the index holds, kept for a filter
    faiss's binary IVF cannot apply)."""

    def __init__(self, vectors: Any, index: Any, codes: Any = None) -> None:
        self.vectors, self.index, self.codes = vectors, index, codes


def sign_bits(vectors: Any) -> Any:
    """Each row's signs, a bit a dimension, 8 to a byte: `dense`'s binary codes (the last
    byte padded with zeros, which add nothing to a Hamming distance). In blocks of rows: a
    million rows' comparison at once would hold 384 MB of booleans."""
    import numpy as np

    rows, dim = vectors.shape
    codes = np.empty((rows, _code_bytes(dim)), dtype=np.uint8)
    for lo in range(0, rows, SIGN_BLOCK):
        codes[lo : lo + SIGN_BLOCK] = np.packbits(np.asarray(vectors[lo : lo + SIGN_BLOCK]) > 0, axis=1)
    return codes


def _hamming_top(codes: Any, vector: Any, m: int, mask: Any) -> Any:
    """The m rows of `mask`'s whose sign bits are nearest the query's (`dense`'s popcount)."""
    import numpy as np

    allowed = np.flatnonzero(mask)
    if m >= len(allowed):
        return allowed
    near = approximate(Quantized(None, np.asarray(codes)[allowed], None), vector)
    return allowed[np.argpartition(-near, m - 1)[:m]]


def _code_bytes(dim: int) -> int:
    return (dim + 7) // 8


def _import_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError("faiss (the faiss-cpu package)", "ann") from None
    return faiss


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(FaissRetriever)
