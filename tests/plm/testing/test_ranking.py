"""`plm.testing`'s fuser, retrieval and ranking stage checks pass a stage written from the
contract alone and fail, naming the rule, for one broken in one way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plm
import plm.testing


class SumOfScores(plm.Fuser):
    name = "kit_sum"

    def settings_for(self, query: plm.ExpandedQuery, n_chunks: int) -> plm.FusionConfig:
        return plm.FusionConfig(candidates=min(n_chunks, query.depth * 10))

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        scores: dict[str, float] = {}
        for hits in rankings.values():
            for hit in hits:
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (1 + hit.rank)
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        return [plm.ScoredChunk(c, s, "fused", r) for r, (c, s) in enumerate(ranked)]


def test_a_fuser_written_from_the_contract_passes() -> None:
    plm.testing.check_fuser(SumOfScores())


class WorstFirst(SumOfScores):
    name = "kit_worst_first"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        hits = list(reversed(super().fuse(rankings, settings)))
        return [plm.ScoredChunk(h.chunk_id, h.score, h.source, r) for r, h in enumerate(hits)]


class Consumes(SumOfScores):
    name = "kit_consumes"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        fused = super().fuse(rankings, settings)
        for hits in rankings.values():
            hits.clear()
        return fused


class RankAsScore(SumOfScores):
    name = "kit_rank_as_score"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        scores: dict[str, float] = {}
        for hits in rankings.values():
            for hit in hits:
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + hit.rank  # a later rank counts more: a bug
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        return [plm.ScoredChunk(c, s, "fused", r) for r, (c, s) in enumerate(ranked)]


class EmptyGivesPlaceholder(SumOfScores):
    name = "kit_placeholder"

    def fuse(self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig) -> list[plm.ScoredChunk]:
        return super().fuse(rankings, settings) or [plm.ScoredChunk("none", 0.0, "fused", 0)]


class TopIsNotTheHead(SumOfScores):
    name = "kit_top_not_head"

    def fuse_top(
        self, rankings: Mapping[str, list[plm.ScoredChunk]], settings: plm.FusionConfig, n: int
    ) -> list[plm.ScoredChunk]:
        return self.fuse(rankings, settings)[-n:] if n else []  # the last n: a bug


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (TopIsNotTheHead, r"fuse_top\(rankings, settings, n\) is fuse\(rankings, settings\)\[:n\]"),
        (WorstFirst, r"hits come best first"),
        (Consumes, r"leaves its input rankings as they were"),
        (RankAsScore, r"a chunk first in every source is first"),
        (EmptyGivesPlaceholder, r"empty rankings fuse to no hits|hits are chunks of the corpus"),
    ],
)
def test_a_broken_fuser_fails_naming_the_contract(broken: type[SumOfScores], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_fuser(broken())
    assert str(err.value).startswith("fusers contract (docs/contracts/fusers.md)")


class Shout(plm.Reranker):
    name = "test_shout"

    def run(self, data: plm.Ranking) -> plm.Ranking:
        return plm.rescore(data, [len(h.text) for h in data.hits], self.label)


def test_a_ranking_stage_written_from_the_contract_passes() -> None:
    plm.testing.check_ranking_stage(Shout(label="shout"))
    plm.testing.check_ranking_stage(plm.default_registry().get("collapse", "rankers").cls())


class KeepsRanks(Shout):
    name = "test_keeps_ranks"

    def run(self, data: plm.Ranking) -> plm.Ranking:  # reorders without renumbering
        return replace(data, hits=tuple(reversed(data.hits)))


class Invents(Shout):
    name = "test_invents"

    def run(self, data: plm.Ranking) -> plm.Ranking:
        extra = replace(data.hits[0], chunk_id="new", rank=len(data.hits) + 1) if data.hits else None
        return replace(data, hits=data.hits + ((extra,) if extra else ()))


class ShallowDepth(Shout):
    name = "test_shallow"

    def depth(self, k: int) -> int:
        return 3


@pytest.mark.parametrize(
    ("broken", "message"),
    [(KeepsRanks, "ranks count from 1, in order"), (Invents, "only hits it was given"), (ShallowDepth, "depth")],
)
def test_a_broken_ranking_stage_fails_naming_the_contract(broken: type[Shout], message: str) -> None:
    with pytest.raises(AssertionError, match="rerankers contract .docs/contracts/rerankers.md.: " + message):
        plm.testing.check_ranking_stage(broken(label="broken"))


# ---------------------------------------------------------------------- a [query.retrieve] stage
class Overlap(plm.Retriever, plm.SavedIndex):
    """Scores a chunk by the query words it holds; kept in memory only."""

    name = "kit_overlap_in_memory"

    def index(self, snapshot: plm.Snapshot) -> None:
        self.ids = list(snapshot.chunk_ids)
        self.words = [set(t.lower().split()) for t in snapshot.index_texts]

    def save(self, folder: Path) -> None:
        raise NotImplementedError

    def open_saved(self, folder: Path, snapshot: plm.Snapshot) -> None:
        raise NotImplementedError

    def search(self, query: plm.ExpandedQuery, n: int, allowed: Any = None) -> list[plm.ScoredChunk]:
        wanted = set(query.text.lower().split())
        scores = np.array([float(len(wanted & w)) for w in self.words])
        return plm.top_n(scores, n, self.ids, self.label, allowed, drop_zero=True)


class BestOfEach(plm.Retrieval):
    """Each retriever's best hits in turn (the example on docs/contracts/retrieval.md)."""

    name = "kit_best_of_each"
    needs = ("corpus",)
    parts = {"retrievers": plm.Retriever}
    corpus: plm.Corpus
    retrievers: dict[str, plm.Retriever]

    class Config(plm.ComponentConfig):
        retrievers: dict[str, dict] = {}

    def run(self, data: plm.ExpandedQuery) -> plm.Ranking:
        allowed, n_rows = self.corpus.allowed(data.filters)
        rankings = {label: r.search(data, min(data.depth, n_rows), allowed) for label, r in self.retrievers.items()}
        seen: dict[str, plm.ScoredChunk] = {}
        for hits in zip(*rankings.values(), strict=False):
            for hit in hits:
                seen.setdefault(hit.chunk_id, replace(hit, rank=len(seen)))
        found = sorted(seen.values(), key=lambda h: -h.score)[: data.depth]
        return plm.Ranking(query=data, hits=self.corpus.hits(found, rankings))


