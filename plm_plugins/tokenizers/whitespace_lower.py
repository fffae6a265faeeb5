"""The POC's BM25 tokenizer: `text.lower().split()` (configs/poc_parity.toml)."""

from __future__ import annotations

from collections.abc import Sequence

import plm


class WhitespaceLowerTokenizer(plm.Tokenizer):
    """Lowercases and splits on whitespace: no stop words, no stemming, and punctuation stays
    on the word ("pod," is not "pod"), exactly as the POC's rank_bm25 index did."""

    name = "whitespace_lower"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        return [text.lower().split() for text in texts]


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(WhitespaceLowerTokenizer)
