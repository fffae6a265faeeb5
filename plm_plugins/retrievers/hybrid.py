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

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plm_core.component import BaseComponent, ComponentConfig
from plm_core.errors import ConfigError, PlmUserError, StoreError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Fuser, Ranking, Retriever
from plm_core.records import Chunk, EmbeddedQuery, ExpandedQuery, Hit, ScoredChunk

if TYPE_CHECKING:
    from plm_core.registry import Registry


class HybridRetrieval(BaseComponent[ExpandedQuery, Ranking]):
    """Runs every retriever for the fuser's candidate count, fuses, returns the top k hits."""

    name = "hybrid"
    family = "retrieval"
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
    def build_indexes(self, chunks: Sequence[Chunk], matrix: Any) -> dict[str, float]:
        """Build every retriever's index; returns seconds per retriever ("index:<label>")."""
        retrievers, _ = self._parts()
        timings: dict[str, float] = {}
        for label, retriever in retrievers.items():
            if retriever.needs_vectors and matrix is None:
                raise StoreError(
                    f"retriever {label!r} needs chunk vectors but none were computed: add an "
                    "[embedder] table to the config"
                )
            t0 = time.perf_counter()
            retriever.build(chunks, matrix if retriever.needs_vectors else None, self.context.index_dir)
            timings[f"index:{label}"] = time.perf_counter() - t0
        # Each retriever keeps what it just built in memory, ready to search.
        self._chunk_ids = [c.id for c in chunks]
        self._warm = True
        return timings

    def indexes_ok(self) -> bool:
        """True when every retriever's saved index exists and matches the store's chunk count."""
        retrievers, _ = self._parts()
        n_chunks = int(self.context.store.stats().get("chunks", 0))
        for retriever in retrievers.values():
            if not retriever.index_matches(self.context.index_dir, n_chunks):
                return False
        return True

    def warm_up(self) -> None:
        retrievers, _ = self._parts()
        store = self.context.store
        chunk_ids = store.chunk_ids()
        vectors = None
        if any(r.needs_vectors for r in retrievers.values()):
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
        for retriever in retrievers.values():
            retriever.load(self.context.index_dir, chunk_ids, vectors if retriever.needs_vectors else None)
        self._chunk_ids = chunk_ids

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

    def run(self, data: ExpandedQuery) -> Ranking:
        self.ensure_warm()
        retrievers, fuser = self._parts()
        query = ExpandedQuery.of(data)
        if query.filters:
            raise PlmUserError(
                f"retrieval stage {getattr(self, 'label', self.name)!r} does not support metadata "
                f"filters yet (got {dict(query.filters)}); run the query without filters"
            )
        query = self._embedded(query, retrievers)
        settings = fuser.settings_for(query, len(self._chunk_ids))
        rankings: dict[str, list[ScoredChunk]] = {
            label: retriever.search(query, settings.candidates) for label, retriever in retrievers.items()
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
