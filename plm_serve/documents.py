"""A stored document as `plm serve`'s document view shows it: the whole text rendered from
Markdown to HTML (raw HTML in the source is escaped, never passed through), its YAML front
matter taken out and shown as metadata, every heading given an id (a slug of its text), and
the id of the heading a chunk sits under, so a hit can open its document at that place.

A relative link to another stored document (`[index](docs/index.md)`, `../README.md#setup`)
is rewritten to that document's page, `/doc?id=...#setup`: resolved against the document's
own file, as a Markdown viewer would, and kept only when that file is a stored document of
the same loaded folder. Every other link is left as written; see `linked_file`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from plm_core.records import Chunk, Document
from plm_index.documents import front_matter_lines

_NOT_WORD = re.compile(r"[^\w]+")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # `https:`, `mailto:`, `C:` alike: not relative
# Stored document id -> the path it was loaded from, of the paths asked for: the store's `doc_paths`.
PathLookup = Callable[[Sequence[str]], Mapping[str, str]]


def split_front_matter(text: str) -> tuple[str, str, int]:
    """(front matter, body, lines before the body), by the markdown_dir loader's rule
    (`front_matter_lines`); ("", text, 0) when there is none, or it is never closed (the
    loader read no metadata from it either, so it is text)."""
    lines = text.split("\n")
    skip = front_matter_lines(lines)
    if not skip:
        return "", text, 0
    return "\n".join(lines[1 : skip - 1]), "\n".join(lines[skip:]), skip


def slug(text: str) -> str:
    """`## Backup & restore` -> `backup-restore`: lower case, letters and digits kept (any
    script), every other run one `-`."""
    return _NOT_WORD.sub("-", text.lower()).replace("_", "-").strip("-") or "section"


def _plain(inline: Any) -> str:
    """A heading's text without its Markdown (`A *b* \\`c\\`` -> `A b c`)."""
    return "".join(child.content for child in inline.children or () if child.type in ("text", "code_inline"))


def loaded_folder(document: Document) -> str | None:
    """The folder the document was loaded from, as the file loaders name ids (the path from
    that folder, a Markdown file's without its extension): `/r/docs/` for id `proj-a/guide`
    at `/r/docs/proj-a/guide.md` or id `papers/a.pdf` at `/r/docs/papers/a.pdf`, "" when
    the path is the id itself (a record's relative path);
    None when the path does not end in the id (no path, a JSON file's records)."""
    if not document.path:
        return None
    if document.path.endswith("/" + document.id):  # an id that keeps its extension (`papers/a.pdf`)
        return document.path[: len(document.path) - len(document.id)]
    base = posixpath.splitext(document.path)[0]
    if base == document.id:
        return ""
    return base[: len(base) - len(document.id)] if base.endswith("/" + document.id) else None


def linked_file(document: Document, href: str) -> tuple[str, str] | None:
    """(the file a link names, its `#fragment` without the `#`), when the link is relative
    and stays inside the folder the document was loaded from; None for everything else: an
    absolute URL (`https:`, `mailto:`, `//host`), a path from the site's root (`/x.md`), a
    link to a place in this page (`#a`), one with a query (`x.md?plain=1`), one that climbs
    above the loaded folder, and any link of a document whose folder is not known."""
    if not href or href.startswith(("#", "/", "\\")) or _SCHEME.match(href) or "?" in href:
        return None
    root = loaded_folder(document)
    if root is None:
        return None
    path, _, fragment = href.partition("#")
    # markdown-it has percent-encoded the URL (`my%20file.md`); a stored path is plain text.
    target = posixpath.normpath(posixpath.join(posixpath.dirname(document.path), unquote(path)))
    inside = target[len(root) :] if target.startswith(root) else ""
    if not inside or inside == ".." or inside.startswith(("../", "/")):
        return None
    return target, unquote(fragment)


