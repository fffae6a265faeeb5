"""Each text analysed by its own language, as Lucene and Elasticsearch give each language its
analyzer: Chinese, Japanese, Korean and the other scripts written without spaces as
overlapping character bigrams (Lucene's CJKBigramFilter: "持久卷" -> 持久, 久卷, so a query
word meets the text's however it was segmented, with no dictionary to ship), every other word
lowercased after Unicode NFKC (full-width letters, ligatures), less its language's stop
words, Snowball-stemmed in that language.

A text's language is detected on the text itself (`plm.languages.detect`), so a passage in
German is stemmed as German in a file that is mostly English; a text whose language cannot be
told (a two-word query) is analysed as `default_language`. Latin words inside a text in a
language of another script (English terms in a Russian page, code in a Chinese one) are
analysed as `default_language`, as the queries that name them are. An English text gives
exactly the tokens of `bm25s_stem` (tests compare).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field

import plm
from plm.languages import NO_SPACE_RUN, SNOWBALL, detect, detector_version
from plm_plugins.tokenizers.snowball import WORD, stem_all, stemmed_words, stemmer_for, stopwords_for

# Snowball languages written in another script than Latin: their Latin words are the default's.
_OTHER_SCRIPT = frozenset({"arabic", "armenian", "greek", "hindi", "nepali", "persian", "russian", "tamil", "yiddish"})
_LATIN_END = "\u0370"  # below it: Latin letters (with diacritics), digits, "_"


# A word's script -> the Snowball language its words are stemmed as, where the text's own
# language is written in another script (Russian words in a German page, a query in two).
_SCRIPTS = (("\u0370", "\u0400", "greek"), ("\u0400", "\u0530", "russian"), ("\u0530", "\u0590", "armenian"),
            ("\u0600", "\u0700", "arabic"), ("\u0900", "\u0980", "hindi"), ("\u0b80", "\u0c00", "tamil"))  # fmt: skip


def _script_language(first: str) -> str:
    return next((language for lo, hi, language in _SCRIPTS if lo <= first < hi), "")


def bigrams(run: str) -> list[str]:
    """Overlapping pairs of a run's characters; a run of one character is itself."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


class MultilingualTokenizer(plm.Tokenizer):
    """Words analysed by the language of the text they are in: CJK, Thai, Lao, Khmer and
    Myanmar as character bigrams, the rest stemmed and stop-worded by Snowball in the detected
    language ("Netzwerkrichtlinien" and "Netzwerkrichtlinie" both -> netzwerkrichtlini)."""

    name = "multilingual"

    class Config(plm.ComponentConfig):
        default_language: str = Field("en", pattern=r"^[a-z]{2}$")
        """ISO 639-1 code of the language a text is analysed as when its own cannot be told
        (and of Latin words in a text of another script)."""
        min_confidence: float = Field(0.5, ge=0, le=1)
        """How sure detection must be (0..1) before a text is analysed as other than the default."""
        stopwords: bool = True
        """Drop each language's stop words where bm25s has a list (English, German, French,
        Spanish, Russian and eight more)."""

    config: Config

    def warm_up(self) -> None:
        self._stemmers: dict[str, Callable[[list[str]], list[str]]] = {}
        self._stops: dict[str, frozenset[str]] = {}
        if self.config.default_language not in SNOWBALL:
            raise plm.ConfigError(
                f"multilingual: default_language {self.config.default_language!r} has no Snowball stemmer; "
                f"use one of {', '.join(sorted(set(SNOWBALL)))}"
            )

    def _stemmer(self, algorithm: str) -> Callable[[list[str]], list[str]]:
        if algorithm not in self._stemmers:
            self._stemmers[algorithm] = stemmer_for(algorithm)
        return self._stemmers[algorithm]

    def _stop(self, algorithm: str) -> frozenset[str]:
        if algorithm not in self._stops:
            self._stops[algorithm] = stopwords_for(algorithm, self.config.stopwords)
        return self._stops[algorithm]

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        self.ensure_warm()
        return [self._tokens(text) for text in texts]

    def _tokens(self, text: str) -> list[str]:
        cfg = self.config
        if not text.isascii():
            text = unicodedata.normalize("NFKC", text)
        language = detect(text, cfg.default_language, cfg.min_confidence) or cfg.default_language  # never None
        default = SNOWBALL[cfg.default_language]
        algorithm = SNOWBALL.get(language, default)
        runs = NO_SPACE_RUN.findall(text) if not text.isascii() else []
        if not runs and algorithm not in _OTHER_SCRIPT and text.isascii():  # snowball's own path
            return stemmed_words([text], self._stop(algorithm), self._stemmer(algorithm))[0]
        words = WORD.findall((NO_SPACE_RUN.sub(" ", text) if runs else text).lower())
        latin = [w for w in words if w[0] < _LATIN_END]
        tokens = self._analysed(latin, default if algorithm in _OTHER_SCRIPT else algorithm)
        if len(latin) < len(words):  # each other script's words by its language
            by_script: dict[str, list[str]] = {}
            for w in words:
                if w[0] >= _LATIN_END:
                    own = algorithm if algorithm in _OTHER_SCRIPT else _script_language(w[0])
                    by_script.setdefault(own, []).append(w)
            tokens += [t for own, ws in by_script.items() for t in self._analysed(ws, own)]
        return tokens + [b for run in runs for b in bigrams(run)]

    def _analysed(self, words: list[str], algorithm: str) -> list[str]:
        if not algorithm:  # a script no stemmer reads (Hebrew, Georgian): words as they are
            return words
        stop = self._stop(algorithm)
        kept = [w for w in words if w not in stop]
        return stem_all([kept], self._stemmer(algorithm))[0] if kept else []

    @property
    def identity(self) -> dict[str, Any]:
        return {**super().identity, "detector": detector_version()}


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(MultilingualTokenizer)
