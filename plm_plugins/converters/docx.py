"""Word (`.docx`): paragraphs and tables in reading order, with python-docx (MIT).

Paragraphs styled `Title` or `Heading 1`-`Heading 6` (by style id) become `#` headings, list paragraphs
`- ` items, a table one line per row with its cells between ` | `. `title`, `author` and
`date` come from the file's core properties. A `.docx` is a zip: before anything is parsed,
its entries must hold at most `max_unzipped_mb` together (a zip bomb is one line, never a
full disk or memory), and a file that is not a zip (a damaged file, an old `.doc`, a Word file
saved with a password: both OLE files) is one line too, saying which.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ComponentConfig, Converted, Converter, PlmUserError, hookimpl
from plm_plugins.converters.text import library, library_version

if TYPE_CHECKING:
    from plm import Registry

_HEADING = re.compile(r"^(?:heading\s*([1-6])|title)$", re.IGNORECASE)  # a style id: `Heading1`, `Title`
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file: an old .doc, or an encrypted .docx


class DocxConverter(Converter):
    """Word files: headings, paragraphs, lists and tables; core properties as metadata."""

    name = "docx"
    extensions = (".docx",)

    class Config(ComponentConfig):
        max_unzipped_mb: float = Field(200, gt=0, description="a .docx whose parts unzip to more fails, unread")

    config: Config

    def version(self) -> str:
        return library_version("python-docx")

    def convert(self, data: bytes, path: str) -> Converted:
        docx = library("docx", "docx", "python-docx")
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                unzipped = sum(info.file_size for info in zf.infolist())
        except zipfile.BadZipFile:
            if data.startswith(_OLE) and "EncryptedPackage".encode("utf-16-le") in data:
                raise PlmUserError("encrypted (saved with a password); save a copy without one") from None
            if data.startswith(_OLE):
                raise PlmUserError("an old Word .doc file (OLE), not a .docx; re-save it as .docx") from None
            raise PlmUserError(
                "not a Word .docx file (not a zip: damaged, or an old .doc); re-save it as .docx"
            ) from None
        if unzipped > self.config.max_unzipped_mb * 1024 * 1024:
            raise PlmUserError(
                f"unzips to {unzipped / 2**20:,.0f} MB, over the docx converter's max_unzipped_mb = "
                f"{self.config.max_unzipped_mb:g} (a zip bomb?); raise it to read this file"
            )
        try:
            document = docx.Document(io.BytesIO(data))
        except Exception as err:  # python-docx raises KeyError, ValueError, lxml errors...
            if "is not a Word file, content type is" in str(err):  # an Excel or PowerPoint file renamed
                kind = str(err).rsplit("content type is", 1)[1].strip(" '")
                raise PlmUserError(f"not a Word document: its content type is {kind}") from None
            raise PlmUserError(f"not a readable Word file ({type(err).__name__}: {err}); it may be damaged") from None
        from docx.table import Table
        from docx.text.paragraph import Paragraph

        blocks: list[str] = []
        for child in document.element.body.iterchildren():
            if child.tag == f"{_W}p":
                blocks.append(_paragraph(Paragraph(child, document)))
            elif child.tag == f"{_W}tbl":
                blocks.append(_table(Table(child, document)))
        text = "\n\n".join(b for b in blocks if b)
        props = document.core_properties
        metadata: dict[str, Any] = {}
        if props.author:
            metadata["author"] = props.author[:500]
        when = props.created or props.modified
        if when is not None:
            metadata["date"] = when.date().isoformat()
        title = (props.title or "").strip() or next((b.lstrip("# ") for b in blocks if b.startswith("# ")), "")
        return Converted(text, title[:1000], metadata)


def _paragraph(paragraph: Any) -> str:
    text = " ".join(paragraph.text.split())
    if not text:
        return ""
    # The style's id as the paragraph names it (`Heading1`, `Title`, `ListBullet`: built-in
    # styles keep English ids in every language), not its looked-up name: looking a style up
    # parses the styles part, a third of the time of a small file.
    style = paragraph._p.style or ""
    heading = _HEADING.match(style)
    if heading:
        return f"{'#' * int(heading.group(1) or 1)} {text}"
    if style and style.lower().startswith("list"):
        return f"- {text}"
    return text


def _table(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            value = " ".join(cell.text.split())
            if not cells or value != cells[-1]:  # a merged cell is listed once per column it spans
                cells.append(value)
        if any(cells):
            rows.append(" | ".join(cells).rstrip(" |"))
    return "\n".join(rows)


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(DocxConverter)
