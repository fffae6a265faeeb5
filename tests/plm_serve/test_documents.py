"""The document view's rendering: front matter out, raw HTML escaped, heading ids, and the
heading a chunk sits under (by where its section starts, so a repeated heading is told apart)."""

from __future__ import annotations

import re
from collections.abc import Sequence

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


# A folder as the markdown_dir loader stores it: ids are paths from /r/docs without `.md`.
STORED = {
    "README": "/r/docs/README.md",
    "SECURITY": "/r/docs/SECURITY.md",
    "proj-a/guide": "/r/docs/proj-a/guide.md",
    "proj-a/docs/index": "/r/docs/proj-a/docs/index.md",
    "proj-a/other": "/r/docs/proj-a/other.md",
    "proj-a/a&b c": "/r/docs/proj-a/a&b c.md",
    "outside": "/r/outside.md",  # from another folder, loaded from /r
}


def stored_paths(paths: Sequence[str]) -> dict[str, str]:
    return {doc_id: path for doc_id, path in STORED.items() if path in paths}


LINKS = """# Guide

[index](docs/index.md) [readme](../README.md) [security](../SECURITY.md)
[setup](other.md#Backup--Restore) [spaced](<a&b c.md>) [dot](./docs/../other.md)
[web](https://example.com/x.md) [mail](mailto:a@example.com) [here](#guide) [root](/README.md)
[missing](nowhere.md) [above](../../outside.md) [query](other.md?plain=1) [script](javascript:alert(1))
[png](diagram.png) ![image](other.md) [ref][r]

[r]: docs/index.md#Intro
"""


def linked(text: str, doc_id: str = "proj-a/guide", path: str = "/r/docs/proj-a/guide.md") -> dict[str, str]:
    """Each link's text -> its href, as rendered with STORED as the store's documents."""
    asked: list[Sequence[str]] = []

    def doc_paths(paths: Sequence[str]) -> dict[str, str]:
        asked.append(paths)
        return stored_paths(paths)

    html = render_document(Document(id=doc_id, text=text, path=path), stored=doc_paths)["html"]
    assert len(asked) <= 1  # one question to the store for all of a document's links
    return {text: href for href, text in re.findall(r'<a href="([^"]*)">([^<]*)</a>', html)}


def test_relative_links_to_stored_documents_open_their_pages() -> None:
    links = linked(LINKS)
    assert links["index"] == "/doc?id=proj-a/docs/index"  # nested, from the document's own folder
    assert links["readme"] == "/doc?id=README" and links["security"] == "/doc?id=SECURITY"  # `../`
    assert links["setup"] == "/doc?id=proj-a/other#backup-restore"  # GitHub's anchor, as this page names it
    assert links["spaced"] == "/doc?id=proj-a/a%26b%20c" and links["dot"] == "/doc?id=proj-a/other"
    assert links["ref"] == "/doc?id=proj-a/docs/index#intro"


def test_other_links_are_left_as_written() -> None:
    links = linked(LINKS)
    assert links["index"] == "/doc?id=proj-a/docs/index"  # in the same document, stored ones are rewritten
    assert links["web"] == "https://example.com/x.md" and links["mail"] == "mailto:a@example.com"
    assert links["here"] == "#guide" and links["root"] == "/README.md" and links["png"] == "diagram.png"
    assert links["missing"] == "nowhere.md"  # not a stored document: as written
    assert links["above"] == "../../outside.md"  # above the loaded folder, though stored
    assert links["query"] == "other.md?plain=1"
    html = render_document(Document(id="proj-a/guide", text=LINKS, path=STORED["proj-a/guide"]), stored=stored_paths)
    assert "[script](javascript:alert(1))" in html["html"] and 'href="javascript' not in html["html"]  # still text
    assert '<img src="other.md" alt="image">' in html["html"]  # an image is not a link


def test_links_are_resolved_only_where_the_documents_folder_is_known() -> None:
    text = "[index](docs/index.md) [other](other.md)"
    assert linked(text, "proj-a/guide", "/r/docs/proj-a/guide.md")["other"] == "/doc?id=proj-a/other"
    assert linked(text, "guide", "") == {"index": "docs/index.md", "other": "other.md"}  # a record: no file
    assert linked(text, "guide", "/r/records.jsonl")["other"] == "other.md"  # a JSON file's record
    assert render_document(Document(id="d", text=text))["html"].count('href="docs/index.md"') == 1  # no store given
