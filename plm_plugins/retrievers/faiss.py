"""Approximate dense retrieval with a faiss index (HNSW, IVF or flat, optionally 8-bit
scalar-quantised) built from the store's vectors.

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
from plm_plugins.retrievers.dense import DenseConfig, DenseRetriever, similarities

if TYPE_CHECKING:
    from plm import Registry

INDEX_FILE = "index.faiss"
FORMAT = 2
MIN_POINTS_PER_LIST = 39  # below this faiss's k-means warns that it has too few training points
TRAIN_POINTS_PER_LIST = 64  # IVF k-means trains on a sample of at most this many rows per list


class FaissRetriever(DenseRetriever):
    """Ranks chunks by inner product of normalised embeddings through a faiss ANN index."""

    name = "faiss"

    class Config(DenseConfig):
        index: Literal["flat", "hnsw", "ivf"] = "hnsw"
        """The faiss index: "hnsw" (a graph; fast, no training), "ivf" (k-means lists; the
        query scans `nprobe` of `nlist` lists) or "flat" (an exact scan inside faiss)."""
        quantizer: Literal["none", "sq8"] = "none"
        """How vectors are stored inside the index: "none" (float32) or "sq8" (8-bit scalar
        quantisation: a quarter of the memory, candidates chosen on approximate scores)."""
        hnsw_m: int = Field(32, ge=2, le=256)
        """HNSW: neighbours per node; more is better recall, a bigger graph and a slower build."""
        ef_construction: int = Field(80, ge=1)
        """HNSW: search width while building; more is better recall and a slower build."""
        ef_search: int = Field(64, ge=1)
        """HNSW: search width per query (raised to the number of hits asked for)."""
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
        vectors = super().build_data(rows)
        return FaissSegment(vectors, self._graph(vectors))

    def _graph(self, vectors: Any) -> Any:
        """A faiss index of these rows, or None when a segment this small is scanned exactly."""
        return self._new_index(vectors) if len(vectors) and len(vectors) >= self.config.exact_below else None

    def save_data(self, data: FaissSegment, folder: Path) -> None:
        super().save_data(data.vectors, folder)
        if data.index is not None:
            _import_faiss().write_index(data.index, str(folder / INDEX_FILE))

    def open_data(self, folder: Path, n_rows: int) -> FaissSegment:
        vectors = super().open_data(folder, n_rows)
        index = self._read(folder) if (folder / INDEX_FILE).exists() else None
        if index is not None and (index.ntotal != n_rows or index.d != vectors.shape[1]):
            raise ValueError(f"{INDEX_FILE} holds {index.ntotal} vectors of {index.d} dimensions, not {n_rows}")
        return FaissSegment(vectors, index)

    def merge_data(self, parts: list[FaissSegment], keep: list[Any]) -> FaissSegment:
        vectors = super().merge_data([p.vectors for p in parts], keep)
        return FaissSegment(vectors, self._graph(vectors))

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
        """A trained index of this kind for these vectors, with no rows added yet."""
        import numpy as np

        faiss = _import_faiss()
        rows, dim = matrix.shape
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

    def _read(self, path: Path) -> Any:
        faiss = _import_faiss()
        file = str(path / INDEX_FILE)
        # IO_FLAG_MMAP_IFC (faiss >= 1.11) maps the stored vectors / codes of every kind used
        # here instead of reading them; IO_FLAG_MMAP maps only IVF lists. A faiss or an index
        # kind that supports neither raises, and the file is read into memory instead.
        flags = [getattr(faiss, "IO_FLAG_MMAP_IFC", None), faiss.IO_FLAG_MMAP, 0]
        error: Exception | None = None
        for flag in flags:
            if flag is None:
                continue
            try:
                return faiss.read_index(file, flag)
            except RuntimeError as err:
                error = err
        reason = str(error).strip().splitlines()[-1] if error else "?"
        raise ValueError(f"faiss cannot read {INDEX_FILE}: {reason}")

    # ------------------------------------------------------------------ search
    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        """Each segment's best n allowed rows (its index when it has one and enough rows
        pass, else an exact scan), rescored exactly; then the n best of them all."""
        import numpy as np

        state = self.state
        if state is None:
            raise StaleIndexError(f"retriever {self.label!r} is not loaded")
        if n <= 0 or not state.n_live:
            return []
        vector = self.query_vector(query)
        mask = state.allowed_rows(allowed)
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
            if data.index is not None and pool >= self.config.exact_below and n < pool:
                ids = self._ann(data.index, vector, n, None if pool == seg.n else local)
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
        """Row ids of the index's top n (fewer when it finds fewer), restricted to `mask`."""
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
            _, ids = index.search(vector.reshape(1, -1), n, params=params)
        finally:
            faiss.omp_set_num_threads(threads)
        found = ids[0]
        return found[found >= 0].astype(np.int64)

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
    """One segment's exact vectors and its faiss index (None: scanned exactly)."""

    def __init__(self, vectors: Any, index: Any) -> None:
        self.vectors, self.index = vectors, index


def _import_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError("faiss (the faiss-cpu package)", "ann") from None
    return faiss


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(FaissRetriever)
