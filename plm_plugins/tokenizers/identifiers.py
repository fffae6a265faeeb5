"""A tokenizer for technical text: names are indexed whole and by their parts.

`PodDisruptionBudget` -> poddisruptionbudget, pod, disruption, budget; `max_surge`,
`kube-apiserver`, `kubectl.kubernetes.io/restartedAt` and `std::vec` likewise (a part that
is itself camelCase is split again, and indexed whole too). Queries get the same
treatment, so "pod disruption budget" finds a page that only writes PodDisruptionBudget,
and the exact name still ranks the page that writes it first (its whole token is rare).
Camel-case boundaries are ASCII (a lower letter then an upper one, an acronym before a
word, letters next to digits); any Unicode letter or digit belongs to a word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import plm
from plm_plugins.tokenizers.snowball import Language, stem_all, stemmer_for, stopwords_for, words_digest

# A name: runs of letters/digits joined by - _ . / : (no leading or trailing joiner).
NAME = re.compile(r"[^\W_]+(?:[-_./:]+[^\W_]+)*")
JOINER = re.compile(r"[-_./:]+")
CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def name_tokens(name: str, keep_whole: bool = True) -> list[str]:
    """One name's tokens, lowercased: the whole name (with `keep_whole`, or when it has no
    parts), then each joined part the same way, down to camelCase pieces."""
    pieces = JOINER.split(name)
    if len(pieces) == 1:
        parts = CAMEL.split(name)
        if len(parts) == 1:
            return [name.lower()]
        return ([name.lower()] if keep_whole else []) + [p.lower() for p in parts]
    out = [name.lower()] if keep_whole else []
    for piece in pieces:
        out += name_tokens(piece, keep_whole)
    return out


class IdentifierTokenizer(plm.Tokenizer):
    """Words and names (camelCase, PascalCase, snake_case, kebab-case, dotted or slashed),
    each name indexed whole and by its parts; tokens shorter than `min_length` (and stop words,
    when set) are dropped, then tokens are stemmed (when set)."""

    name = "identifiers"

    class Config(plm.ComponentConfig):
        language: Language = "english"
        """The language of the stemmer and stop words (see `snowball`)."""
        stem: bool = False
        """Snowball-stem every token, whole names included (false: exact lowercased tokens; it
        won on poc_needle's `informed`, BENCHMARKS.md section 13)."""
        stopwords: bool | list[str] = False
        """true: the language's stop words (bm25s's lists, as `snowball`); false: none (won on
        `informed`); a list: these words."""
        keep_whole: bool = True
        """Also index each name whole (`poddisruptionbudget` next to its parts), so the exact
        name outranks pages that only share its words."""
        min_length: int = 2
        """Tokens shorter than this are dropped (2: as bm25s, single letters and digits go)."""

    config: Config

    def warm_up(self) -> None:
        self._stem_words = stemmer_for(self.config.language if self.config.stem else None)
        self._stop = stopwords_for(self.config.language, self.config.stopwords)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        self.ensure_warm()
        stop, shortest, whole = self._stop, self.config.min_length, self.config.keep_whole
        docs = [
            [t for name in NAME.findall(text) for t in name_tokens(name, whole) if len(t) >= shortest and t not in stop]
            for text in texts
        ]
        return stem_all(docs, self._stem_words)

    @property
    def identity(self) -> dict[str, Any]:
        self.ensure_warm()
        return {**super().identity, "stopwords_sha256": words_digest(self._stop)}


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(IdentifierTokenizer)
