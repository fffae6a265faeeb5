"""bm25s's own English tokenizer: its regex, its English stop words, the Snowball English stemmer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plm


class BM25sStemTokenizer(plm.Tokenizer):
    """`bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))`: lowercased words of two
    or more letters or digits, English stop words removed, then stemmed ("The Pods are running"
    -> pod, run). The `snowball` tokenizer gives the same tokens for language = "english"."""

    name = "bm25s_stem"

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        if not texts:
            return []
        try:
            import bm25s
        except ImportError:
            raise plm.MissingDependencyError("bm25s", "bm25") from None
        stemmer = self._stemmer()
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        return [list(t) for t in tokens]

    def _stemmer(self) -> Any:
        if getattr(self, "_stemmer_obj", None) is None:
            try:
                import Stemmer
            except ImportError:
                raise plm.MissingDependencyError("PyStemmer", "bm25") from None
            self._stemmer_obj = Stemmer.Stemmer("english")
        return self._stemmer_obj


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(BM25sStemTokenizer)
