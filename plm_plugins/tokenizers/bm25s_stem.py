"""bm25s's own English tokenizer: its regex, its English stop words, the Snowball English stemmer."""

from __future__ import annotations

from collections.abc import Sequence

import plm
from plm_plugins.tokenizers.snowball import WORD, stem_all, stemmer_for, stopwords_for


class BM25sStemTokenizer(plm.Tokenizer):
    """`bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))`: lowercased words of two
    or more letters or digits, English stop words removed, then stemmed ("The Pods are running"
    -> pod, run). The `snowball` tokenizer gives the same tokens for language = "english"."""

    name = "bm25s_stem"

    def warm_up(self) -> None:
        self._stem_words = stemmer_for("english")
        self._stop = stopwords_for("english", True)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        # bm25s.tokenize's steps, written out: called per query, its progress bars and
        # per-call vocabulary cost five times the tokens themselves (57 us of a 460 us query).
        self.ensure_warm()
        stop = self._stop
        return stem_all([[w for w in WORD.findall(text.lower()) if w not in stop] for text in texts], self._stem_words)


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(BM25sStemTokenizer)
