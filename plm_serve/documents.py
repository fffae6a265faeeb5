"""A stored document as `plm serve`'s document view shows it: the whole text rendered from
Markdown to HTML (raw HTML in the source is escaped, never passed through), its YAML front
matter taken out and shown as metadata, every heading given an id (a slug of its text), and
the id of the heading a chunk sits under, so a hit can open its document at that place.
"""

from __future__ import annotations

import re
from typing import Any

from plm_core.records import Chunk, Document

_NOT_WORD = re.compile(r"[^\w]+")


def split_front_matter(text: str) -> tuple[str, str, int]:
    """(front matter, body, lines before the body): a leading `---` line up to the next
    `---` line, as the markdown_dir loader reads it; ("", text, 0) when there is none."""
    lines = text.split("\n")
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return "", text, 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:  # never closed: the loader read no metadata from it either, so it is text
        return "", text, 0
    return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :]), end + 1


def slug(text: str) -> str:
    """`## Backup & restore` -> `backup-restore`: lower case, letters and digits kept (any
    script), every other run one `-`."""
    return _NOT_WORD.sub("-", text.lower()).replace("_", "-").strip("-") or "section"


def _plain(inline: Any) -> str:
    """A heading's text without its Markdown (`A *b* \\`c\\`` -> `A b c`)."""
    return "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))


def render_document(document: Document, chunk: Chunk | None = None) -> dict[str, Any]:
    """The document as the `GET /documents/{id}` response: `html`, `headings` (id, level,
    text, line), `front_matter`, and `anchor`: the id of the heading `chunk` starts under
    (None without one, or when the chunk starts before the first heading)."""
    from markdown_it import MarkdownIt

    front_matter, body, skipped = split_front_matter(document.text)
    md = MarkdownIt("js-default")  # html=False: `<script>` in a document is shown, not run
    tokens = md.parse(body)
    headings: list[dict[str, Any]] = []
    taken: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = _plain(tokens[i + 1])
        base = slug(text)
        anchor, n = base, 1
        while anchor in taken:  # a second `## Notes` is `notes-2`, as GitHub numbers them
            n += 1
            anchor = f"{base}-{n}"
        taken.add(anchor)
        token.attrSet("id", anchor)
        line = token.map[0] + skipped if token.map else -1
        headings.append({"id": anchor, "level": int(token.tag[1:]), "text": text, "line": line})
    html = md.renderer.render(tokens, md.options, {})
    return {
        "id": document.id,
        "title": document.title,
        "path": document.path,
        "metadata": dict(document.metadata),
        "front_matter": front_matter,
        "text": document.text,
        "html": html,
        "headings": headings,
        "anchor": chunk_anchor(document.text, headings, chunk) if chunk is not None else None,
    }


def chunk_anchor(text: str, headings: list[dict[str, Any]], chunk: Chunk) -> str | None:
    """The heading a chunk sits under: the last one at or before the line its section starts
    on (`start_char`), else the first whose text is the last of its heading path."""
    if chunk.start_char is not None and 0 <= chunk.start_char <= len(text):
        line = text.count("\n", 0, chunk.start_char)
        before = [h for h in headings if 0 <= h["line"] <= line]
        if before:
            return str(before[-1]["id"])
    if chunk.heading_path:
        wanted = chunk.heading_path[-1].strip()
        for heading in headings:
            if heading["text"].strip() == wanted:
                return str(heading["id"])
    return None
