"""Weighted linear fusion of normalised scores (convex combination, score fusion).

score(chunk) = sum over sources of weight[source] x norm_source(chunk's score in it); a
source that did not return the chunk adds 0. Each source's scores are normalised over the
candidates it returned for this query (so they depend on `candidates_factor`):

- `minmax`: (s - min) / (max - min), in [0, 1]; the best candidate gets 1, the worst 0.
- `zscore`: (s - mean) / std (population std), unbounded: a below-average candidate
  scores less than one the source did not return.
- `dbsf`: Qdrant's distribution-based score fusion: min-max with mean -/+ 3 x the sample
  standard deviation as the limits, clipped to [0, 1] (with a long list a score can lie
  beyond 3 sigma); a score at the mean gets 0.5.

When every candidate of a source has the same score (one candidate, say) there is no
spread to divide by: minmax gives each 1 (all are the best), zscore 0 (all at the mean),
dbsf 0.5 (Qdrant's rule). Profiles work as in `rrf` (`plm_plugins.fusers.profiles`): a
query gets the profile its expander names, else `default`; each profile has its own
normalisation, weights and candidates. Ties keep insertion order: sources in `order`,
each source's candidates best first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from plm import ComponentConfig, FusionConfig, ScoredChunk, fused_ranking, hookimpl
from plm_plugins.fusers.profiles import ProfiledFuser, Weight, equal_weights

if TYPE_CHECKING:
    from plm import Registry

Normalization = Literal["minmax", "zscore", "dbsf"]


def normalise(scores: Sequence[float], method: Normalization) -> list[float]:
    """One source's scores, normalised by `method` (same order)."""
    n = len(scores)
    if n == 0:
        return []
    if min(scores) == max(scores):  # no spread: checked on the scores, not on a rounded std
        return [{"minmax": 1.0, "zscore": 0.0, "dbsf": 0.5}[method]] * n
    if method == "minmax":
        low, high = min(scores), max(scores)
        return [(s - low) / (high - low) for s in scores]
    mean = math.fsum(scores) / n
    squares = math.fsum((s - mean) ** 2 for s in scores)
    if method == "zscore":
        std = math.sqrt(squares / n)
        return [(s - mean) / std for s in scores]
    std = math.sqrt(squares / (n - 1))  # Qdrant's DBSF: the sample standard deviation
    low, high = mean - 3 * std, mean + 3 * std
    return [min(1.0, max(0.0, (s - low) / (high - low))) for s in scores]


class Profile(ComponentConfig):
    """One set of fusion settings."""

    normalization: Normalization = "minmax"
    """How each source's scores are made comparable: minmax (best 1, worst 0), zscore
    ((s - mean) / std) or dbsf (Qdrant's: mean -/+ 3 std as the limits, clipped to [0, 1])."""
    weights: dict[str, Weight] = Field(default_factory=equal_weights)
    """Source label (the retriever's table name, e.g. bm25) -> weight (>= 0) its normalised
    scores are multiplied by; it must name exactly the hybrid stage's retrievers (unset: each
    of them 1.0)."""
    candidates_factor: int = Field(10, ge=1, le=10_000)
    """Candidates asked of each source = min(wanted hits x this, number of chunks); the
    scores are normalised over these candidates."""


class LinearFuser(ProfiledFuser):
    """Weighted sum of per-source normalised scores; ties keep insertion order."""

    name = "linear"

    class Config(ComponentConfig):
        order: list[str] = Field(default_factory=lambda: ["dense", "bm25"])
        """Source labels in the order they are added to the score map (unlisted ones after;
        unset: dense, then bm25, then the other retrievers in their table order): equal fused
        scores keep this order."""
        default: Profile = Field(default_factory=lambda: Profile.model_validate({}))
        """Settings for a query whose expander names no profile (or one not configured)."""
        expanded: Profile | None = None
        """Settings for queries whose expander names "expanded" (the dictionary expander does
        when a trigger fired); unset: they get `default`."""
        profiles: dict[str, Profile] = Field(default_factory=dict)
        """More named profiles (name -> a table like `default`), for expanders or rewriters
        that name other ones."""

    config: Config

    def profile_params(self, profile: Any) -> dict[str, Any]:
        return {"normalization": profile.normalization}

    def fused(
        self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig, n: int | None
    ) -> list[ScoredChunk]:
        method = settings.params.get("normalization", self.config.default.normalization)
        # A dict keeps first-insertion order and Python's sort is stable (also with
        # reverse=True): equal scores stay in insertion order.
        scores: dict[str, float] = {}
        for source in self.source_order(rankings, settings):
            weight = settings.weights[source]
            found = rankings[source]
            for hit, value in zip(found, normalise([h.score for h in found], method), strict=True):
                scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight * value
        return fused_ranking(scores, n)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LinearFuser)
