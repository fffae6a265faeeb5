"""The document view's rendering: front matter out, raw HTML escaped, heading ids, and the
heading a chunk sits under (by where its section starts, so a repeated heading is told apart)."""

from __future__ import annotations

import pytest

pytest.importorskip("markdown_it")

from plm_core.records import Chunk, Document  # noqa: E402
from plm_serve.documents import render_document, slug, split_front_matter  # noqa: E402

TEXT = "---\nteam: a\n---\n# Guide\n\n## Notes\n\nfirst\n\n## Setup & Run\n\n<b>x</b>\n\n## Notes\n\nsecond\n"


def test_front_matter_is_split_off_only_when_closed() -> None:
    assert split_front_matter(TEXT)[:2] == ("team: a", TEXT.split("---\n", 2)[2])
    assert split_front_matter("---\nnever closed\n# A\n") == ("", "---\nnever closed\n# A\n", 0)
    assert split_front_matter("# A\n---\nb\n---\n")[0] == ""


def test_headings_get_unique_slugs_and_raw_html_is_escaped() -> None:
    assert slug("Setup & Run") == "setup-run" and slug("Ünïcode_Title 2") == "ünïcode-title-2"
    assert slug("!!") == "section"
    view = render_document(Document(id="d", text=TEXT))
    assert [h["id"] for h in view["headings"]] == ["guide", "notes", "setup-run", "notes-2"]
    assert "team: a" not in view["html"] and "&lt;b&gt;x&lt;/b&gt;" in view["html"] and "<b>" not in view["html"]
    assert '<h2 id="notes-2">Notes</h2>' in view["html"] and view["anchor"] is None


def test_a_chunk_is_anchored_at_the_heading_its_section_starts_under() -> None:
    doc = Document(id="d", text=TEXT)
    second = TEXT.rindex("## Notes")
    at = Chunk(id="c", doc_id="d", text="second", heading_path=("Guide", "Notes"), start_char=second, end_char=-1)
    assert render_document(doc, at)["anchor"] == "notes-2"  # not the first "Notes"
    by_path = Chunk(id="c", doc_id="d", text="x", heading_path=("Guide", "Setup & Run"))  # no offsets
    assert render_document(doc, by_path)["anchor"] == "setup-run"
    before = Chunk(id="c", doc_id="d", text="x", start_char=0, end_char=3)  # in the front matter: the top
    assert render_document(doc, before)["anchor"] is None
