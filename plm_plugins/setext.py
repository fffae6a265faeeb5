"""Setext headings (CommonMark): a line of text underlined by `===` (level 1) or `---` (level 2).

Shared by the `markdown_dir` loader (a document's title) and the `markdown_semantic` chunker
(its sections), each behind an option that is off by default: the POC read only `#`
headings, and `configs/poc_parity.toml` must keep doing so.

The rules, kept simple on purpose:
- The underline is a line of only `=` or only `-` characters, with at most 3 leading spaces
  and any trailing spaces or tabs.
- The heading text is the one line directly above it, stripped. CommonMark makes every line
  of a multi-line paragraph the heading; here only the last one is (the lines before stay
  in the text above the heading).
- That line must be a paragraph line: not blank (so a `---` after a blank line is a thematic
  break), not indented 4 spaces or a tab (indented code), not an ATX heading (`# x`), a
  block quote (`> x`), a list item (`- x`, `1. x`), a thematic break or a fence line, and
  not the underline of a heading just above it. Nor may it be in a run of non-blank lines
  that starts with a list item, a block quote, an HTML tag (`<p align="center">`) or a
  template tag (Hugo's `{{< highlight yaml >}}`, Liquid's `{% raw %}`): CommonMark reads
  the `---` under a list item's or quote's lines as a thematic break and keeps it inside
  an HTML block, and under a template tag it is mostly a YAML document separator in code
  that has no fence (poc_needle's 1,570 pages have 9 CommonMark setext headings, all of
  them that: 8 right under a `{{< highlight yaml >}}` line, one under an indented line).
- Lines inside fenced code blocks (``` or ~~~, closed by a like fence at least as long, or
  open to the end of the text) are never read: neither underline nor heading text. This
  differs from the chunker's `#` headings, which the POC found inside code fences too.
- YAML front matter, a first line `---` up to the next `---` line (as the loader's
  metadata reader takes it), is skipped: its closing `---` is not an underline.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from plm.documents import front_matter_lines

_UNDERLINE = re.compile(r" {0,3}(=+|-+)[ \t\r]*")  # \r: a file with CRLF line ends
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# Lines that are some other block than a paragraph, so never a heading's text: indented code,
# an ATX heading, a thematic break (`***`, `- - -`, `___`).
_NOT_PARAGRAPH = re.compile(r"(?: {4}|\t| {0,3}(?:#{1,6}(?:[ \t]|$)|([-*_])[ \t]*(?:\1[ \t]*){2,}$))")
# A block quote, a list item, an HTML tag or a template tag: the lines run on from it (up
# to a blank line) are its own, never a heading's text.
_CONTAINER = re.compile(r" {0,3}(?:>|[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|<[A-Za-z/!?]|\{[{%])")


class SetextHeading(NamedTuple):
    """One heading: `start` is where its text line starts, `end` where its underline ends
    (before the newline), `level` 1 or 2, `title` the text line stripped."""

    start: int
    end: int
    level: int
    title: str


def setext_headings(text: str, max_level: int = 2) -> list[SetextHeading]:
    """The setext headings of `text` up to `max_level` (1: `===` only), in order."""
    lines = text.split("\n")
    found: list[SetextHeading] = []
    fence = ""  # the open fence's characters, "" outside a fenced block
    offset = 0
    previous: str | None = None  # the line above, when it may be a heading's text
    previous_start = 0
    in_container = False  # in a run of non-blank lines that a _CONTAINER line started
    skip = front_matter_lines(lines)
    for i, line in enumerate(lines):
        start, offset = offset, offset + len(line) + 1
        if i < skip:
            continue
        if fence:
            if (m := _FENCE.match(line)) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = "" if not line[m.end() :].strip() else fence  # a closing fence has no info string
            continue
        if (m := _FENCE.match(line)) and not (m.group(1)[0] == "`" and "`" in line[m.end() :]):
            fence, previous = m.group(1), None  # (a backtick fence's info string has no backtick)
            continue
        underline = _UNDERLINE.fullmatch(line)
        if underline and previous is not None:
            level = 1 if underline.group(1)[0] == "=" else 2
            if level <= max_level:
                found.append(SetextHeading(previous_start, start + len(line), level, previous.lstrip("\ufeff").strip()))
            previous = None  # an underline is never the next heading's text
            continue
        blank = not line.strip()
        in_container = not blank and (in_container or bool(_CONTAINER.match(line)))
        paragraph = not blank and not in_container and not _NOT_PARAGRAPH.match(line)
        previous, previous_start = (line, start) if paragraph else (None, 0)
    return found
