"""Markdown (`.md`, `.markdown`, `.mdx`, ...) as people write it (`plm_plugins.commonmark`).

The title is the front matter's `title:`, else the first level-1 heading outside code (its
`{ #id }` left out), else a first-level setext heading; front matter becomes metadata, as
`markdown_dir` reads it. With `clean` (the default) the dialects docs sites use become plain
Markdown: MkDocs attribute lists, admonitions and tabs, Hugo shortcodes, MDX imports,
Obsidian wikilinks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import Field

from plm import ComponentConfig, Converted, Converter, hookimpl
from plm_plugins.commonmark import clean, first_heading
from plm_plugins.converters.text import text_of
from plm_plugins.front_matter import front_matter_problem, parse_front_matter
from plm_plugins.setext import setext_headings

if TYPE_CHECKING:
    from plm import Registry

logger = logging.getLogger(__name__)


class MarkdownConverter(Converter):
    """Markdown files: CommonMark headings, dialects cleaned, front matter as metadata."""

    name = "markdown"
    extensions = (".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdx")

    class Config(ComponentConfig):
        clean: bool = Field(True, description="turn MkDocs, Hugo, MDX and Obsidian syntax into plain Markdown")
        front_matter: bool = Field(True, description="parse leading `---` front matter into metadata")

    config: Config

    def convert(self, data: bytes, path: str) -> Converted:
        text = text_of(data)
        metadata = parse_front_matter(text) if self.config.front_matter else {}
        if self.config.front_matter and (problem := front_matter_problem(text)):
            logger.warning("%s: %s", path, problem)
        if self.config.clean:
            text = clean(text)
        title = metadata.get("title") if isinstance(metadata.get("title"), str) else ""
        if not title:
            title = first_heading(text) or next((h.title for h in setext_headings(text, max_level=1)), "")
        return Converted(text, title, metadata)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(MarkdownConverter)
