"""Setext headings (`Title` over `===` or `---`) in the markdown-semantic chunker: off by
default (the POC read `#` headings only), and with `setext_headings = true` the same
sections as the `#` headings they equal."""

from __future__ import annotations

from pathlib import Path

import pytest

from plm_core.records import Document
from plm_plugins.chunkers.markdown_semantic import MarkdownSemanticChunker


def words(n: int, stem: str = "w") -> str:
    return " ".join(f"{stem}{i}" for i in range(n))


def chunk(text: str, **config: int | bool) -> list:
    return MarkdownSemanticChunker(**config).run([Document(id="d", text=text, title="T", path="p.md")])


def setext(text: str, **config: int) -> list:
    return chunk(text, setext_headings=True, **config)


README = f"APT\n===\n\n{words(60)}\n\nUsage\n-----\n\n{words(60, 'x')}\n"


def test_setext_levels_1_and_2_are_sections_like_their_atx_twins() -> None:
    chunks = setext(README)
    atx = chunk(f"# APT\n\n{words(60)}\n\n## Usage\n\n{words(60, 'x')}\n")
    assert [(c.text, c.heading_path) for c in chunks] == [(c.text, c.heading_path) for c in atx]
    assert [c.heading_path for c in chunks] == [("APT",), ("APT", "Usage")]
    assert chunks[0].text == f"# APT\n\n{words(60)}"
    assert chunks[1].text == f"## Usage\n\n{words(60, 'x')}"
    # Offsets are the source's: a section starts at its text line and runs to the next one.
    assert (chunks[0].start_char, chunks[0].end_char) == (0, README.index("Usage"))
    assert (chunks[1].start_char, chunks[1].end_char) == (README.index("Usage"), len(README))


def test_option_off_keeps_the_poc_behaviour() -> None:
    [only] = chunk(README)
    assert (only.text, only.heading_path, only.start_char, only.end_char) == (README, (), 0, len(README))
    assert MarkdownSemanticChunker().config.setext_headings is False


def test_underline_may_be_indented_up_to_3_spaces_and_have_trailing_spaces() -> None:
    text = f"Title  \n   ==  \t\n\n{words(60)}\n\nNext\n    ---\n\n{words(60, 'x')}\n"
    chunks = setext(text)
    # Four spaces before `---` is indented code, not an underline: one section.
    assert [c.heading_path for c in chunks] == [("Title",)]
    assert chunks[0].text.startswith(f"# Title\n\n{words(60)}\n\nNext\n    ---")


def test_dashes_after_a_blank_line_are_a_thematic_break() -> None:
    text = f"# A\n\n{words(60)}\n\n---\n\n{words(60, 'x')}\n"
    assert [c.text for c in setext(text)] == [c.text for c in chunk(text)]
    [only] = setext(text)
    assert only.heading_path == ("A",)


def test_front_matter_is_not_a_heading() -> None:
    text = f"---\ntitle: APT\nweight: 10\n---\n\n{words(60)}\n"
    [only] = setext(text)
    assert (only.text, only.heading_path) == (text, ())
    # After the front matter a setext heading counts; the front matter is in the intro.
    text = f"---\ntitle: APT\nweight: 10\n---\n{words(60, 'i')}\n\nAPT\n===\n\n{words(60)}\n"
    intro, section = setext(text)
    assert (intro.heading_path, section.heading_path) == ((), ("APT",))
    assert intro.text == f"---\ntitle: APT\nweight: 10\n---\n{words(60, 'i')}"


def test_lines_inside_code_fences_are_never_setext_headings() -> None:
    text = f"# A\n\n{words(60)}\n\n```yaml\nkind: Pod\n---\nkind: Service\n===\n```\n\n{words(60, 'x')}\n"
    [only] = setext(text)
    assert only.heading_path == ("A",)
    assert only.text == f"# A\n\n{text[4:].strip()}"
    # A `~~~` fence too, closed only by one at least as long; after it headings count again.
    text = f"~~~~\n~~~\nx\n---\n~~~~~\n\nAfter\n---\n\n{words(60)}\n"
    assert [c.heading_path for c in setext(text)] == [("After",)]
    # Backticks after the opening ones make inline code, not a fence (CommonMark).
    text = f"```ls``` lists\n---\n\n{words(60)}\n"
    assert [c.heading_path for c in setext(text)] == [("```ls``` lists",)]


def test_list_items_quotes_and_atx_lines_above_dashes_are_not_headings() -> None:
    for above in ("- item", "1. item", "> quoted", "## Title", "- item\nrun on", '<p align="center">', "{{< x >}}"):
        text = f"{words(60)}\n\n{above}\n---\n\n{words(60, 'x')}\n"
        assert [c.heading_path for c in setext(text)] == [c.heading_path for c in chunk(text)], above


def test_only_the_line_above_the_underline_is_the_heading() -> None:
    text = f"{words(60, 'i')}\n\nfirst line\nSecond line\n===========\n\n{words(60)}\n"
    intro, section = setext(text)
    assert section.heading_path == ("Second line",)
    assert intro.text == f"{words(60, 'i')}\n\nfirst line"
    assert section.text == f"# Second line\n\n{words(60)}"


def test_max_heading_level_applies_to_setext_headings() -> None:
    assert [c.heading_path for c in setext(README, max_heading_level=1)] == [("APT",)]
    assert [c.heading_path for c in setext(README, max_heading_level=2)] == [("APT",), ("APT", "Usage")]


def test_setext_and_atx_headings_nest_together() -> None:
    text = f"Guide\n=====\n\n{words(60)}\n\n## Install\n\n{words(60, 'x')}\n\nRun\n---\n\n{words(60, 'y')}\n"
    assert [c.heading_path for c in setext(text)] == [("Guide",), ("Guide", "Install"), ("Guide", "Run")]


def test_a_hash_heading_that_runs_onto_the_next_line_keeps_it() -> None:
    # The POC's `#\s+(.+)` reads `#` alone then `Title` as the heading "Title": that wins.
    text = f"#\nTitle\n-----\n\n{words(60)}\n"
    [only] = setext(text)
    assert (only.heading_path, only.start_char) == (("Title",), 0)
    assert only.text == f"# Title\n\n-----\n\n{words(60)}"


@pytest.mark.dataset
def test_poc_needle_has_no_setext_headings(poc_needle: Path) -> None:
    """configs/recommended.toml turns setext headings on; on poc_needle, where it is measured,
    that changes no title and no chunk: its 9 CommonMark setext headings (5 pages) are YAML
    `---` in code under a Hugo `{{< highlight yaml >}}` line, which the rules leave alone."""
    from plm_plugins.loaders.markdown_dir import MarkdownLoader

    docs = MarkdownLoader().run(str(poc_needle / "kubernetes"))
    assert MarkdownLoader(setext_title=True).run(str(poc_needle / "kubernetes")) == docs
    assert MarkdownSemanticChunker(setext_headings=True).run(docs) == MarkdownSemanticChunker().run(docs)
