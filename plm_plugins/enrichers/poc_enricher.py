"""The POC's enriched text (POC_SPEC section 3): keywords and entities prepended to a chunk.

Both the BM25 index and the embeddings are built from `chunk.enriched`, so this string
must match the POC's byte for byte for `poc_parity` to rank the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from plm import Chunk, ChunkTransform, ComponentConfig

if TYPE_CHECKING:
    from plm import Registry


def enrichment_prefix(
    keywords: Sequence[str],
    entities: Mapping[str, Sequence[str]],
    max_keywords: int = 7,
    per_label: int = 2,
    max_entities: int = 5,
) -> str:
    """`"<keywords> | <entities>"`, either part (and the ` | `) left out when empty.

    Entities are taken label by label in the mapping's order (first seen in the chunk),
    `per_label` from each, then capped at `max_entities`; the same value under two labels
    appears twice and labels are not shown, as in the POC.
    """
    shown_keywords = list(keywords[:max_keywords])
    values = [value for label_values in entities.values() for value in label_values[:per_label]]
    shown_entities = values[:max_entities]
    return " | ".join(", ".join(part) for part in (shown_keywords, shown_entities) if part)


def enrich_text(
    text: str,
    keywords: Sequence[str],
    entities: Mapping[str, Sequence[str]],
    max_keywords: int = 7,
    per_label: int = 2,
    max_entities: int = 5,
) -> str:
    """The text the indexes see: `"<prefix>\\n\\n<text>"`, or `text` when there is no prefix."""
    prefix = enrichment_prefix(keywords, entities, max_keywords, per_label, max_entities)
    return f"{prefix}\n\n{text}" if prefix else text


class PocEnricher(ChunkTransform):
    """Sets `chunk.enriched` from the chunk's keywords and entities (run after the extractors)."""

    name = "poc_enricher"
    family = "enrichers"

    class Config(ComponentConfig):
        max_keywords: int = Field(7, ge=0)
        """Keywords put in the prefix, best first (0: none)."""
        per_label: int = Field(2, ge=0)
        """Entity values taken from each label, labels in first-seen order (0: no entities)."""
        max_entities: int = Field(5, ge=0)
        """Entity values put in the prefix in total, after per_label (0: none)."""

    config: Config

    def run(self, data: list[Chunk]) -> list[Chunk]:
        self.ensure_warm()
        cfg = self.config
        return [
            dataclasses.replace(
                chunk,
                enriched=enrich_text(
                    chunk.text, chunk.keywords, chunk.entities, cfg.max_keywords, cfg.per_label, cfg.max_entities
                ),
            )
            for chunk in data
        ]


from plm import hookimpl  # noqa: E402 - registration lives at the end by convention


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(PocEnricher)
