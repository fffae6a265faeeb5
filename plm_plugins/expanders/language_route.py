"""A query's fusion profile chosen by its language: a query in a language the dense model was
not trained on is fused with the profile named here (e.g. BM25 alone), one the model reads
with the default. An English-only model's vectors for a Japanese question rank pages by
chance (Japanese nDCG@10 0.669 with BM25 alone, 0.494 hybrid with all-MiniLM-L6-v2), so a
hybrid recipe should not let them vote there."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import Field

from plm import ComponentConfig, ExpandedQuery, Query, QueryExpander, hookimpl
from plm.languages import detect

if TYPE_CHECKING:
    from plm import Registry


class LanguageRouteExpander(QueryExpander):
    """The query unchanged; its fusion profile is `profile` when its detected language is not
    one of `languages` (when it cannot be told, `default_language` decides)."""

    name = "language_route"

    class Config(ComponentConfig):
        languages: list[str] = Field(default_factory=lambda: ["en"], min_length=1)
        """ISO 639-1 codes of the languages the dense model reads (all-MiniLM-L6-v2: English)."""
        profile: str = Field("other_language", min_length=1)
        """The fuser's profile for a query in any other language (define it in the fuser's
        `profiles`, e.g. `weights = { dense = 0.0, bm25 = 1.0 }`)."""
        default_language: str = Field("en", pattern=r"^[a-z]{2}$")
        """A query's language when detection is not sure (a two-word query)."""
        min_confidence: float = Field(0.5, ge=0, le=1)
        """How sure detection must be (0..1) before a query counts as another language."""

    config: Config

    def run(self, data: Query) -> ExpandedQuery:
        query = ExpandedQuery.of(data)
        cfg = self.config
        language = detect(query.text, cfg.default_language, cfg.min_confidence)
        return query if language in cfg.languages else replace(query, profile=cfg.profile)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(LanguageRouteExpander)
