"""What the profile-driven fusers (`rrf`, `linear`) share: one copy of how a query's
profile is chosen, how many candidates each source is asked for, which sources must have a
weight, and the order sources are added in (which decides exact ties).

A fuser built on `ProfiledFuser` has a Config with `order` (source labels), `default` (a
profile), `expanded` (a profile or None) and `profiles` (name -> profile); each profile has
at least `weights` and `candidates_factor`, plus the fuser's own keys, which it passes on
through `profile_params`. This module registers nothing: it is a base, not a stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol, cast

from pydantic import Field

from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Fuser
from plm_core.records import ExpandedQuery, FusionConfig, ScoredChunk

Weight = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
"""A source's weight: finite, >= 0."""


def equal_weights() -> dict[str, float]:
    """The default `weights`: the usual dense + BM25 pair, weighted alike."""
    return {"dense": 1.0, "bm25": 1.0}


class FusionProfile(Protocol):
    """The keys every profile has (a pydantic model in each fuser's module)."""

    @property
    def weights(self) -> Mapping[str, float]: ...

    @property
    def candidates_factor(self) -> int: ...


class ProfiledConfig(Protocol):
    """The keys a profile-driven fuser's Config has."""

    @property
    def order(self) -> Sequence[str]: ...

    @property
    def default(self) -> FusionProfile: ...

    @property
    def expanded(self) -> FusionProfile | None: ...

    @property
    def profiles(self) -> Mapping[str, FusionProfile]: ...


class ProfiledFuser(Fuser):
    """A fuser whose settings come from named profiles: the one a query's expander names
    (`ExpandedQuery.profile`), or `default` when it names none or one not configured."""

    @property
    def _config(self) -> ProfiledConfig:
        return cast(ProfiledConfig, self.config)

    def profile_params(self, profile: Any) -> dict[str, Any]:
        """The fuser's own settings from a profile (`FusionConfig.params`), e.g. RRF's k."""
        return {}

    def profiles_by_name(self) -> dict[str, FusionProfile]:
        """Every configured profile: default, the named ones, and expanded unless None."""
        config = self._config
        named: dict[str, FusionProfile] = {"default": config.default, **config.profiles}
        if config.expanded is not None:
            named["expanded"] = config.expanded
        return named

    def check_sources(self, names: Sequence[str]) -> None:
        """Every retriever needs a weight in every profile, and nothing else may have one."""
        label = self.label
        for pname, profile in self.profiles_by_name().items():
            missing = [n for n in names if n not in profile.weights]
            extra = [n for n in profile.weights if n not in names]
            if missing or extra:
                raise ConfigError(
                    f"fuser {label!r}, profile {pname!r}: weights {dict(profile.weights)} must name exactly "
                    f"the retrievers {list(names)}"
                    + (f"; missing {missing}" if missing else "")
                    + (f"; unknown {extra}" if extra else "")
                )
        unknown = [n for n in self._config.order if n not in names]
        if unknown:
            raise ConfigError(f"fuser {label!r}: `order` names {unknown}, which are not retrievers {list(names)}")

    def settings_for(self, query: ExpandedQuery, n_chunks: int) -> FusionConfig:
        profiles = self.profiles_by_name()
        name = query.profile if query.profile in profiles else "default"
        profile = profiles[name]
        weights = dict(profile.weights)
        if query.weights:
            unknown = [s for s in query.weights if s not in weights]
            if unknown:
                raise PlmUserError(
                    f"weights name {unknown}, which are not sources of fuser {self.label!r}; "
                    f"its sources are {list(weights)}"
                )
            weights.update({s: float(w) for s, w in query.weights.items()})
        return FusionConfig(
            candidates=max(0, min(query.depth * profile.candidates_factor, n_chunks)),
            weights=weights,
            profile=name,
            params=self.profile_params(profile),
        )

    def source_order(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[str]:
        """The sources in the order their chunks are added (`order`, then unlisted ones in
        the mapping's order); every one must have a weight in the query's profile."""
        order = [s for s in self._config.order if s in rankings]
        order += [s for s in rankings if s not in order]
        missing = [s for s in order if s not in settings.weights]
        if missing:
            raise ConfigError(
                f"fuser {self.label!r}: no weight for source(s) {missing} "
                f"in profile {settings.profile!r} (weights: {dict(settings.weights)}); the keys of "
                "`weights` must be the retrievers' table names"
            )
        return order
