"""Approximate dense retrieval with a faiss index (HNSW, IVF or flat, optionally 8-bit
scalar-quantised) built from the store's vectors.

The index is an inner-product index over the stored (normalised) vectors, saved through the
shared build folder (plm_index.builds: one build per corpus version and per index setting,
atomic, checksummed) and memory-mapped where faiss can. The exact vectors are kept too, as
in `dense`, for two reasons:

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

from plm_core.errors import MissingDependencyError, StaleIndexError, StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Snapshot
from plm_core.records import CorpusVersion, ExpandedQuery, ScoredChunk
from plm_index import builds
from plm_index.ranking import top_n
from plm_index.segments import SegmentedIndex
from plm_plugins.retrievers.dense import DenseRetriever, similarities

if TYPE_CHECKING:
    from plm_core.registry import Registry

META_FILE = "plm_faiss.json"
INDEX_FILE = "index.faiss"
FORMAT = 1
MIN_POINTS_PER_LIST = 39  # below this faiss's k-means warns that it has too few training points
TRAIN_POINTS_PER_LIST = 64  # IVF k-means trains on a sample of at most this many rows per list


class FaissRetriever(DenseRetriever):
    """Ranks chunks by inner product of normalised embeddings through a faiss ANN index."""

    name = "faiss"

    class Config(DenseRetriever.Config):
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
    _index: Any  # the faiss index; None for an empty corpus

    def check(self) -> None:
        super().check()
        _import_faiss()

    # ------------------------------------------------------------------ index
    # One build per corpus version under index_dir/faiss-<settings hash>/ (plm_index.builds).
    def index_base(self, index_dir: Path) -> Path:
        return builds.stage_folder(index_dir, "faiss", self._settings())

    def index_path(self, index_dir: Path, version: CorpusVersion) -> Path:
        return builds.build_path(self.index_base(index_dir), version, self._settings())

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

    def build(self, snapshot: Snapshot, index_dir: Path | None) -> None:
        super().build(snapshot, index_dir)  # the exact vectors (_matrix, _chunk_ids)
        rows = self._matrix.shape[0]
        index = self._new_index(self._matrix) if rows else None
        self._index = index
        if index_dir is not None:

            def write(folder: Path) -> None:
                if index is not None:
                    _import_faiss().write_index(index, str(folder / INDEX_FILE))

            meta = {
                **self._settings(),
                "version": snapshot.version.token,
                "num_docs": rows,
                "dim": int(self._matrix.shape[1]) if rows else 0,
                "factory": self.factory(rows) if rows else "",
                "empty": index is None,
            }
            builds.save_build(self.index_path(index_dir, snapshot.version), write, meta, META_FILE)

    def refresh(self, snapshot: Snapshot, index_dir: Path) -> None:
        """A whole build: a graph is built for one corpus version (segments of exact vectors
        are dense's; a faiss graph per segment is not done yet)."""
        self.build(snapshot, index_dir)

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

    def is_current(self, version: CorpusVersion, index_dir: Path) -> bool:
        # Its own build only: an index saved before `dense` saved its vectors stays current
        # (no HNSW rebuild for that); `load` then reads the exact vectors from the store.
        return builds.build_matches(self.index_path(index_dir, version), version, self._settings(), META_FILE)

    def load(self, snapshot: Snapshot, index_dir: Path) -> None:
        path, version = self.index_path(index_dir, snapshot.version), snapshot.version
        what = f"faiss index {self.label!r} under {self.index_base(index_dir)}"
        meta = builds.open_build(path, version, self._settings(), what, META_FILE)
        rows = snapshot.n_chunks
        if meta.get("num_docs") != rows:
            raise StoreError(
                f"faiss index {path} holds {meta.get('num_docs')} vectors but the store's version {version} has "
                f"{rows} chunks: run `plm index rebuild`"
            )
        try:
            super().load(snapshot, index_dir)  # the exact vectors (memory-mapped), checked against the chunks
        except StaleIndexError:  # none saved for this version: read (and check) the store's
            SegmentedIndex.build(self, snapshot, None)
        index = None if meta.get("empty") else self._read(path)
        if index is not None and (index.ntotal != rows or index.d != self._matrix.shape[1]):
            raise StoreError(
                f"faiss index {path} holds {index.ntotal} vectors of {index.d} dimensions but the store has "
                f"{rows} of {self._matrix.shape[1]}: run `plm index rebuild`"
            )
        self._index = index

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
        if not (path / META_FILE).exists():  # the build was replaced by a newer one meanwhile
            raise StaleIndexError(f"faiss index {path} was replaced while loading")
        reason = str(error).strip().splitlines()[-1] if error else "?"
        raise StoreError(f"faiss index {path} is corrupt ({reason}): run `plm index rebuild`")

    # ------------------------------------------------------------------ search
    def search(self, query: ExpandedQuery, n: int, allowed: Any = None) -> list[ScoredChunk]:
        import numpy as np

        rows = self._matrix.shape[0]
        if n <= 0 or not rows:
            return []
        vector = self.query_vector(query)
        mask = None if allowed is None else np.asarray(allowed, dtype=bool)
        pool = rows if mask is None else int(mask.sum())
        if not pool:
            return []
        if self._index is not None and pool >= self.config.exact_below and n < pool:
            ids = self._ann(vector, n, mask)
            if len(ids) >= n:  # else the index came back short (under a filter): scan instead
                return self._ranked(ids, similarities(self._matrix[ids], vector), n)
        return self._exact(vector, n, mask, pool)

    def _ann(self, vector: Any, n: int, mask: Any) -> Any:
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
        _, ids = self._index.search(vector.reshape(1, -1), n, params=params)
        found = ids[0]
        return found[found >= 0]

    def _exact(self, vector: Any, n: int, mask: Any, pool: int) -> list[ScoredChunk]:
        import numpy as np

        if mask is None or pool * 4 > len(mask):
            # Most rows pass: `dense`'s own ranking of the full product, ties included.
            scores = similarities(self._matrix, vector)
            if self.config.score == "unit":
                scores = (1.0 + scores.astype("float64")) / 2.0
            return top_n(scores, n, self._chunk_ids, self.label, mask)
        ids = np.flatnonzero(mask)  # a few rows: score only those
        return self._ranked(ids, similarities(self._matrix[ids], vector), n)

    def _ranked(self, ids: Any, scores: Any, n: int) -> list[ScoredChunk]:
        """The n best (row id, score) pairs as candidates: best first, 0-based ranks; exact
        ties put the later row first (what the POC's argsort()[::-1] meant; numpy's unstable
        full-array sort in `dense` may order such ties otherwise)."""
        import numpy as np

        if len(scores) > n:
            kth = np.partition(scores, len(scores) - n)[len(scores) - n]
            keep = np.flatnonzero(scores >= kth)  # every row tied with the n-th stays in the race
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((-ids, -scores))[:n]
        scores = scores.astype("float64")
        if self.config.score == "unit":
            scores = (1.0 + scores) / 2.0
        return [
            ScoredChunk(chunk_id=self._chunk_ids[int(ids[i])], score=float(scores[i]), source=self.label, rank=r)
            for r, i in enumerate(order.tolist())
        ]


def _import_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise MissingDependencyError("faiss (the faiss-cpu package)", "ann") from None
    return faiss


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(FaissRetriever)
