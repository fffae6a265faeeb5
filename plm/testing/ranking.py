"""The checks of what makes and reorders rankings: a fuser (`check_fuser`), the
`[query.retrieve]` stage (`check_retrieval`) and a stage after it, a reranker included
(`check_ranking_stage`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plm.testing.corpus import CHUNKS, QUERIES, MemoryCorpus, query, snapshot_of
from plm.testing.retrievers import _hits, _pairs
from plm.testing.rules import Rules, checking
from plm_core.interfaces import Fuser, RankingStage, Retrieval, Retriever
from plm_core.records import Chunk, ExpandedQuery, FusionConfig, Hit, Ranking, ScoredChunk


def check_fuser(fuser: Fuser, sources: Sequence[str] = ("dense", "bm25")) -> None:
    """`fuser` configured for retrievers labelled `sources` (two of them)."""
    with checking("fusers") as rules:
        a, b = sources
        fuser.check_sources(list(sources))
        settings = fuser.settings_for(ExpandedQuery(text="q", k=3), 10)
        rules.require(isinstance(settings, FusionConfig), "settings_for() returns a plm.FusionConfig")
        rules.expect(0 <= settings.candidates <= 10, "settings_for(q, n_chunks) asks for 0..n_chunks candidates")
        with rules.part("fusing two rankings"):
            _check_fusing(rules, fuser, settings, a, b)
        with rules.part("fusing empty rankings"):
            first = _ranking(a, ["x0", "x1", "x2", "x3"], [0.9, 0.8, 0.7, 0.6])
            alone = fuser.fuse({a: list(first), b: []}, settings)
            rules.expect(
                [h.chunk_id for h in alone] == [h.chunk_id for h in first],
                "with one source empty, the fused ranking keeps the other's order",
                f"got {[h.chunk_id for h in alone]}, the source ranked {[h.chunk_id for h in first]}",
            )
            none = fuser.fuse({a: [], b: []}, settings)
            rules.expect(none == [], "empty rankings fuse to no hits", f"got {none!r}")


def _ranking(source: str, ids: list[str], scores: list[float]) -> list[ScoredChunk]:
    return [ScoredChunk(c, s, source, r) for r, (c, s) in enumerate(zip(ids, scores, strict=True))]


def _check_fusing(rules: Rules, fuser: Fuser, settings: FusionConfig, a: str, b: str) -> None:
    first = _ranking(a, ["x0", "x1", "x2", "x3"], [0.9, 0.8, 0.7, 0.6])
    second = _ranking(b, ["x0", "x4", "x2"], [12.0, 7.5, 3.0])
    given = {a: list(first), b: list(second)}
    fused = _hits(rules, fuser.fuse(given, settings), 10**6, ["x0", "x1", "x2", "x3", "x4"], "fuse()")
    rules.expect(given == {a: first, b: second}, "fuse() leaves its input rankings as they were")
    rules.require(fused, "fuse() of non-empty rankings gives hits", f"got {fused!r}")
    rules.expect(fused[0].chunk_id == "x0", "a chunk first in every source is first", f"got {_pairs(fused)}")
    again = fuser.fuse({a: list(first), b: list(second)}, settings)
    rules.expect(_pairs(again) == _pairs(fused), "fusing the same rankings twice gives the same ranking")
    for n in (0, 2, len(fused) + 1):
        top = fuser.fuse_top({a: list(first), b: list(second)}, settings, n)
        rules.expect(
            [(h.chunk_id, h.score, h.rank) for h in top] == [(h.chunk_id, h.score, h.rank) for h in fused[:n]],
            "fuse_top(rankings, settings, n) is fuse(rankings, settings)[:n]",
            f"n={n}: got {_pairs(top)}, fuse() gave {_pairs(fused[:n])}",
        )


# ---------------------------------------------------------------------- the [query.retrieve] stage
def check_retrieval(stage: Retrieval, chunks: Sequence[Chunk] | None = None) -> None:
    """`stage`: a `[query.retrieve]` stage with its parts given (hybrid's `retrievers` and
    `fuser`). As the runtime does, the kit hands it a `plm.Corpus` over `chunks` (default
    the kit's CHUNKS: `needs = ("corpus",)`) and builds every retriever among its parts on
    the same rows (vectors: `plm.testing.embed`, what `plm.testing.query` carries). Then:
    a `plm.Ranking` of the query, at most `depth` hits of the corpus, each once, ranked from
    1 and best first, the same every time; filters act before the cut; none pass, no hits."""
    with checking("retrieval") as rules:
        rows = list(chunks if chunks is not None else CHUNKS)
        corpus = MemoryCorpus(rows)
        if "corpus" in stage.needs:
            stage.corpus = corpus  # type: ignore[attr-defined]
        snap = snapshot_of(rows)
        for name in stage.parts:
            part = getattr(stage, name, None)
            for one in part.values() if isinstance(part, Mapping) else [part]:
                if isinstance(one, Retriever):
                    one.build(snap, None)
        stage.ensure_warm()
        stage.check()
        for text in QUERIES:
            for k in (1, 3, len(rows)):
                with rules.part(f"retrieving {text!r}, k={k}"):
                    _check_ranking(rules, stage, corpus, query(text, k))
        with rules.part("retrieving with filters"):
            _check_filters(rules, stage, corpus)


def _ranking_of(rules: Rules, stage: Retrieval, corpus: MemoryCorpus, q: ExpandedQuery) -> Ranking:
    out = stage.run(q)
    rules.require(isinstance(out, Ranking), "run returns a plm.Ranking", repr(type(out)))
    rules.require(all(isinstance(h, Hit) for h in out.hits), "a ranking's hits are plm.Hit records")
    ids = [h.chunk_id for h in out.hits]
    rules.expect(out.query.text == q.text and out.query.k == q.k, "the ranking keeps its query", f"{out.query!r}")
    rules.expect(len(ids) <= q.depth, "at most query.depth hits", f"depth {q.depth}, got {len(ids)}")
    rules.expect(set(ids) <= set(corpus.by_id), "hits are chunks of the corpus", f"got {ids}")
    rules.expect(len(set(ids)) == len(ids), "a chunk appears once in a ranking", f"got {ids}")
    rules.expect([h.rank for h in out.hits] == list(range(1, len(ids) + 1)), "ranks count from 1, in order")
    scores = [h.score for h in out.hits]
    rules.expect(all(a >= b for a, b in zip(scores, scores[1:], strict=False)), "hits come best first", f"{scores}")
    wrong = [h.chunk_id for h in out.hits if h.chunk_id in corpus.by_id and h.doc_id != corpus.by_id[h.chunk_id].doc_id]
    rules.expect(not wrong, "a hit names its chunk's document (`Corpus.hits` makes them)", f"{wrong}")
    return out


def _key(ranking: Ranking) -> list[tuple[str, float]]:
    return [(h.chunk_id, round(float(h.score), 6)) for h in ranking.hits]


def _check_ranking(rules: Rules, stage: Retrieval, corpus: MemoryCorpus, q: ExpandedQuery) -> None:
    first = _ranking_of(rules, stage, corpus, q)
    again = stage.run(q)
    rules.expect(_key(again) == _key(first), "the same query gives the same ranking", f"{_key(again)}")


def _check_filters(rules: Rules, stage: Retrieval, corpus: MemoryCorpus) -> None:
    from dataclasses import replace

    n_all = len(corpus.chunks)
    for spec in ({"team": "a"}, {"n": {"gte": 3}}):
        mask, _ = corpus.allowed(spec)
        passing = {c.id for c, ok in zip(corpus.chunks, mask, strict=True) if ok}
        for text in QUERIES:
            every = _ranking_of(rules, stage, corpus, query(text, n_all))
            found = [h.chunk_id for h in every.hits if h.chunk_id in passing]
            for k in (1, 2):
                got = _ranking_of(rules, stage, corpus, replace(query(text, k), filters=spec))
                ids = [h.chunk_id for h in got.hits]
                rules.expect(set(ids) <= passing, "a filtered query gives only chunks that pass", f"{spec}: {ids}")
                rules.expect(
                    len(ids) >= min(k, len(found)),
                    "filters act before the cut: k hits come back when k matching chunks are found",
                    f"query {text!r}, filter {spec}, k={k}: got {ids}; unfiltered, these pass: {found}",
                )
    none = _ranking_of(rules, stage, corpus, replace(query("pod memory", 3), filters={"team": "nobody"}))
    rules.expect(not none.hits, "a filter no chunk passes gives no hits", f"{_key(none)}")


# ---------------------------------------------------------------------- after retrieval
def check_ranking_stage(stage: RankingStage, ranking: Ranking | None = None) -> None:
    """The contract of a stage after retrieval (`plm.Reranker`, `plm.RankingStage`: one
    check for both families) on `ranking` (default: CHUNKS' first six as hits of one query,
    best first)."""
    family = "rerankers" if stage.family == "rerankers" else "rankers"
    with checking(family) as rules:
        if ranking is None:
            hits = tuple(
                Hit(c.id, c.doc_id, 1.0 - i / 10, i + 1, c.text, metadata={**c.metadata, "title": c.doc_id})
                for i, c in enumerate(CHUNKS[:6])
            )
            ranking = Ranking(query=query("pod memory"), hits=hits, fusion=FusionConfig(candidates=len(hits)))
        stage.ensure_warm()  # as the pipeline does before `run`
        for k in (1, 5, 50):
            rules.expect(stage.depth(k) >= k, "depth(k) is at least k", f"depth({k}) = {stage.depth(k)}")
        with rules.part("reranking"):
            _check_rerank(rules, stage, ranking)
        with rules.part("reranking an empty ranking"):
            empty = stage.run(Ranking(query=ranking.query, hits=(), fusion=ranking.fusion))
            rules.expect(isinstance(empty, Ranking) and not empty.hits, "an empty ranking stays empty")


def _check_rerank(rules: Rules, stage: RankingStage, ranking: Ranking) -> Any:
    out = stage.run(ranking)
    rules.require(isinstance(out, Ranking), "run returns a plm.Ranking", repr(type(out)))
    rules.expect(out.query == ranking.query, "the ranking keeps its query")
    given = {h.chunk_id for h in ranking.hits}
    ids = [h.chunk_id for h in out.hits]
    rules.expect(set(ids) <= given, "only hits it was given", str(sorted(set(ids) - given)[:3]))
    rules.expect(len(set(ids)) == len(ids), "each hit once")
    rules.expect([h.rank for h in out.hits] == list(range(1, len(ids) + 1)), "ranks count from 1, in order")
    rules.expect(out == stage.run(ranking), "the same ranking gives the same answer")
