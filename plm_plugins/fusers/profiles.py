"""What the profile-driven fusers (`rrf`, `linear`) share: one copy of how a query's
profile is chosen, how many candidates each source is asked for, which sources must have a
weight, and the order sources are added in (which decides exact ties).

A fuser built on `ProfiledFuser` has a Config with `order` (source labels), `default` (a
profile), `expanded` (a profile or None) and `profiles` (name -> profile); each profile has
at least `weights` and `candidates_factor`, plus the fuser's own keys, which it passes on
through `profile_params`. This module registers nothing: it is a base, not a stage.

Defaults follow the retrievers actually configured (the hybrid stage names them through
`check_sources`; a fuser used alone assumes the usual dense + BM25 pair): weights not
given weigh every source 1.0, an `order` not given puts dense before bm25 and the other
sources after in their table order, and a profile given in part keeps its other keys'
defaults (`[fuser.expanded] k = 5` keeps the expanded profile's weights and candidates).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol, cast

from pydantic import Field

from plm import ConfigError, ExpandedQuery, Fuser, FusionConfig, PlmUserError, ScoredChunk

Weight = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
"""A source's weight: finite, >= 0."""


DEFAULT_SOURCES = ("dense", "bm25")


def equal_weights() -> dict[str, float]:
    """The default `weights` of a fuser used alone: the usual dense + BM25 pair, weighted alike
    (in a hybrid stage, every configured retriever weighted alike)."""
    return dict.fromkeys(DEFAULT_SOURCES, 1.0)


class FusionProfile(Protocol):
    """The keys every profile has (a pydantic model in each fuser's module)."""

    @property
    def weights(self) -> Mapping[str, float]: ...

    @property
    def candidates_factor(self) -> int: ...

    def model_dump(self) -> dict[str, Any]: ...


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

    def fuse(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig) -> list[ScoredChunk]:
        return self.fused(rankings, settings, None)

    def fuse_top(self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig, n: int) -> list[ScoredChunk]:
        return self.fused(rankings, settings, n)

    @abstractmethod
    def fused(
        self, rankings: Mapping[str, list[ScoredChunk]], settings: FusionConfig, n: int | None
    ) -> list[ScoredChunk]:
        """The fused ranking's first n hits (None: all of them): `plm.fused_ranking`'s n."""

    sources: tuple[str, ...] = DEFAULT_SOURCES  # the retrievers fused, once `check_sources` names them

    def expanded_default(self, sources: Sequence[str]) -> Any:
        """The `expanded` profile when the config gives none (None: such queries get `default`)."""
        return None

    def profiles_by_name(self) -> dict[str, FusionProfile]:
        """Every configured profile: default, the named ones, and expanded unless None, with
        the keys the config did not give filled in for the sources fused."""
        config = cast(Any, self._config)
        given = config.model_fields_set
        base = self.expanded_default(self.sources)
        if "expanded" not in given:
            expanded = base
        elif config.expanded is None or base is None:
            expanded = config.expanded
        else:  # given in part: the rest from the expanded profile's defaults
            given_keys = config.expanded.model_fields_set
            expanded = base.model_copy(update={k: getattr(config.expanded, k) for k in given_keys})
        named: dict[str, Any] = {"default": config.default, **config.profiles}
        if expanded is not None:
            named["expanded"] = expanded
        equal = dict.fromkeys(self.sources, 1.0)
        return {
            name: p if "weights" in p.model_fields_set else p.model_copy(update={"weights": equal})
            for name, p in named.items()
        }

    def resolved_config(self) -> dict[str, Any] | None:
        """`order` and every profile as the retrievers configured make them (`check_sources`)."""
        profiles = self.profiles_by_name()
        dumped = {name: p.model_dump() for name, p in profiles.items()}
        order = self._order()
        return {
            **self._config.model_dump(),  # type: ignore[attr-defined]
            "order": order + [s for s in self.sources if s not in order],
            "default": dumped.pop("default"),
            "expanded": dumped.pop("expanded", None),
            "profiles": dumped,
        }

    def _order(self) -> list[str]:
        if "order" in cast(Any, self._config).model_fields_set:
            return list(self._config.order)
        return [s for s in DEFAULT_SOURCES if s in self.sources]

    def check_sources(self, names: Sequence[str]) -> None:
        """Every retriever needs a weight in every profile, and nothing else may have one."""
        self.sources = tuple(names)
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
        unknown = [n for n in self._order() if n not in names]
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
                    f"no retriever named {unknown[0]!r} to weigh: this recipe's retrievers are "
                    f"{', '.join(weights)} (the [query.retrieve.retrievers.NAME] tables)"
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
        order = [s for s in self._order() if s in rankings]
        order += [s for s in rankings if s not in order]
        missing = [s for s in order if s not in settings.weights]
        if missing:
            raise ConfigError(
                f"fuser {self.label!r}: no weight for source(s) {missing} "
                f"in profile {settings.profile!r} (weights: {dict(settings.weights)}); the keys of "
                "`weights` must be the retrievers' table names"
            )
        return order
