"""Which words say something: the structure-free generators (`spans`, `keyphrases`) never
make a query of stop words and numbers alone, which would name no document."""

from __future__ import annotations

from collections.abc import Container

# English function words (Lucene's and NLTK's lists, merged and trimmed to the common ones).
# Built in so that the generators need no tokenizer package; a config's `stopwords` replaces it.
ENGLISH = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves also may might must shall us via
    within without upon""".split()
)


def is_content(word: str, stopwords: Container[str] = ENGLISH) -> bool:
    """A word that can name something: not a stop word, a number or a single character."""
    w = word.lower()
    return len(w) > 1 and not w.replace("_", "").isdigit() and w not in stopwords
