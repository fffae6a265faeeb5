"""A third-party BM25 tokenizer in one file: character n-grams, so a misspelt word
("autoscalr") still shares most of its tokens with the right one ("autoscaler").

    [query.retrieve.retrievers.bm25.tokenizer]
    use = "char_ngrams"
    n = 4
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import plm


class CharNgramTokenizer(plm.Tokenizer):
    """Each lowercased word's character n-grams, padded with spaces at its ends ("pod" -> " po",
    "pod", "od "); a word shorter than n is one token."""

    name = "char_ngrams"

    class Config(plm.ComponentConfig):
        n: int = 3
        """The n-gram length (3 to 5 suit misspellings; longer grams are closer to whole words)."""

    config: Config

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        n = self.config.n
        out = []
        for text in texts:
            tokens: list[str] = []
            for word in re.findall(r"\w+", text.lower()):
                padded = f" {word} "
                tokens += [padded[i : i + n] for i in range(len(padded) - n + 1)] or [word]
            out.append(tokens)
        return out


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(CharNgramTokenizer)