def _best_of_each(cls: type[BestOfEach] = BestOfEach) -> BestOfEach:
    return cls(retrievers={"words": Overlap(), "again": Overlap()})


def test_a_retrieval_stage_written_from_the_contract_passes() -> None:
    plm.testing.check_retrieval(_best_of_each())


class FiltersAfterTheCut(BestOfEach):
    name = "kit_filters_after_cut"

    def run(self, data: plm.ExpandedQuery) -> plm.Ranking:
        out = super().run(replace(data, filters=None))
        allowed, _ = self.corpus.allowed(data.filters)
        ids = self.corpus.chunks if hasattr(self.corpus, "chunks") else []
        keep = {c.id for c, ok in zip(ids, allowed, strict=True) if ok} if allowed is not None else None
        hits = [h for h in out.hits if keep is None or h.chunk_id in keep]
        return replace(out, query=data, hits=tuple(replace(h, rank=i + 1) for i, h in enumerate(hits)))


class IgnoresDepth(BestOfEach):
    name = "kit_ignores_depth"

    def run(self, data: plm.ExpandedQuery) -> plm.Ranking:
        return super().run(replace(data, k=100, depth=100))


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (FiltersAfterTheCut, r"filters act before the cut"),
        (IgnoresDepth, r"at most query.depth hits"),
    ],
)
def test_a_broken_retrieval_stage_fails_naming_the_contract(broken: type[BestOfEach], message: str) -> None:
    with pytest.raises(AssertionError, match=message) as err:
        plm.testing.check_retrieval(_best_of_each(broken))
    assert str(err.value).startswith("retrieval contract (docs/contracts/retrieval.md)")
