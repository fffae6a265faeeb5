"""YAKE keyword extraction per chunk (POC_SPEC section 3).

The defaults are the POC's exact settings, so `poc_parity` reproduces its keywords
(checked against all 7,269 chunks of the reference corpus).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from plm import Chunk, ChunkTransform, MissingDependencyError
from plm_plugins.enrichers.text_prep import TextPrepConfig, text_to_analyse

if TYPE_CHECKING:
    from plm import Registry


class YakeKeywordExtractor(ChunkTransform):
    """Sets `chunk.keywords` to YAKE's top keywords, best first, in YAKE's own casing."""

    name = "yake"
    # Keywords depend only on the chunk text and these settings: cached by content hash.
    cache_fields = ("keywords",)

    class Config(TextPrepConfig):
        lan: str = "en"
        """YAKE's stopword language: a two-letter code such as "en", "de" or "pt"; one YAKE has
        no list for falls back to its language-neutral list."""
        n: int = Field(2, ge=1, le=6)
        """Longest keyword, in words (1 to 6)."""
        top: int = Field(10, ge=1)
        """Keywords kept per chunk, best first (fewer when the text has fewer candidates)."""
        dedup_lim: float = Field(0.9, ge=0.0, le=1.0)
        """Similarity (0 to 1) to a better keyword above which a candidate is dropped; 1 turns
        deduplication off."""
        dedup_func: Literal["seqm", "jaro", "levs"] = "seqm"
        """How deduplication measures similarity: "seqm" (YAKE's sequence matcher), "jaro"
        (Jaro-Winkler) or "levs" (Levenshtein ratio)."""
        window_size: int = Field(1, ge=1)
        """Co-occurrence window, in words on each side, that YAKE scores a term's context with."""

    config: Config
    _extractor: Any  # a yake.KeywordExtractor, set by warm_up

    def warm_up(self) -> None:
        try:
            import yake
        except ImportError as exc:
            raise MissingDependencyError("YAKE", "keywords") from exc
        cfg = self.config
        # The POC passed yake's old camelCase names (dedupLim, dedupFunc, windowsSize);
        # 0.7.3 takes these snake_case ones with the same meaning.
        self._extractor = yake.KeywordExtractor(
            lan=cfg.lan,
            n=cfg.n,
            top=cfg.top,
            dedup_lim=cfg.dedup_lim,
            dedup_func=cfg.dedup_func,
            window_size=cfg.window_size,
        )

    def keywords(self, text: str) -> tuple[str, ...]:
        """The keywords for one chunk text (empty when the chunk is too short)."""
        self.ensure_warm()
        prepared = text_to_analyse(text, self.config.min_chars, self.config.code_ratio)
        if prepared is None:
            return ()
        # YAKE returns (keyword, score) pairs, lowest (best) score first; keep that order.
        return tuple(kw for kw, _score in self._extractor.extract_keywords(prepared))

    def run(self, data: list[Chunk]) -> list[Chunk]:
        self.ensure_warm()
        found: dict[str, tuple[str, ...]] = {}  # identical chunk texts are analysed once
        for chunk in data:
            if chunk.text not in found:
                found[chunk.text] = self.keywords(chunk.text)
        return [dataclasses.replace(chunk, keywords=found[chunk.text]) for chunk in data]


from plm import hookimpl  # noqa: E402 - registration lives at the end by convention


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(YakeKeywordExtractor)
