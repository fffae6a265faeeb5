"""The rules of a synthetic judged query (`plm.QueryGenerator`), on the face (`plm.synthetic`)
so the evaluation that uses them, the conformance kit and a generator's author agree: a query is
"found verbatim" in a text when its words occur there in order and adjacent, case and
punctuation aside (what a tokenizer sees), and `rewrite` cuts every copied span and every
such copy from a corpus, so that no query is found because it was copied from what is
searched."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from plm import Document, SyntheticQuery

_WORD = re.compile(r"\w+")


def normalized(text: str) -> str:
    """Words only, lower case, one space apart, padded: what "verbatim" means to a tokenizer."""
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def found_in(query: str, text: str) -> bool:
    """Whether the query's words occur in the text, in order and adjacent (a copy of it)."""
    q = normalized(query)
    return q.strip() != "" and q in normalized(text)


def _pattern(query: str) -> re.Pattern[str]:
    words = _WORD.findall(query)
    return re.compile(r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)", re.IGNORECASE)


def cut(text: str, query: str) -> str:
    """The text without any copy of the query (repeated: a cut may join two halves of one)."""
    if not found_in(query, text):
        return text
    pattern = _pattern(query)
    for _ in range(10):
        text = pattern.sub(" ", text)
        if not found_in(query, text):
            return text
    raise AssertionError(f"could not cut {query!r} from a document")  # pragma: no cover - a bug


def rewrite(documents: Sequence[Document], queries: Sequence[SyntheticQuery]) -> tuple[list[Document], int]:
    """The documents with every query's copied spans and every copy of every query cut."""
    spans = sorted({s for q in queries for s in q.remove if s.strip()}, key=len, reverse=True)
    texts = [(q.text, normalized(q.text)) for q in queries]
    out, changed = [], 0
    for doc in documents:
        text, title = doc.text, doc.title
        for span in spans:
            if span in text:
                text = text.replace(span, " ")
            if span in title:
                title = title.replace(span, " ")
        norm = normalized(text) + normalized(title)
        for query, key in texts:
            if key in norm:
                text, title = cut(text, query), cut(title, query)
        if (text, title) != (doc.text, doc.title):
            changed += 1
            doc = replace(doc, text=text if text.strip() else "(removed)", title=" ".join(title.split()))
        out.append(doc)
    return out, changed


def leaks(queries: Sequence[tuple[str, SyntheticQuery]], documents: Sequence[Document]) -> list[str]:
    """Query ids whose text is a copy of something in the corpus (its target's text or any
    other document's): none, once the corpus is `rewrite`'s."""
    corpus = "\n".join(normalized(d.text) + "\n" + normalized(d.title) for d in documents)
    return [qid for qid, q in queries if normalized(q.text) in corpus]
