"""The inverse cloze task (Lee et al., 2019): a sentence taken out of its passage is a query
for the passage, and the sentence is removed from what is searched, so the passage must be
found by what surrounds the sentence, not by a copy of it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from plm import ComponentConfig, Document, QueryGenerator, SyntheticQuery, hookimpl
from plm_plugins.query_generators.text import paragraphs, render, sentences, words

if TYPE_CHECKING:
    from plm import Registry


class InverseClozeQueries(QueryGenerator):
    """One sentence per document (picked by a hash of the document id, so the same corpus
    gives the same queries), of `min_words` to `max_words` words, from a document that keeps
    at least `min_rest_words` words without it. Headings and a title line are not sentences
    (`headings` makes those queries)."""

    name = "inverse_cloze"

    class Config(ComponentConfig):
        min_words: int = Field(8, ge=1)
        """Shorter sentences say too little to find their passage by."""
        max_words: int = Field(40, ge=1)
        """Longer sentences are passages, not queries."""
        min_rest_words: int = Field(40, ge=0)
        """What must remain of the document, without the sentence, to be found by."""
        per_document: int = Field(1, ge=1)
        """Sentences taken from one document at most."""

    config: Config

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        c = self.config
        out: list[SyntheticQuery] = []
        for doc in documents:
            total = len(words(doc.text))
            title = " ".join(words(doc.title)).lower()
            fits = []
            for para in paragraphs(doc.text):
                if title and " ".join(words(para)).lower() == title:
                    continue  # the title indexed as the first line (beir_corpus include_title): a heading
                for raw in sentences(para):
                    text = render(raw.strip().lstrip("-*+> ").strip())
                    n = len(words(text))
                    if c.min_words <= n <= c.max_words and total - n >= c.min_rest_words and "http" not in text:
                        fits.append((raw, text))
            # Spread over the document, deterministically: a hash of the id picks where to start.
            start = int(hashlib.sha256(doc.id.encode()).hexdigest()[:8], 16)
            for j in range(min(c.per_document, len(fits))):
                raw, text = fits[(start + j * max(1, len(fits) // c.per_document)) % len(fits)]
                out.append(SyntheticQuery(text, doc.id, self.name, remove=(raw,), source_doc=doc.id))
        return out


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(InverseClozeQueries)
