"""Weighted reciprocal rank fusion, with the POC's adaptive rule as two profiles.

score(chunk) = sum over sources of weight[source] / (k + rank + rank_base), rank 0-based.
A query gets the profile its expander names (`ExpandedQuery.profile`): the dictionary
expander names "expanded" when a trigger fired (the POC: BM25 weight 3.0, semantic 0.3,
k 10, 20 candidates per wanted hit); an unnamed or unknown profile gets `default`. How a
profile is chosen and checked is shared with `linear` (`plm_plugins.fusers.profiles`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from plm import ComponentConfig, FusionConfig, ScoredChunk, fused_ranking, hookimpl
from plm_plugins.fusers.profiles import ProfiledFuser, Weight, equal_weights

if TYPE_CHECKING:
    from plm import Registry


class Profile(ComponentConfig):
    """One set of fusion settings."""

    k: float = Field(60.0, gt=0, le=1e9, allow_inf_nan=False)
    """The RRF constant added to every rank (at least 1e-6): higher evens out the top ranks'
    contributions. The POC: 60, or 10 when expanded."""
    weights: dict[str, Weight] = Field(default_factory=equal_weights)
    """Source label (the retriever's table name, e.g. bm25) -> weight (>= 0) its 1/(k + rank)
    terms are multiplied by; it must name exactly the hybrid stage's retrievers (unset: each
    of them 1.0)."""
    candidates_factor: int = Field(10, ge=1, le=10_000)
    """Candidates asked of each source = min(wanted hits x this, number of chunks)."""

    @field_validator("k")
    @classmethod
    def _not_tiny(cls, value: float) -> float:
        if value < 1e-6:  # 1/(k + 0) would overflow to inf for the top hit
            raise ValueError("k must be at least 1e-6")
        return value


class RRFFuser(ProfiledFuser):
    """Weighted RRF over the sources' rankings; ties keep insertion order."""

    name = "rrf"

    class Config(ComponentConfig):
        order: list[str] = Field(default_factory=lambda: ["dense", "bm25"])
        """Source labels in the order they are added to the score map (unlisted ones after;
        unset: dense, then bm25, then the other retrievers in their table order).
        The POC added semantic results first, then BM25; with many exact ties (identical
        generated pages) this order decides the final ranking, so it is part of the algorithm."""
        rank_base: int = Field(0, ge=0)
        """Added to the 0-based rank: 0 is the POC (1/(k+0) for the top hit); 1 is the
        textbook RRF with 1-based ranks."""
        default: Profile = Field(default_factory=lambda: Profile.model_validate({}))
        """Settings for a query whose expander names no profile (or one not configured)."""
        expanded: Profile | None = Field(
            default_factory=lambda: Profile(k=10, weights={"dense": 0.3, "bm25": 3.0}, candidates_factor=20)
        )
        """Settings for queries whose expander names "expanded" (the dictionary expander does
        when a trigger fired); None (from Python: TOML has no null) sends them to `default`.
        Unset: the POC's for a dense + bm25 pair, none for other retrievers; keys not given
        keep these defaults."""
        profiles: dict[str, Profile] = Field(default_factory=dict)
        """More named profiles (name -> a table like `default`), for expanders or rewriters
        that name other ones."""

    config: Config

    def expanded_default(self, sources: Sequence[str]) -> Any:
        """The POC's expanded profile for its dense + bm25 pair; other retrievers: none."""
        if set(sources) == {"dense", "bm25"}:
            return type(self).Config.model_fields["expanded"].get_default(call_default_factory=True)
        return None

    def profile_params(self, profile: Any) -> dict[str, Any]:
        return {"k": profile.k}

    def fused(
        self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig, n: int | None
    ) -> list[ScoredChunk]:
        order = self.source_order(rankings, settings)
        # A dict keeps first-insertion order; Python's sort is stable (also with
        # reverse=True), so equal scores stay in insertion order, as in the POC.
        scores: dict[str, float] = {}
        k = float(settings.params.get("k", self.config.default.k))
        for source in order:
            weight = settings.weights[source]
            for position, hit in enumerate(rankings[source]):
                # The list position is the rank the POC used (its ranking was the list).
                rank = position + self.config.rank_base
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (k + rank)
        return fused_ranking(scores, n)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(RRFFuser)
