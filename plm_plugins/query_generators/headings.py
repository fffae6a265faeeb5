"""Headings and titles as queries for their document, the heading taken out of what is
searched (`SyntheticQuery.remove`): a query that names a section, the way a reader who knows
what they look for but not where it is would ask."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from plm import ComponentConfig, Document, QueryGenerator, SyntheticQuery, hookimpl
from plm_plugins.query_generators.text import headings, render, words

if TYPE_CHECKING:
    from plm import Registry


class HeadingQueries(QueryGenerator):
    """The title and each Markdown heading of a document -> a query judged relevant to it.
    A heading shared by several documents ("Overview", "What's next") names none of them,
    so it is left out, as is one shorter than `min_words`."""

    name = "headings"

    class Config(ComponentConfig):
        min_words: int = Field(3, ge=1)
        """Shorter headings are too vague to be queries ("Overview", "Examples")."""
        max_words: int = Field(30, ge=1)
        """Longer titles are passages, not queries."""
        titles: bool = True
        """Use each document's title too (a BEIR corpus's title field, a Markdown file's `title:`)."""
        levels: int = Field(3, ge=1, le=6)
        """The deepest Markdown heading level used (### = 3)."""

    config: Config

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        found: list[SyntheticQuery] = []
        for doc in documents:
            seen: set[str] = set()
            own = []
            if self.config.titles and doc.title.strip():
                own.append((doc.title, render(doc.title)))
            own += [(raw, text) for raw, text in headings(doc.text) if raw.lstrip().count("#") <= self.config.levels]
            for raw, text in own:
                key = " ".join(words(text)).lower()
                n = len(words(text))
                if key in seen or not self.config.min_words <= n <= self.config.max_words:
                    continue
                seen.add(key)
                found.append(SyntheticQuery(text, doc.id, self.name, remove=(raw,), source_doc=doc.id))
        shared = Counter(" ".join(words(q.text)).lower() for q in found)
        return [q for q in found if shared[" ".join(words(q.text)).lower()] == 1]


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(HeadingQueries)