def link_documents(document: Document, tokens: Sequence[Any], stored: PathLookup) -> None:
    """Point each relative link to a stored document's file at that document's page
    (`/doc?id=ID`, its fragment made a heading id as this page names them, so GitHub's
    `#backup--restore` opens `#backup-restore`), asking `stored` once for all of them.
    A link to a file that is not a stored document is left as written."""
    links: list[tuple[Any, str, str]] = []
    for token in tokens:
        for child in token.children or ():
            if child.type == "link_open" and (found := linked_file(document, str(child.attrGet("href") or ""))):
                links.append((child, *found))
    if not links:
        return
    ids = {path: doc_id for doc_id, path in stored(sorted({path for _, path, _ in links})).items()}
    for token, path, fragment in links:
        if path in ids:
            anchor = f"#{quote(slug(fragment), safe='')}" if fragment else ""
            token.attrSet("href", f"/doc?id={quote(ids[path], safe='/')}{anchor}")


def render_document(document: Document, chunk: Chunk | None = None, stored: PathLookup | None = None) -> dict[str, Any]:
    """The document as the `GET /documents/{id}` response: `html`, `headings` (id, level,
    text, line), `front_matter`, and `anchor`: the id of the heading `chunk` starts under
    (None without one, or when the chunk starts before the first heading). With `stored`
    (the store's `doc_paths`), relative links to stored documents open their pages."""
    from markdown_it import MarkdownIt

    front_matter, body, skipped = split_front_matter(document.text)
    md = MarkdownIt("js-default")  # html=False: `<script>` in a document is shown, not run
    # A paged document (a PDF) has a form feed before each page after the first: each page is
    # rendered on its own, after a marker the hit's page opens at (`#page-2`).
    pages = body.split("\f")
    parsed, lines = [], skipped
    for text in pages:
        parsed.append((md.parse(text), lines))
        lines += text.count("\n")
    headings: list[dict[str, Any]] = []
    taken: set[str] = set()
    numbered: dict[str, int] = {}  # slug -> the last number its duplicates reached
    for number, (tokens, first_line) in enumerate(parsed, 1):
        for i, token in enumerate(tokens):
            if token.type != "heading_open":
                continue
            text = _plain(tokens[i + 1])
            base = slug(text)
            # a second `## Notes` is `notes-2`, as GitHub numbers them; counted on from the last
            # number given (20,000 `# h` lines took a minute, each trying every number before it)
            n = numbered.get(base, 1)
            anchor = base if n == 1 else f"{base}-{n}"
            while anchor in taken:
                n += 1
                anchor = f"{base}-{n}"
            numbered[base] = n
            taken.add(anchor)
            token.attrSet("id", anchor)
            line = token.map[0] + first_line if token.map else -1
            headings.append({"id": anchor, "level": int(token.tag[1:]), "text": text, "line": line, "page": number})
        if stored is not None:
            link_documents(document, tokens, stored)
    paged = len(pages) > 1
    html = "".join(
        (f'<p class="page" id="page-{n}">page {n}</p>\n' if paged else "") + md.renderer.render(tokens, md.options, {})
        for n, (tokens, _) in enumerate(parsed, 1)
    )
    page = chunk.metadata.get("page") if chunk is not None and paged else None
    target = chunk_anchor(document.text, headings, chunk) if chunk is not None else None
    if isinstance(page, int) and not any(h["id"] == target and h["page"] == page for h in headings):
        target = f"page-{page}"  # the chunk's page, where its heading is on an earlier one
    return {
        "id": document.id,
        "title": document.title,
        "path": document.path,
        "metadata": dict(document.metadata),
        "front_matter": front_matter,
        "text": document.text,
        "html": html,
        "headings": headings,
        "anchor": target,
        "pages": len(pages) if paged else None,
        "page": page if isinstance(page, int) else None,
    }


def original_file(document: Document, roots: Sequence[str]) -> str | None:
    """The file a document was read from, when it is a regular file whose real path (every
    symlink resolved now) lies inside one of `roots`, the folders' real paths as they were
    when indexed (not resolved again: a folder replaced by a link to another one afterwards
    leads nowhere); else None. Only such a file is ever served: a document posted over HTTP
    names no file, and a path of the store never leads outside the folders a user chose."""
    if not document.path or not os.path.isabs(document.path):
        return None
    real = os.path.realpath(document.path)
    if os.path.isfile(real) and any(real.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return real
    return None


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
