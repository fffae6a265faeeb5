"""Weighted reciprocal rank fusion, with the POC's adaptive rule as two profiles.

score(chunk) = sum over sources of weight[source] / (k + rank + rank_base), rank 0-based.
A query whose expansion fired uses the `expanded` profile (the POC: BM25 weight 3.0,
semantic 0.3, k 10, 20 candidates per wanted hit); any other uses `default`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from plm_core.component import ComponentConfig
from plm_core.errors import ConfigError
from plm_core.hookspecs import hookimpl
from plm_core.interfaces import Fuser
from plm_core.records import ExpandedQuery, FusionConfig, ScoredChunk

if TYPE_CHECKING:
    from plm_core.registry import Registry


class Profile(ComponentConfig):
    """One set of fusion settings."""

    k: float = Field(60.0, gt=0)
    # source label (the retriever's table name) -> weight
    weights: dict[str, float] = Field(default_factory=lambda: {"dense": 1.0, "bm25": 1.0})
    # candidates per source = min(query.k * candidates_factor, number of chunks)
    candidates_factor: int = Field(10, ge=1)


class RRFFuser(Fuser):
    """Weighted RRF over the sources' rankings; ties keep insertion order."""

    name = "rrf"

    class Config(ComponentConfig):
        # Sources are added to the score map in this order. The POC added semantic
        # results first, then BM25; with many exact ties (identical generated pages) this
        # order decides the final ranking, so it is part of the algorithm.
        order: list[str] = Field(default_factory=lambda: ["dense", "bm25"])
        # Added to the 0-based rank: 0 is the POC (1/(k+0) for the top hit); 1 is the
        # textbook RRF with 1-based ranks.
        rank_base: int = Field(0, ge=0)
        default: Profile = Field(default_factory=lambda: Profile.model_validate({}))
        # Used when the query's expansion fired; None: always `default`.
        expanded: Profile | None = Field(
            default_factory=lambda: Profile(k=10, weights={"dense": 0.3, "bm25": 3.0}, candidates_factor=20)
        )

    config: Config

    def check_sources(self, names: Sequence[str]) -> None:
        """Every retriever needs a weight in every profile, and nothing else may have one."""
        label = getattr(self, "label", self.name)
        profiles = {"default": self.config.default, "expanded": self.config.expanded}
        for pname, profile in profiles.items():
            if profile is None:
                continue
            missing = [n for n in names if n not in profile.weights]
            extra = [n for n in profile.weights if n not in names]
            if missing or extra:
                raise ConfigError(
                    f"fuser {label!r}, profile {pname!r}: weights {dict(profile.weights)} must name exactly "
                    f"the retrievers {list(names)}"
                    + (f"; missing {missing}" if missing else "")
                    + (f"; unknown {extra}" if extra else "")
                )
        unknown = [n for n in self.config.order if n not in names]
        if unknown:
            raise ConfigError(f"fuser {label!r}: `order` names {unknown}, which are not retrievers {list(names)}")

    def settings_for(self, query: ExpandedQuery, n_chunks: int) -> FusionConfig:
        use_expanded = bool(getattr(query, "fired", ())) and self.config.expanded is not None
        profile = self.config.expanded if use_expanded else self.config.default
        assert profile is not None
        return FusionConfig(
            rrf_k=profile.k,
            weights=dict(profile.weights),
            candidates=max(0, min(query.k * profile.candidates_factor, n_chunks)),
            profile="expanded" if use_expanded else "default",
        )

    def fuse(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[ScoredChunk]:
        order = [s for s in self.config.order if s in rankings]
        order += [s for s in rankings if s not in order]
        missing = [s for s in order if s not in settings.weights]
        if missing:
            raise ConfigError(
                f"fuser {getattr(self, 'label', self.name)!r}: no weight for source(s) {missing} "
                f"in profile {settings.profile!r} (weights: {dict(settings.weights)}); the keys of "
                "`weights` must be the retrievers' table names"
            )
        # A dict keeps first-insertion order; Python's sort is stable (also with
        # reverse=True), so equal scores stay in insertion order, as in the POC.
        scores: dict[str, float] = {}
        for source in order:
            weight = settings.weights[source]
            for position, hit in enumerate(rankings[source]):
                # The list position is the rank the POC used (its ranking was the list).
                rank = position + self.config.rank_base
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (settings.rrf_k + rank)
        ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
        return [ScoredChunk(chunk_id=cid, score=score, source="fused", rank=i) for i, (cid, score) in enumerate(ranked)]

    def run(self, data: Mapping[str, list[ScoredChunk]]) -> list[ScoredChunk]:
        """Fuse with the default profile (no query to choose by)."""
        profile = self.config.default
        n = max((len(r) for r in data.values()), default=0)
        return self.fuse(data, FusionConfig(rrf_k=profile.k, weights=dict(profile.weights), candidates=n))


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(RRFFuser)
