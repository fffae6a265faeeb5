"""What language a text is written in, and which of its characters belong to scripts that
put no spaces between words: shared by the loaders (a document's `language`), the
multilingual tokenizer, the chunkers that count words, and the search page's highlighting.

Detection reads the text's scripts first, which decide alone for Chinese, Japanese and
Korean (kana means Japanese, Hangul Korean, other Han Chinese); a text in any other script
goes to py3langid (BSD; its model, 4.5 MB, ships inside the wheel), with code blocks
removed, and its answer is kept only at `min_confidence` or above: a two-word query is
rarely decided, and then the caller's default stands.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

from plm import MissingDependencyError

# Han (with its compatibility and extension blocks), kana and the CJK marks, as Lucene's
# CJKBigramFilter and Elasticsearch's `cjk` analyzer group them: one run per stretch.
HAN_KANA = (
    "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
# Scripts written without spaces between words, one character class each: Han with kana,
# Hangul, Thai and Lao, Myanmar, Khmer. Each of their characters counts as a word where
# sizes are counted in words; a run of one of them is one stretch to pair up.
NO_SPACE_SCRIPTS = (HAN_KANA, HANGUL, "\u0e00-\u0eff", "\u1000-\u109f", "\u1780-\u17ff")
NO_SPACE = "".join(NO_SPACE_SCRIPTS)
# A run of one script without spaces: never Han and Hangul (or Thai) in one run.
NO_SPACE_RUN = re.compile("|".join(f"[{chars}]+" for chars in NO_SPACE_SCRIPTS))
NO_SPACE_CHAR = re.compile(f"[{NO_SPACE}]")
# A word: a character of a script without spaces, or a run of other non-space characters.
WORD_UNIT = re.compile(f"[{NO_SPACE}]|(?:(?![{NO_SPACE}])\\S)+")
_HAN_KANA_RUN = re.compile(f"[{HAN_KANA}]+")
_KANA = re.compile(f"[{KANA}]")
_HANGUL = re.compile(f"[{HANGUL}]")
_FENCE = re.compile(r"```[\s\S]*?```|~~~[\s\S]*?~~~")
SAMPLE_CHARS = 1_500  # enough to decide (py3langid reads ~1.4 MB/s); a long text's start speaks for it

# ISO 639-1 code -> PyStemmer's Snowball algorithm.
SNOWBALL = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish",
    "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french",
    "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish",
    "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
    "fa": "persian", "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}  # fmt: skip


def no_space_chars(text: str) -> int:
    """How many characters of `text` belong to a script written without spaces."""
    return len(NO_SPACE_CHAR.findall(text))


def by_script(text: str) -> str | None:
    """ "zh", "ja" or "ko" when CJK characters are at least a tenth of the text's letters (a
    Chinese page's code and English terms are often most of them); else None."""
    han_kana = sum(len(m) for m in _HAN_KANA_RUN.findall(text))
    hangul = len(_HANGUL.findall(text))
    cjk = han_kana + hangul
    if not cjk:
        return None
    letters = sum(1 for c in text if c.isalpha())
    if cjk * 10 < letters:
        return None
    if hangul >= han_kana:
        return "ko"
    return "ja" if len(_KANA.findall(text)) * 20 >= han_kana else "zh"


def detect(text: str, default: str | None = None, min_confidence: float = 0.5) -> str | None:
    """The ISO 639-1 code of the language `text` is written in, or `default` when it cannot
    be told at `min_confidence` (0..1: py3langid's normalised probability)."""
    sample = text[: SAMPLE_CHARS * 2]
    sample = _FENCE.sub(" ", sample)[:SAMPLE_CHARS] if "```" in sample or "~~~" in sample else sample[:SAMPLE_CHARS]
    found = by_script(sample)
    if found is not None:
        return found
    if not any(c.isalpha() for c in sample):
        return default
    code, confidence = _identifier().classify(unicodedata.normalize("NFKC", sample))
    return str(code) if confidence >= min_confidence else default


@functools.cache
def _identifier() -> Any:
    """py3langid's model with normalised probabilities (loaded once: 0.9 s)."""
    try:
        from py3langid import langid
    except ImportError:
        raise MissingDependencyError("py3langid", "languages") from None
    return langid.LanguageIdentifier.from_modelpath(langid.MODEL_DIR / langid.MODEL_FILE, norm_probs=True)


def detector_version() -> str:
    """What detection depends on (for an index's identity): py3langid's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"py3langid {version('py3langid')}"
    except PackageNotFoundError:
        return "py3langid absent"


def document_language(text: str, metadata: dict[str, Any], setting: str) -> str | None:
    """A document's language: its own `language` or `lang` field (front matter: `lang: zh-CN`
    -> "zh"), else `setting`: "auto" detects it from the text, "none" leaves it unknown, an
    ISO 639-1 code sets it."""
    own = metadata.get("language", metadata.get("lang"))
    found = re.match(r"([A-Za-z]{2,3})(?:$|[-_])", own.strip()) if isinstance(own, str) else None
    if found:
        return found.group(1).lower()
    if setting == "none":
        return None
    if setting == "auto":
        return detect(text)
    return setting
