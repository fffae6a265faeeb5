"""Real files of each format a folder may hold, written by the test that reads them: a PDF
(text layer, outline, information), a Word file (python-docx), a notebook, HTML, reST.

`write_pdf` writes PDF 1.4 by hand (the standard's own objects: catalog, pages, Helvetica,
one content stream a page, an outline, an xref table): PDFium and pypdf read it as any
PDF. `benchmarks` use it too, to make a PDF of each dataset document."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _string(text: str) -> bytes:
    """A PDF text string: `(literal)` in PDFDocEncoding's Latin part, else UTF-16BE in hex."""
    try:
        return b"(%s)" % _escape(text).encode("latin-1")
    except UnicodeEncodeError:
        return b"<FEFF%s>" % text.encode("utf-16-be").hex().upper().encode()


def _wrap(line: str, width: int = 90) -> list[str]:
    out, current = [], ""
    for word in line.split():
        if current and len(current) + 1 + len(word) > width:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return out + ([current] if current else [])


def pdf_bytes(
    pages: Sequence[Sequence[str]],
    title: str = "",
    author: str = "",
    date: str = "",
    outline: Sequence[tuple[str, int]] = (),
    text_layer: bool = True,
) -> bytes:
    """A PDF whose page i holds the paragraphs `pages[i]` (wrapped at 90 characters, a blank
    line between paragraphs); `outline`: (title, page index) bookmarks; `date`: YYYYMMDD.
    Without `text_layer` the pages hold only a drawn rectangle, as a scan holds an image."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in at the end
    page_tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    page_ids = []
    for paragraphs in pages:
        lines: list[str] = []
        for para in paragraphs:
            lines += _wrap(para) + [""]
        if text_layer:
            ops = ["BT /F1 10 Tf 12 TL 50 800 Td"] + [f"({_escape(line)}) '" for line in lines] + ["ET"]
        else:
            ops = ["0.5 g 50 300 400 400 re f"]
        stream = "\n".join(ops).encode("cp1252", "replace")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 %d 0 R >> >> "
                b"/Contents %d 0 R >>" % (page_tree, font, content)
            )
        )
    kids = b" ".join(b"%d 0 R" % p for p in page_ids)
    objects[page_tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_ids))
    outline_ref = b""
    if outline:
        root = add(b"")
        items = [add(b"") for _ in outline]
        for n, ((name, page), obj) in enumerate(zip(outline, items, strict=True)):
            links = b""
            if n > 0:
                links += b" /Prev %d 0 R" % items[n - 1]
            if n + 1 < len(items):
                links += b" /Next %d 0 R" % items[n + 1]
            objects[obj - 1] = b"<< /Title %s /Parent %d 0 R /Dest [%d 0 R /Fit]%s >>" % (
                _string(name),
                root,
                page_ids[page],
                links,
            )
        objects[root - 1] = b"<< /Type /Outlines /First %d 0 R /Last %d 0 R /Count %d >>" % (
            items[0],
            items[-1],
            len(items),
        )
        outline_ref = b" /Outlines %d 0 R" % root
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R%s >>" % (page_tree, outline_ref)
    info_fields = b""
    for key, value in (("Title", title), ("Author", author), ("CreationDate", f"D:{date}000000" if date else "")):
        if value:
            info_fields += b" /%s %s" % (key.encode(), _string(value))
    info = add(b"<<%s >>" % info_fields)
    return raw_pdf(objects, root=catalog, info=info)


def raw_pdf(objects: Sequence[bytes], root: int = 1, info: int | None = None) -> bytes:
    """A PDF of these objects (object n is `objects[n - 1]`), with a correct xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    trailer = b"/Size %d /Root %d 0 R" % (len(objects) + 1, root) + (b" /Info %d 0 R" % info if info else b"")
    out.write(b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref))
    return out.getvalue()


def write_pdf(path: Path, pages: Sequence[Sequence[str]], **kwargs: object) -> Path:
    path.write_bytes(pdf_bytes(pages, **kwargs))  # type: ignore[arg-type]
    return path


def write_docx(path: Path, blocks: Sequence[tuple[str, str]], author: str = "") -> Path:
    """A Word file of (style, text) blocks: style "Title", "Heading 1".."Heading 6", "List Bullet", "" (body)."""
    import docx

    document = docx.Document()
    if author:
        document.core_properties.author = author
    for style, text in blocks:
        document.add_paragraph(text, style=style or None)
    document.save(str(path))
    return path


def write_notebook(path: Path, cells: Sequence[tuple[str, str]], language: str = "python") -> Path:
    """A notebook of (cell type, source) cells; each code cell has an output that must not be read."""
    nb_cells = []
    for kind, source in cells:
        cell: dict[str, object] = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
        if kind == "code":
            cell |= {
                "execution_count": 1,
                "outputs": [{"output_type": "stream", "name": "stdout", "text": ["OUTPUT-NOT-INDEXED\n"]}],
            }
        nb_cells.append(cell)
    nb = {
        "cells": nb_cells,
        "metadata": {"language_info": {"name": language}, "kernelspec": {"language": language, "name": "k"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path
