"""A run of consecutive words taken out of a document is a query for the rest of it: the inverse
cloze task without sentences. It needs no title, heading, sentence mark or link, so it makes
queries from any text (abstracts without titles, tickets, transcripts); the run is removed
from what is searched (`SyntheticQuery.remove`), so the document must be found by what
surrounds it, not by a copy of the run."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from plm import ComponentConfig, Document, QueryGenerator, SyntheticQuery, hookimpl
from plm_plugins.query_generators.stopwords import ENGLISH, is_content
from plm_plugins.query_generators.text import paragraphs, words

if TYPE_CHECKING:
    from plm import Registry

_WORD = re.compile(r"\w+")


class SpanQueries(QueryGenerator):
    """One run of `min_words` to `max_words` consecutive words per document (its length and
    where it starts picked by a hash of the document id, so the same corpus gives the same
    queries; shorter where the document could not keep `min_rest_words` words without it),
    with at least `min_content_words` words that are not stop words or numbers. A run stays inside one
    paragraph and skips a title line, Markdown headings and code; text with no structure at all
    is one paragraph."""

    name = "spans"

    class Config(ComponentConfig):
        min_words: int = Field(16, ge=2, le=100)
        """The shortest run. Runs of 8 to 16 words ordered recipes worse on SciFact than 16 to
        32 (Kendall tau 0.64 against 0.82 on train, BENCHMARKS.md 22): a short run out of
        the middle of a sentence says too little for a dense model to find its document by."""
        max_words: int = Field(32, ge=2, le=100)
        """The longest run (a run is a query, not a passage)."""
        min_rest_words: int = Field(40, ge=0)
        """What must remain of the document without its runs, to be found by: a document of
        fewer than `min_words` + `min_rest_words` words gives no query."""
        min_content_words: int = Field(3, ge=1)
        """Words of the run that are not stop words, numbers or single characters."""
        per_document: int = Field(1, ge=1, le=20)
        """Runs taken from one document at most (spread over it, never overlapping)."""
        stopwords: list[str] | None = None
        """The stop words `min_content_words` leaves out: a list, or unset for a built-in
        English list."""

        @model_validator(mode="after")
        def _lengths(self) -> SpanQueries.Config:
            if self.min_words > self.max_words:
                raise ValueError(f"min_words ({self.min_words}) is more than max_words ({self.max_words})")
            if self.min_content_words > self.min_words:
                raise ValueError(
                    f"min_content_words ({self.min_content_words}) is more than min_words ({self.min_words})"
                )
            return self

    config: Config

    def generate(self, documents: Sequence[Document]) -> list[SyntheticQuery]:
        c = self.config
        stop = ENGLISH if c.stopwords is None else frozenset(w.lower() for w in c.stopwords)
        out: list[SyntheticQuery] = []
        for doc in documents:
            total = len(words(doc.text))
            digest = int(hashlib.sha256(doc.id.encode()).hexdigest()[:12], 16)
            # A document too short for the drawn length gets a shorter run, down to min_words.
            length = min(c.min_words + digest % (c.max_words - c.min_words + 1), total - c.min_rest_words)
            if length < c.min_words:
                continue
            starts = self._starts(doc, length)
            if not starts:
                continue
            taken: list[tuple[int, int]] = []  # (start, end) offsets in the document's text
            first = (digest // (c.max_words + 1)) % len(starts)
            step = max(1, len(starts) // c.per_document)
            for k in range(min(c.per_document, (total - c.min_rest_words) // length)):
                # Spread over the document: the k-th run starts a step further, or at the next
                # place after it where a run has enough content words and overlaps none taken.
                for i in range(len(starts)):
                    spans = starts[(first + k * step + i) % len(starts)]
                    begin, end = spans[0][0], spans[-1][1]
                    raw = doc.text[begin:end]
                    found = [doc.text[a:b] for a, b in spans]
                    if (
                        sum(is_content(w, stop) for w in found) >= c.min_content_words
                        and "http" not in raw
                        and "](" not in raw  # a Markdown link's target is not prose
                        and not any(begin < e and b < end for b, e in taken)
                    ):
                        taken.append((begin, end))
                        out.append(SyntheticQuery(" ".join(found), doc.id, self.name, remove=(raw,), source_doc=doc.id))
                        break
        return out

    def _starts(self, doc: Document, length: int) -> list[list[tuple[int, int]]]:
        """Every run of `length` words inside one paragraph, as the (start, end) offsets of its
        words in the document's text."""
        title = " ".join(words(doc.title)).lower()
        found = []
        at = 0
        for para in paragraphs(doc.text):
            base = doc.text.index(para, at)
            at = base + len(para)
            if title and " ".join(words(para)).lower() == title:
                continue  # the title indexed as the first line (beir_corpus include_title): `headings` asks it
            spans = [(base + m.start(), base + m.end()) for m in _WORD.finditer(para)]
            found += [spans[i : i + length] for i in range(len(spans) - length + 1)]
        return found


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(SpanQueries)
