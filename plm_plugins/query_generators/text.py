"""Plain text from Markdown for the query generators: the body without front matter, code
blocks or tables, its headings, sentences, and links rendered as their anchor text."""

from __future__ import annotations

import re
from collections.abc import Iterator

LINK = re.compile(r"(!?)\[([^\]\n]+)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`])")
_WORD = re.compile(r"\w+")
_ANCHOR_ID = re.compile(r"\s*\{#[^}]*\}\s*$")
_SHORTCODE = re.compile(r"\{\{[<%].*?[%>]\}\}")


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def render(text: str) -> str:
    """Markdown inline text as a reader sees it: links and images as their text, no
    backticks, emphasis marks or Hugo shortcodes, whitespace collapsed."""
    text = LINK.sub(lambda m: m.group(2), text)
    text = _SHORTCODE.sub(" ", text)
    text = re.sub(r"[`*_]{1,3}(?=\w)|(?<=\w)[`*_]{1,3}", "", text)
    return " ".join(text.split())


def body_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the prose: no front matter, fenced code, tables, HTML or
    shortcode lines, list markers kept (a sentence may sit in a list item)."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        start = 0 if end is None else end + 1
    fenced = False
    for i in range(start, len(lines)):
        line = lines[i]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        stripped = line.strip()
        if fenced or not stripped or stripped.startswith(("|", "<", "{{", "    ")) or line.startswith("    "):
            continue
        yield i, line


def headings(text: str) -> Iterator[tuple[str, str]]:
    """(raw line, heading text) of each Markdown heading outside code and front matter."""
    for _, line in body_lines(text):
        m = HEADING.match(line.strip())
        if m:
            yield line, render(_ANCHOR_ID.sub("", m.group(2)))


def paragraphs(text: str) -> Iterator[str]:
    """Runs of consecutive prose lines (headings excluded), raw."""
    run: list[str] = []
    last = -2
    for i, line in body_lines(text):
        if HEADING.match(line.strip()):
            continue
        if i != last + 1 and run:
            yield "\n".join(run)
            run = []
        run.append(line)
        last = i
    if run:
        yield "\n".join(run)


def sentences(paragraph: str) -> list[str]:
    """The paragraph's sentences, raw (as written, so each can be cut out verbatim)."""
    return [s for s in _SENTENCE_END.split(paragraph) if s.strip()]


def longest_copy(query: str, text: str) -> int:
    """The most consecutive words of `query` found in order and adjacent in `text`, case and
    punctuation aside: the words a tokenizer sees, as `plm eval --synthetic` reads "verbatim"."""
    q = [w.lower() for w in words(query)]
    padded = " " + " ".join(w.lower() for w in words(text)) + " "
    best = 0
    for i in range(len(q)):
        # Only a longer run than the best so far is worth looking for.
        while i + best < len(q) and " " + " ".join(q[i : i + best + 1]) + " " in padded:
            best += 1
    return best
