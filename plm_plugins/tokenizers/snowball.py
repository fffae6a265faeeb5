"""Snowball stemming in any language PyStemmer ships, with that language's stop words.

Words are what bm25s's tokenizer takes (two or more letters or digits, lowercased), so
`language = "english"` gives exactly the tokens of `bm25s_stem`. Stop words are bm25s's
lists (from NLTK), for the languages bm25s has one; the others get none unless the config
lists them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import string
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, filterfalse
from pathlib import Path
from typing import Any, Literal

import plm

# PyStemmer 3.1's `Stemmer.algorithms()`, spelled out so `plm plugins show snowball` lists
# them without importing it (tests check the list against the installed PyStemmer).
Language = Literal[
    "arabic", "armenian", "basque", "catalan", "czech", "danish", "dutch", "dutch_porter", "english",
    "esperanto", "estonian", "finnish", "french", "german", "greek", "hindi", "hungarian", "indonesian",
    "irish", "italian", "lithuanian", "nepali", "norwegian", "persian", "polish", "porter", "portuguese",
    "romanian", "russian", "serbian", "sesotho", "spanish", "swedish", "tamil", "turkish", "yiddish",
]  # fmt: skip
# language -> bm25s's stop-word list (bm25s.stopwords.STOPWORDS_<NAME>)
STOPWORD_LISTS = {
    "english": "EN", "porter": "EN", "german": "GERMAN", "dutch": "DUTCH", "dutch_porter": "DUTCH",
    "french": "FRENCH", "spanish": "SPANISH", "portuguese": "PORTUGUESE", "italian": "ITALIAN",
    "russian": "RUSSIAN", "swedish": "SWEDISH", "norwegian": "NORWEGIAN", "turkish": "TURKISH", "danish": "DANISH",
}  # fmt: skip
WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s's (and scikit-learn's) token pattern
# The same words in ASCII text, without the pattern: every ASCII character that is not a word
# character (`\w`: a letter, a digit, "_") becomes a space and capitals become small, in one
# `translate`; then a split, and words of one character are dropped with the stop words.
# Twice as fast as the pattern on English text, the same tokens (tests compare them).
_ASCII_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_ASCII_WORDS = str.maketrans({chr(i): chr(i).lower() if chr(i) in _ASCII_WORD_CHARS else " " for i in range(128)})
_ONE_CHARACTER = frozenset(c.lower() for c in _ASCII_WORD_CHARS)


def stopwords_for(language: str, setting: bool | list[str]) -> frozenset[str]:
    """The stop words a config's `stopwords` setting means for a language."""
    if isinstance(setting, list):
        return frozenset(w.lower() for w in setting)
    if not setting or language not in STOPWORD_LISTS:
        return frozenset()
    return frozenset(getattr(_bm25s_stopwords(), f"STOPWORDS_{STOPWORD_LISTS[language]}"))


@functools.cache
def _bm25s_stopwords() -> Any:
    """bm25s's `stopwords` module (tuples of words), read from its file without running
    bm25s's `__init__`, which imports scipy: 0.15 s of every one-file ingest."""
    spec = importlib.util.find_spec("bm25s")
    if spec is None:
        raise plm.MissingDependencyError("bm25s", "bm25")
    path = Path(next(iter(spec.submodule_search_locations or []), "")) / "stopwords.py"
    found = importlib.util.spec_from_file_location("plm_bm25s_stopwords", path) if path.is_file() else None
    if found is None or found.loader is None:  # another layout: through the package
        from bm25s import stopwords

        return stopwords
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def words_digest(words: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(words)).encode()).hexdigest()[:16]


def stemmer_for(language: str | None) -> Callable[[list[str]], list[str]]:
    """PyStemmer's `stemWords` for a language; None: words unchanged."""
    if language is None:
        return lambda words: words
    try:
        import Stemmer
    except ImportError:
        raise plm.MissingDependencyError("PyStemmer", "bm25") from None
    stem_words: Callable[[list[str]], list[str]] = Stemmer.Stemmer(language).stemWords
    return stem_words


def stem_all(docs: list[list[str]], stem_words: Callable[[list[str]], list[str]]) -> list[list[str]]:
    """Each distinct word stemmed once (as bm25s does): most of a corpus's words repeat. One
    text (a query) is stemmed as it is: its few words rarely repeat."""
    if len(docs) == 1:
        return [stem_words(docs[0])]
    unique = list(dict.fromkeys(chain.from_iterable(docs)))
    stem = dict(zip(unique, stem_words(unique), strict=True)).__getitem__
    return [list(map(stem, doc)) for doc in docs]


@functools.lru_cache(maxsize=16)
def _ascii_stop(stop: frozenset[str]) -> frozenset[str]:
    """The stop words and the one-character words, which an ASCII text's split leaves in (made
    once per stop list: a query's tokens cost less than the union)."""
    return stop | _ONE_CHARACTER


def stemmed_words(
    texts: Sequence[str], stop: frozenset[str], stem_words: Callable[[list[str]], list[str]]
) -> list[list[str]]:
    """Each text's words (`WORD`, lowercased) less the stop words, stemmed: bm25s.tokenize's
    steps, written out. (Its progress bars and per-call vocabulary cost five times the
    tokens themselves for a query; the loops here run in C, a third of a build's time.)"""
    words, drop, ascii_drop = WORD.findall, stop.__contains__, _ascii_stop(stop).__contains__
    return stem_all(
        [
            list(filterfalse(ascii_drop, text.translate(_ASCII_WORDS).split()))
            if text.isascii()
            else list(filterfalse(drop, words(text.lower())))
            for text in texts
        ],
        stem_words,
    )


class SnowballTokenizer(plm.Tokenizer):
    """Lowercased words of two or more letters or digits, the language's stop words removed,
    then Snowball-stemmed: for German, "Speicherplätze" and "Speicherplatz" both become
    "speicherplatz" and "der", "die", "und" are dropped."""

    name = "snowball"

    class Config(plm.ComponentConfig):
        language: Language = "english"
        """The Snowball stemmer: any language PyStemmer ships (`porter` is the original English Porter)."""
        stopwords: bool | list[str] = True
        """true: the language's stop words where bm25s has a list (danish, dutch, english, french,
        german, italian, norwegian, portuguese, russian, spanish, swedish, turkish; none for the
        others); false: none; a list: these words (matched lowercased, before stemming)."""

    config: Config

    def warm_up(self) -> None:
        self._stem_words = stemmer_for(self.config.language)
        self._stop = stopwords_for(self.config.language, self.config.stopwords)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        self.ensure_warm()
        return stemmed_words(texts, self._stop, self._stem_words)

    @property
    def identity(self) -> dict[str, Any]:
        # The stop words themselves, not just "true": another bm25s release may change a list.
        self.ensure_warm()
        return {**super().identity, "stopwords_sha256": words_digest(self._stop)}


@plm.hookimpl
def plm_register_components(registry: plm.Registry) -> None:
    registry.add(SnowballTokenizer)
