"""Contextual chunk text: the document title and heading path prefixed to the text the
indexes see (`chunk.enriched`), so a chunk that says "set it to 30 seconds" is found by
the page and section it belongs to. The raw `text`, which hits show, is unchanged.

    [index.context]
    use = "contextual"

The prefix is `title > heading > subheading`, a heading equal to the one before it (the
title repeated as the page's H1) written once. Chained after an enricher (e.g.
`poc_enricher`), it prefixes that enricher's text. Whether it helps is a measurement, not a
given: BENCHMARKS.md has the `plm eval` of it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pydantic import Field

from plm import Chunk, ChunkTransform, ComponentConfig, hookimpl

if TYPE_CHECKING:
    from plm import Registry


def context_prefix(title: str, heading_path: tuple[str, ...], separator: str, max_chars: int) -> str:
    """`title > h1 > h2`, blanks dropped, a part equal to the one before it written once."""
    parts: list[str] = []
    for part in (title, *heading_path):
        part = " ".join(str(part).split())
        if part and (not parts or parts[-1].casefold() != part.casefold()):
            parts.append(part)
    return separator.join(parts)[:max_chars].rstrip()


class ContextualText(ChunkTransform):
    """Sets `chunk.enriched` to the title and heading path, a blank line, then the chunk's text."""

    name = "contextual"
    family = "enrichers"

    class Config(ComponentConfig):
        title_key: str = "title"
        """The chunk metadata key holding the document title (the chunkers copy it there);
        "" leaves the title out."""
        headings: bool = True
        """Add the chunk's heading path after the title."""
        separator: str = " > "
        """What joins the title and the headings in the prefix."""
        max_chars: int = Field(300, ge=1)
        """The prefix is cut to this many characters."""

    config: Config

    def run(self, data: list[Chunk]) -> list[Chunk]:
        cfg = self.config
        out = []
        for chunk in data:
            title = str(chunk.metadata.get(cfg.title_key, "")) if cfg.title_key else ""
            path = chunk.heading_path if cfg.headings else ()
            prefix = context_prefix(title, path, cfg.separator, cfg.max_chars)
            text = chunk.index_text
            out.append(dataclasses.replace(chunk, enriched=f"{prefix}\n\n{text}") if prefix else chunk)
        return out


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(ContextualText)
