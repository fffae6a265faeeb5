"""A document's most distinctive words, by TF-IDF over the documents given, as a keyword
query for it: what a reader who remembers a few terms of a document types. It needs no
structure (no title, heading, sentence mark or link). Nothing is removed from the document,
so the words are there to be matched: a known-item lookup by the document's own rarest
terms, which word-matching recipes answer almost perfectly.

Not for choosing a recipe alone: on SciFact (BENCHMARKS.md 22) its queries scored every
recipe 0.90 to 0.997 and ranked BM25 first, choosing a recipe 0.05 (original text) to 0.14
(without titles and punctuation) nDCG@10 below the judged best; `spans` chose the best.
It is never a default and never the fallback."""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from plm import ComponentConfig, Document, QueryGenerator, SyntheticQuery, hookimpl
from plm_plugins.query_generators.stopwords import ENGLISH, is_content
from plm_plugins.query_generators.text import words

if TYPE_CHECKING:
    from plm import Registry


class KeyphraseQueries(QueryGenerator):
    """One query per document of `min_words` to `max_words` of its words (how many picked by
    a hash of the document id), those with the highest TF-IDF over the documents given, in
    that order; stop words, numbers, single characters and words in fewer than `min_df`
    documents (typos, identifiers that name one document outright) are never chosen. A
    document with fewer than `min_doc_words` words gives none. A lookup test, not a way to
    choose a recipe: on SciFact it ranked BM25 first and chose 0.05 to 0.14 nDCG@10 below the
    judged best (BENCHMARKS.md 22); use `spans` on text without structure."""

    name = "keyphrases"

    class Config(ComponentConfig):
        min_words: int = Field(3, ge=2, le=30)
        """The fewest words in a query."""
        max_words: int = Field(6, ge=2, le=30)
        """The most words in a query."""
        min_df: int = Field(2, ge=1)
        """A word must occur in at least this many documents to be chosen (1: any word)."""
        max_df: float = Field(0.1, gt=0.0, le=1.0)
        """A word in more than this share of the documents is too common to be chosen."""
        min_doc_words: int = Field(40, ge=1)
        """Shorter documents give no query."""
        stopwords: list[str] | None = None
        """Words never chosen: a list, or unset for a built-in English list."""

        @model_validator(mode="after")
        def _lengths(self) -> KeyphraseQueries.Config:
            if self.min_words > self.max_words:
                raise ValueError(f"min_words ({self.min_words}) is more than max_words ({self.max_words})")
            return self

    config: Config

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        c = self.config
        stop = ENGLISH if c.stopwords is None else frozenset(w.lower() for w in c.stopwords)
        bags = [[w.lower() for w in words(d.title + "\n" + d.text)] for d in documents]
        df: Counter[str] = Counter()
        for bag in bags:
            df.update({w for w in bag if is_content(w, stop)})
        n = len(documents)
        most = max(c.min_df, int(c.max_df * n))
        out: list[SyntheticQuery] = []
        for doc, bag in zip(documents, bags, strict=True):
            if len(bag) < c.min_doc_words:
                continue
            digest = int(hashlib.sha256(doc.id.encode()).hexdigest()[:8], 16)
            size = c.min_words + digest % (c.max_words - c.min_words + 1)
            tf = Counter(w for w in bag if c.min_df <= df[w] <= most and is_content(w, stop))
            ranked = sorted(tf, key=lambda w: (-tf[w] * math.log(n / df[w]), w))[:size]
            if len(ranked) >= c.min_words:
                out.append(SyntheticQuery(" ".join(ranked), doc.id, self.name, source_doc=doc.id))
        return out


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(KeyphraseQueries)
