"""bm25s's own English tokenizer: its regex, its English stop words, the Snowball English stemmer."""

from __future__ import annotations

from collections.abc import Sequence

import plm
from plm_plugins.tokenizers.snowball import stemmed_words, stemmer_for, stopwords_for


class BM25sStemTokenizer(plm.Tokenizer):
    """`bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))`: lowercased words of two
    or more letters or digits, English stop words removed, then stemmed ("The Pods are running"
    -> pod, run). The `snowball` tokenizer gives the same tokens for language = "english"."""

    name = "bm25s_stem"

    def warm_up(self) -> None:
        self._stem_words = stemmer_for("english")
        self._stop = stopwords_for("english", True)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        self.ensure_warm()
        return stemmed_words(texts, self._stop, self._stem_words)


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(BM25sStemTokenizer)
