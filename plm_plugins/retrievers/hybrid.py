"""Hybrid retrieval: several retrievers, one fuser, hits looked up in the store.

The config names the parts as nested tables, e.g.

    [query.retrieve]
    use = "hybrid"
    [query.retrieve.retrievers.dense]
    use = "dense"
    [query.retrieve.retrievers.bm25]
    use = "bm25s"
    [query.retrieve.fuser]
    use = "rrf"

and the Job builds them into `self.retrievers` ({table name: Retriever}) and `self.fuser`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plm_core.component import BaseComponent, ComponentConfig
from plm_core.errors import ConfigError, StaleIndexError, StoreError
from plm_core.filters import compile_filters, filter_key
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Fuser, Ranking, Retriever
from plm_core.records import Chunk, EmbeddedQuery, ExpandedQuery, Hit, ScoredChunk

if TYPE_CHECKING:
    from plm_core.registry import Registry

log = logging.getLogger(__name__)
_warned_stale: list[bool] = []  # non-empty once this process reported a stale index


class HybridRetrieval(BaseComponent[ExpandedQuery, Ranking]):
    """Runs every retriever for the fuser's candidate count, fuses, returns the top k hits."""

    name = "hybrid"
    family = "retrievers"
    input_type = ExpandedQuery
    output_type = Ranking

    retrievers: dict[str, Retriever]
    fuser: Fuser

    class Config(ComponentConfig):
        # Nested component tables (each with `use`); validated by the config loader.
        retrievers: dict[str, Any]
        fuser: dict[str, Any]

    # ------------------------------------------------------------------ parts
    def _parts(self) -> tuple[dict[str, Retriever], Fuser]:
        retrievers, fuser = getattr(self, "retrievers", None), getattr(self, "fuser", None)
        label = getattr(self, "label", self.name)
        if (
            not isinstance(retrievers, dict)
            or not retrievers
            or not all(isinstance(r, Retriever) for r in retrievers.values())
        ):
            raise ConfigError(
                f"[query.{label}] needs retriever tables, e.g. [query.{label}.retrievers.bm25] "
                'use = "bm25s"; each must name a retriever (see `plm plugins`)'
            )
        if not isinstance(fuser, Fuser):
            raise ConfigError(f'[query.{label}] needs a fuser table, e.g. [query.{label}.fuser] use = "rrf"')
        return retrievers, fuser

    def check(self) -> None:
        retrievers, fuser = self._parts()
        fuser.check_sources(list(retrievers))

    # ------------------------------------------------------------------ indexes
    def build_indexes(self, chunks: Sequence[Chunk], matrix: Any, version: str = "") -> dict[str, float]:
        """Build every retriever's index; returns seconds per retriever ("index:<label>")."""
        retrievers, _ = self._parts()
        timings: dict[str, float] = {}
        for label, retriever in retrievers.items():
            if retriever.needs_vectors and matrix is None and chunks:
                raise StoreError(
                    f"retriever {label!r} needs chunk vectors but none were computed: add an "
                    "[embedder] table to the config"
                )
            t0 = time.perf_counter()
            retriever.build(chunks, matrix if retriever.needs_vectors else None, self.context.index_dir, version)
            timings[f"index:{label}"] = time.perf_counter() - t0
        # Each retriever keeps what it just built in memory, ready to search.
        self._chunk_ids = [c.id for c in chunks]
        self._metadata = [dict(c.metadata) for c in chunks]
        self._warm = True
        return timings

    def indexes_ok(self, version: str) -> bool:
        """True when every retriever's saved index exists for this store version."""
        retrievers, _ = self._parts()
        return all(r.index_matches(self.context.index_dir, version) for r in retrievers.values())

    def warm_up(self) -> None:
        """Load every retriever for the store's current version (call inside a store
        snapshot); an index built for another version is rebuilt from the store, with a
        message, never used."""
        retrievers, _ = self._parts()
        store = self.context.store
        version = store.version()
        chunk_ids = store.chunk_ids()
        vectors = None
        if any(r.needs_vectors for r in retrievers.values()):
            vectors = self._stored_vectors(chunk_ids)
        chunks: list[Chunk] | None = None
        for retriever in retrievers.values():
            vecs = vectors if retriever.needs_vectors else None
            try:
                retriever.load(self.context.index_dir, chunk_ids, vecs, version)
            except StaleIndexError as err:
                # Rebuilt in memory only: queries never write, so they cannot race an ingest
                # (which saves its own build when it finishes) or need a writable folder.
                # At warning level once per process: during another process's ingest every
                # committed batch is a new version, and a query server must not flood its log.
                level = logging.INFO if _warned_stale else logging.WARNING
                _warned_stale.append(True)
                hint = "rebuilt in memory from the store (`plm ingest` or `plm index rebuild` saves one)"
                log.log(level, "%s: %s", err, hint)
                chunks = store.chunks() if chunks is None else chunks
                retriever.build(chunks, vecs, self.context.index_dir, version, save=False)
        self._chunk_ids = chunk_ids
        self._metadata = store.chunk_metadata()
        self._version = version

    def _stored_vectors(self, chunk_ids: list[str]) -> Any:
        store = self.context.store
        problems = [p for p in store.consistency_problems() if "vector" in p]
        if problems:
            raise StoreError(
                f"the index at {self.context.index_dir} is half re-embedded ({'; '.join(problems)}): "
                "run `plm ingest` on the same sources to finish, or `plm index rebuild` to re-embed what is missing"
            )
        vector_ids, vectors, stored_model = store.vectors()
        embedder = getattr(self.context, "embedder", None)
        if embedder is not None and vectors is not None and stored_model != embedder.model_name:
            # Same dimension or not, another model's query vectors would rank silently wrong.
            raise StoreError(
                f"the index at {self.context.index_dir} was embedded with {stored_model!r} but the "
                f"config now loads {embedder.model_name!r}: run `plm ingest --force` (or `plm run`)"
            )
        if vectors is not None and list(vector_ids) != chunk_ids:
            raise StoreError(
                f"the vectors in {self.context.index_dir} do not line up with its chunks: run `plm ingest --force`"
            )
        return vectors

    # ------------------------------------------------------------------ query
    def _embedded(self, query: ExpandedQuery, retrievers: dict[str, Retriever]) -> ExpandedQuery:
        """Embed the query once for all dense retrievers (unless a stage already did)."""
        embedder = getattr(self.context, "embedder", None)
        if isinstance(query, EmbeddedQuery) or embedder is None:
            return query
        if not any(r.needs_vectors for r in retrievers.values()):
            return query
        embedder.ensure_warm()
        return EmbeddedQuery.with_vector(query, embedder.embed_query(query.text), embedder.model_name)

    def _allowed(self, filters: Mapping[str, Any]) -> tuple[Any, int]:
        """A read-only boolean mask over the rows (chunk order) that pass `filters`, and its count.

        Masks are cached per filter spec, since a UI repeats the same few filters; the cache
        belongs to the loaded chunk metadata, so a rebuild or reload (a new list) drops it.
        """
        import numpy as np

        key = filter_key(filters)  # validates first: a bad spec fails before any work
        metadata: Sequence[Mapping[str, Any]] = self._metadata
        if len(metadata) != len(self._chunk_ids):
            raise StoreError(
                f"{len(metadata)} metadata rows for {len(self._chunk_ids)} chunks: run `plm index rebuild`"
            )
        state: tuple[Sequence[Mapping[str, Any]], dict[str, tuple[Any, int]]] | None
        state = getattr(self, "_filter_state", None)
        if state is None or state[0] is not metadata:
            state = (metadata, {})
            self._filter_state = state
        masks: dict[str, tuple[Any, int]] = state[1]
        if key in masks:
            masks[key] = masks.pop(key)  # most recently used last
            return masks[key]
        match = compile_filters(filters)
        if match is None:
            mask = np.ones(len(metadata), dtype=bool)
        else:
            mask = np.fromiter((match(m) for m in metadata), dtype=bool, count=len(metadata))
        mask.flags.writeable = False
        masks[key] = (mask, int(mask.sum()))
        while len(masks) > 8:  # a few recent specs; each mask is one byte per chunk
            masks.pop(next(iter(masks)))
        return masks[key]

    def run(self, data: ExpandedQuery) -> Ranking:
        self.ensure_warm()
        retrievers, fuser = self._parts()
        query = ExpandedQuery.of(data)
        # Filters act inside every retriever, before its top-n cut, and the candidate count
        # follows the rows left: a filtered query gets k hits whenever k chunks match.
        allowed, n_rows = None, len(self._chunk_ids)
        if query.filters:
            allowed, n_rows = self._allowed(query.filters)
            if n_rows == 0:
                return Ranking(query=query, hits=(), fusion=fuser.settings_for(query, 0))
            if n_rows == len(self._chunk_ids):
                allowed = None  # everything passes: skip the masking
        query = self._embedded(query, retrievers)
        settings = fuser.settings_for(query, n_rows)
        rankings: dict[str, list[ScoredChunk]] = {
            label: retriever.search(query, settings.candidates, allowed) for label, retriever in retrievers.items()
        }
        fused = fuser.fuse(rankings, settings)[: max(0, query.k)]
        chunks = self.context.store.get_chunks([f.chunk_id for f in fused])
        by_source = {label: {s.chunk_id: (s.rank, s.score) for s in ranking} for label, ranking in rankings.items()}
        hits = []
        for rank, scored in enumerate(fused):
            chunk = chunks.get(scored.chunk_id)
            if chunk is None:
                raise StoreError(
                    f"chunk {scored.chunk_id!r} is in the index but not in the store: run `plm ingest --force`"
                )
            hits.append(
                Hit(
                    chunk_id=chunk.id,
                    doc_id=chunk.doc_id,
                    score=scored.score,
                    rank=rank,
                    text=chunk.text,
                    heading_path=chunk.heading_path,
                    metadata=chunk.metadata,
                    sources={lb: found[chunk.id] for lb, found in by_source.items() if chunk.id in found},
                )
            )
        return Ranking(query=query, hits=tuple(hits), fusion=settings)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HybridRetrieval)
