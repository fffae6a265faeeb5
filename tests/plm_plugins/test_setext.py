"""plm_plugins.setext: the setext heading rules the loader's title and the chunker share."""

from __future__ import annotations

import pytest

from plm_plugins.setext import SetextHeading, setext_headings

README = """\
<p align="center">
  <img src="logo.png">
</p>
---

APT
===

A package manager.

- one
- two
---

Install
-------

    indented code
    ---

> quoted
---

***
---

```sh
echo hi
---
```

Usage
--
"""


def test_positions_levels_and_titles() -> None:
    text = "Title\n=====\nbody\nSub  \n  ---  \n"
    assert setext_headings(text) == [
        SetextHeading(0, text.index("\nbody"), 1, "Title"),
        SetextHeading(text.index("Sub"), len(text) - 1, 2, "Sub"),
    ]
    assert [h.title for h in setext_headings(text, max_level=1)] == ["Title"]


def test_crlf_line_ends_and_a_byte_order_mark() -> None:
    assert [(h.level, h.title) for h in setext_headings("\ufeffAPT\r\n===\r\nx\r\nSub\r\n---\r\n")] == [
        (1, "APT"),
        (2, "Sub"),
    ]


def test_a_readme_gives_the_headings_commonmark_gives() -> None:
    assert [(h.level, h.title) for h in setext_headings(README)] == [(1, "APT"), (2, "Install"), (2, "Usage")]
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark").parse(README)
    theirs = [
        (int(t.tag[1:]), tokens[i + 1].content)
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and t.markup in ("=", "-")
    ]
    assert theirs == [(h.level, h.title) for h in setext_headings(README)]


def test_a_line_of_dashes_right_under_an_underline_is_a_thematic_break() -> None:
    assert [h.title for h in setext_headings("A\n===\n---\n")] == ["A"]
