"""The text a keyword or entity extractor analyses for one chunk (POC_SPEC section 3).

Shared by the YAKE, spaCy and GLiNER plugins so that they all skip the same chunks and
see the same text: a chunk whose stripped text is too short gets no enrichment at all,
and a chunk that is mostly code has its code spans blanked out first, because YAKE and
NER models produce noise ("kubectl get", "PodSpec}") on shell and YAML blocks. The
entity extractors also share `group_entities`, the POC's label -> values shape.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from pydantic import Field

from plm import Chunk, ChunkTransform, ComponentConfig

# A code span as the chunker counts it (POC_SPEC section 2): a fenced block from one
# ``` to the next, across lines, or an inline `...` on a single line. Fences come first
# in the alternation so that their backticks are never read as inline spans.
CODE_SPAN = re.compile(r"```[\s\S]*?```|`[^`\n]+`")


class TextPrepConfig(ComponentConfig):
    """The text-preparation parameters every extractor shares (mixed into its Config)."""

    min_chars: int = Field(50, ge=0)
    """Chunks whose stripped text has fewer characters get no keywords or entities (0: none skipped)."""
    code_ratio: float = Field(0.3, ge=0.0, le=1.0)
    """Share of a chunk's characters (0 to 1) in code spans (``` blocks, `inline`) above which
    those spans are blanked before analysis, since YAKE and NER read noise in shell and YAML."""


def code_share(text: str) -> float:
    """The fraction of `text`'s characters that lie inside code spans (0.0 for empty text)."""
    if not text:
        return 0.0
    return sum(len(m.group(0)) for m in CODE_SPAN.finditer(text)) / len(text)


def text_to_analyse(text: str, min_chars: int = 50, code_ratio: float = 0.3) -> str | None:
    """The text to run NLP on, or None when the chunk is too short to get any.

    The share is measured on the unstripped text, and each span becomes one space (not
    nothing), which keeps the words on either side apart: both are what the POC did, and
    YAKE's keywords on the reference corpus match only this way.
    """
    if len(text.strip()) < min_chars:
        return None
    if code_share(text) > code_ratio:
        return CODE_SPAN.sub(" ", text)
    return text


def texts_to_analyse(texts: list[str], min_chars: int = 50, code_ratio: float = 0.3) -> list[str | None]:
    """`text_to_analyse` over a batch, same order."""
    return [text_to_analyse(t, min_chars, code_ratio) for t in texts]


def group_entities(
    pairs: Iterable[tuple[str, str]], labels: Sequence[str], max_per_label: int
) -> dict[str, tuple[str, ...]]:
    """(label, text) pairs in document order -> label -> distinct texts.

    Labels appear in the order first seen in the text (not the order of `labels`), values
    in order of appearance, each label capped at `max_per_label`: the POC's shape, which
    the enricher's prefix depends on. Texts are kept verbatim, newlines included.
    """
    wanted = set(labels)
    grouped: dict[str, list[str]] = {}
    for label, text in pairs:
        if label not in wanted:
            continue
        values = grouped.setdefault(label, [])
        if text not in values and len(values) < max_per_label:
            values.append(text)
    return {label: tuple(values) for label, values in grouped.items()}


class EntityConfig(TextPrepConfig):
    """What every entity extractor reads and keeps (mixed into its Config)."""

    labels: list[str] = Field(min_length=1)
    """Entity labels kept (at least one), e.g. ORG, PRODUCT; entities with other labels are dropped."""
    max_chars: int = Field(5000, ge=1)
    """Characters of each prepared chunk text the model reads; the rest is ignored."""
    max_per_label: int = Field(5, ge=1)
    """Distinct values kept per label, in order of appearance in the chunk."""


class EntityExtractor(ChunkTransform):
    """The shared flow of entity extractors: prepare texts, run the model once per distinct
    text, group (label, text) pairs the POC's way. Subclasses implement `find`."""

    # Entities depend only on the chunk text and the settings: cached by content hash.
    cache_fields = ("entities",)
    config: EntityConfig

    def find(self, texts: list[str]) -> list[Iterable[tuple[str, str]]]:
        """(label, text) pairs in document order, for each text."""
        raise NotImplementedError

    def extract(self, texts: Sequence[str]) -> list[dict[str, tuple[str, ...]]]:
        """Entities for each text, same order; too-short texts get {}."""
        self.ensure_warm()
        cfg = self.config
        prepared = [
            t[: cfg.max_chars] if t is not None else None
            for t in texts_to_analyse(list(texts), cfg.min_chars, cfg.code_ratio)
        ]
        # Identical texts (generated reference pages: 4% of the POC corpus) run once.
        unique = list(dict.fromkeys(t for t in prepared if t is not None))
        found = {
            text: group_entities(pairs, cfg.labels, cfg.max_per_label)
            for text, pairs in zip(unique, self.find(unique) if unique else [], strict=True)
        }
        return [dict(found[t]) if t is not None else {} for t in prepared]

    def run(self, data: list[Chunk]) -> list[Chunk]:
        self.ensure_warm()
        found = self.extract([c.text for c in data])
        return [dataclasses.replace(chunk, entities=ents) for chunk, ents in zip(data, found, strict=True)]
