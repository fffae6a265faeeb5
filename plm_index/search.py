"""Answering queries over a store: indexes kept current with the corpus version, one store
snapshot per query, filter masks, hits looked up in the store, and the final cut to k.

`Searcher` drives every `Index` among the query stages (built after ingest, loaded or
rebuilt in memory at query time); `CorpusView` is what retrieval stages receive to turn
filters into row masks and candidates into hits; `SingleRetrieval` lets any retriever be
the whole `[query.retrieve]` stage.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plm_core.component import ComponentConfig
from plm_core.errors import IndexDamagedError, PipelineError, PlmUserError, StaleIndexError, StoreError
from plm_core.interfaces import Embedder, Index, RankingStage, Retrieval, Retriever, Store
from plm_core.pipeline import Pipeline
from plm_core.records import (
    CorpusVersion,
    ExpandedQuery,
    FusionConfig,
    Hit,
    Query,
    Ranking,
    ScoredChunk,
)
from plm_index.corpus import CorpusSnapshot
from plm_index.documents import check_text
from plm_index.filters import filter_key
from plm_index.ranking import below_title, source_score
from plm_index.segments import SegmentedIndex
from plm_index.segments import damage as segment_damage

log = logging.getLogger(__name__)
_warned_stale: list[bool] = []  # non-empty once this process reported a stale index
MAX_K = 10_000
MAX_QUERY_CHARS = 100_000


class CorpusView:
    """The chunk rows of the corpus version being searched: filter masks over them (the
    store evaluates the filter spec) and hits looked up by chunk id."""

    def __init__(self, store: Store, location: Path | str) -> None:
        self.store, self.location = store, location
        self.n_chunks = 0
        self._masks: OrderedDict[str, tuple[Any, int]] = OrderedDict()

    def reset(self, snapshot: CorpusSnapshot) -> None:
        self.n_chunks = snapshot.n_chunks
        self._masks = OrderedDict()

    def allowed(self, filters: Mapping[str, Any] | None) -> tuple[Any, int]:
        """(boolean row mask or None for "every row", rows that pass). Masks are cached per
        spec for this version: a UI repeats the same few filters."""
        if not filters:
            return None, self.n_chunks
        key = filter_key(filters)  # validates first: a bad spec fails before any work
        if key not in self._masks:
            mask = self.store.filter_mask(filters)
            if len(mask) != self.n_chunks:
                raise StoreError(f"{len(mask)} filter rows for {self.n_chunks} chunks: run `plm index rebuild`")
            mask.flags.writeable = False
            self._masks[key] = (mask, int(mask.sum()))
            while len(self._masks) > 8:  # one byte per chunk each
                self._masks.popitem(last=False)
        self._masks.move_to_end(key)
        mask, n = self._masks[key]
        return (None if n == self.n_chunks else mask), n

    def hits(self, ranked: Sequence[ScoredChunk], sources: Mapping[str, Sequence[ScoredChunk]]) -> tuple[Hit, ...]:
        """Hits for ranked candidates (ranks from 1), with each source's rank (from 1) and
        score of that chunk."""
        chunks = self.store.get_chunks([s.chunk_id for s in ranked])
        by_source = {label: {s.chunk_id: s for s in found} for label, found in sources.items()}
        hits = []
        for rank, scored in enumerate(ranked):
            chunk = chunks.get(scored.chunk_id)
            if chunk is None:
                raise StoreError(
                    f"chunk {scored.chunk_id!r} is in the index but not in the store at {self.location}: "
                    "run `plm index rebuild`"
                )
            hits.append(
                Hit(
                    chunk_id=chunk.id,
                    doc_id=chunk.doc_id,
                    score=scored.score,
                    rank=rank + 1,
                    text=chunk.text,
                    heading_path=below_title(chunk.heading_path, chunk.metadata.get("title")),
                    metadata=chunk.metadata,
                    sources={
                        label: source_score(found[chunk.id].rank + 1, found[chunk.id].score)
                        for label, found in by_source.items()
                        if chunk.id in found
                    },
                )
            )
        return tuple(hits)


class SingleRetrieval(Retrieval):
    """A retriever as the whole `[query.retrieve]` stage: its candidates are the hits."""

    name = "single_retrieval"
    needs = ("corpus",)
    parts = {"retriever": Retriever}
    corpus: CorpusView
    retriever: Retriever

    class Config(ComponentConfig):
        pass

    def run(self, data: ExpandedQuery) -> Ranking:
        query = ExpandedQuery.of(data)
        if query.weights:
            raise PlmUserError(
                f'per-query weights need a fusing retrieval stage (use = "hybrid"); [query.retrieve] here '
                f"is the single retriever {self.retriever.label!r}, which has nothing to weigh"
            )
        allowed, n_rows = self.corpus.allowed(query.filters)
        found = self.retriever.search(query, min(query.depth, n_rows), allowed) if n_rows else []
        fusion = FusionConfig(candidates=len(found), weights={self.retriever.label: 1.0}, profile="")
        return Ranking(query=query, hits=self.corpus.hits(found, {self.retriever.label: found}), fusion=fusion)


def check_query(text: Any, k: Any) -> None:
    """Validate what a caller passes before anything runs: one clear error each."""
    check_text(text, "the query")  # a string, valid Unicode: the check documents pass too
    if not text.strip():
        raise PlmUserError("the query is empty: give some words to search for")
    if len(text) > MAX_QUERY_CHARS:
        raise PlmUserError(f"the query has {len(text):,} characters; at most {MAX_QUERY_CHARS:,} are allowed")
    if isinstance(k, bool) or not isinstance(k, int):  # True, nan, "5", 2.0: say so, do not coerce
        raise PlmUserError(f"k must be a whole number from 1 to {MAX_K}, got {k!r}")
    if not 1 <= k <= MAX_K:
        raise PlmUserError(f"k must be from 1 to {MAX_K}, got {k}")


def check_weights(weights: Any) -> None:
    """Per-query fusion weights: a table of source name -> finite number >= 0."""
    if weights is None:
        return
    if not isinstance(weights, Mapping) or not weights:
        raise PlmUserError(f"weights must be a non-empty table of source name -> number, got {weights!r}")
    for name, w in weights.items():
        if not isinstance(name, str) or isinstance(w, bool) or not isinstance(w, (int, float)):
            raise PlmUserError(f"weights: {name!r} = {w!r}; give a source name and a number, e.g. dense=0.5")
        if not math.isfinite(w) or w < 0:
            raise PlmUserError(f"weights: {name!r} = {w!r}; a weight is a finite number >= 0")


class Searcher:
    """Runs the query pipeline over one store, keeping its indexes current."""

    def __init__(
        self, store: Store, stages: Sequence[Any], index_dir: Path, corpus: CorpusView, embedder: Embedder | None
    ) -> None:
        self.store, self.index_dir, self.corpus, self.embedder = store, index_dir, corpus, embedder
        self.pipeline = Pipeline()
        for stage in stages:
            self.pipeline.add(stage)
        self.indexes: list[Any] = [c for s in stages for c in s.components() if isinstance(c, Index)]
        self.ranking_stages = [s for s in stages if isinstance(s, RankingStage)]
        self.version: CorpusVersion | None = None  # the version the indexes are warm for
        self.checked_model: str | None = None  # the model name the loaded vectors were checked against
        self.empty = False
        # A server reloads while writers (its watcher, `plm watch`, `plm ingest`) are between
        # committing a version and saving its builds: a stale build is expected there.
        self.expect_stale = False

    @property
    def uses_vectors(self) -> bool:
        return any(ix.needs_vectors for ix in self.indexes)

    def snapshot(self) -> CorpusSnapshot:
        """The store's current state (call inside `store.snapshot()`)."""
        model = self.embedder.expected_model_name if self.embedder is not None and self.uses_vectors else None
        self.checked_model = model
        return CorpusSnapshot(self.store, self.index_dir, model)

    def indexes_current(self, version: CorpusVersion) -> bool:
        return all(ix.is_current(version, self.index_dir) for ix in self.indexes)

    def ahead(self, texts: Sequence[str]) -> None:
        """Chunks' index texts just stored, for each index to start on (`Index.ahead`)."""
        for ix in self.indexes:
            ix.ahead(texts)

    def ahead_done(self) -> None:
        for ix in self.indexes:
            ix.ahead_done()

    def rebuild(self, timings: dict[str, float] | None = None, whole: bool = True, check: bool = True) -> None:
        """Build and save every index from what the store holds now; with `whole` false,
        bring each saved index up to date by its cheapest path (`Index.refresh`). `check`
        false: a sync that wrote its own chunks' vectors asks for no store-wide count."""
        with self.store.snapshot():
            # Counted over every chunk, and every vector (0.2 s and more at a million): a sync of
            # BM25 segments, or of a few documents with their vectors, skips it. A new segment
            # still refuses rows without vectors (`SegmentedIndex._rows`).
            checked = self.store.consistency_problems() if whole or (check and self.uses_vectors) else []
            problems = [p for p in checked if self.uses_vectors or not p.about_vectors]
            if problems:
                raise StoreError(
                    f"the store in {self.index_dir} is inconsistent ({'; '.join(map(str, problems))}): run "
                    "`plm ingest` on the same sources to finish, or `plm index rebuild`"
                )
            snap = self.snapshot()
            for ix in self.indexes:
                t0 = time.perf_counter()
                if whole:
                    ix.build(snap, self.index_dir)
                elif not ix.is_current(snap.version, self.index_dir):
                    ix.refresh(snap, self.index_dir)
                else:
                    ix.load(snap, self.index_dir)  # saved already: opened, so every index is warm
                if timings is not None:
                    timings[f"index:{ix.label}"] = time.perf_counter() - t0
            self._warm_for(snap)

    def _warm_for(self, snap: CorpusSnapshot) -> None:
        self.corpus.reset(snap)
        self.version, self.empty = snap.version, snap.empty

    def _load(self) -> None:
        """Open every index for the store's current version; one built for another version
        is rebuilt in memory from the store (queries never write), never used."""
        snap = self.snapshot()
        if snap.empty:  # nothing to search: `search` says so, with no word about builds
            self._warm_for(snap)
            return
        for ix in self.indexes:
            try:
                ix.load(snap, self.index_dir)
            except IndexDamagedError as err:
                log.warning("%s; meanwhile rebuilt in memory from the store", err)
                ix.build(snap, None)
            except StaleIndexError as err:
                # At warning level once per process: during another process's ingest every
                # committed batch is a new version, and a query server must not flood its log.
                level = logging.INFO if _warned_stale or self.expect_stale else logging.WARNING
                _warned_stale.append(True)
                log.log(level, "%s: rebuilt in memory from the store (`plm index rebuild` saves one)", err)
                ix.build(snap, None)
        self._warm_for(snap)

    def build_problems(self) -> list[str]:
        """What is damaged in the saved builds of the store's current version (each file
        checked by content) and in every saved version of a segmented index (`damage`), one
        line each; a build that is missing or stale is no damage."""
        problems = []
        with self.store.snapshot():
            snap = self.snapshot()
            for ix in self.indexes:
                try:
                    ix.load(snap, self.index_dir)
                except IndexDamagedError as err:
                    problems.append(str(err))
                except StaleIndexError:
                    continue
                except StoreError as err:
                    problems.append(str(err))
        return list(dict.fromkeys([*problems, *self.damage()]))

    def damage(self) -> list[str]:
        """What is damaged in the saved segmented indexes (manifests, segments, deletion
        files), one line each; reads only, so a server may call it beside its readers."""
        bases = dict.fromkeys(ix.stage_base(self.index_dir) for ix in self.indexes if isinstance(ix, SegmentedIndex))
        return [problem for base in bases for problem in segment_damage(base)]

    def warm(self) -> None:
        """Load every index for the store's current version now (inside `store.snapshot()`),
        so that no query has to: a service warms a new generation before swapping it in."""
        self._load()

    def depth(self, k: int) -> int:
        """How many candidates retrieval passes on: the most any later ranking stage wants."""
        return max([k, *(s.depth(k) for s in self.ranking_stages)])

    def search(self, query: Query) -> tuple[Ranking, dict[str, float]]:
        """The top query.k hits and seconds per stage; one store snapshot per query, so a
        sync in another process is seen whole, and a newer version re-warms the indexes."""
        check_query(query.text, query.k)
        check_weights(query.weights)
        query = Query(
            text=query.text,
            k=query.k,
            filters=query.filters,
            id=query.id,
            depth=self.depth(query.k),
            weights=query.weights,
        )
        with self.store.snapshot():
            if self.store.version() != self.version:
                self._load()
            if self.empty:
                raise StoreError(f"the index at {self.index_dir} is empty: run `plm ingest` or `plm run` first")
            for ix in self.indexes:
                if isinstance(ix, SegmentedIndex):
                    ix.check_files()  # a stat per file: one changed under this reader is refused
            try:
                result = self.pipeline.run(query)
            except PipelineError as err:
                if isinstance(err.cause, PlmUserError):
                    raise err.cause from None
                raise
        ranking = result.output
        if self.checked_model and self.embedder is not None and self.embedder.model_name != self.checked_model:
            raise StoreError(  # the model found first failed to load and another one answered
                f"the vectors at {self.index_dir} were checked against {self.checked_model!r} but the embedder loaded "
                f"{self.embedder.model_name!r}: fix the model named first in [embedder], or run `plm ingest --force`"
            )
        if len(ranking.hits) > query.k:
            ranking = Ranking(query=ranking.query, hits=ranking.hits[: query.k], fusion=ranking.fusion)
        return ranking, dict(result.timings)


def no_match(filters: Mapping[str, Any] | None) -> str:
    """The line for a query with no hit; under filters, with the rule that surprises: a
    chunk without a filtered field never matches, `!=` included (as SQL, unlike a search
    engine's must_not)."""
    if not filters:
        return "no match: no chunk matches the query"
    return (
        f"no match: no chunk matches the filters {json.dumps(filters, default=str)} "
        "(a chunk without a filtered field never matches, != included)"
    )


def query_payload(text: str, ranking: Any, timings: dict[str, float], filters: Any) -> dict[str, Any]:
    """A query's result as JSON data: what `plm query --json` prints and `plm serve` returns;
    with no hit, a `note` says why (a misspelled filter field reads differently from no match)."""
    payload = {
        "query": text,
        "expanded": ranking.query.text,
        "fired": list(ranking.query.fired),
        "filters": filters,
        "hits": [h.as_dict() for h in ranking.hits],
        "timings_ms": {s: round(1000 * t, 3) for s, t in timings.items()},
    }
    if not ranking.hits:
        payload["note"] = no_match(filters)
    return payload
