"""PDF (`.pdf`): the text layer, page by page, with pypdfium2 (PDFium; Apache-2.0/BSD).

Each page after the first starts after a form feed (`\\f`), so a chunk knows its page. The
PDF's outline (bookmarks), where it has one, gives the headings: each entry becomes a `#`
line at the start of the page it points to. A PDF's lines are joined into paragraphs: a
line ends one when it is short and ends a sentence. `title`, `author` and `date` come from
the document's information; a missing or generic title falls back to the first line.

A PDF with no text layer (a scan) fails, saying so: OCR is not built in. So does an
encrypted one, one with more than `max_pages` pages, and one with a page PDFium cannot load.
The document information is hostile text: a value that cannot be decoded is left out, control
characters (a NUL, a newline) become spaces, and a date that is no date is cut to what is one.
"""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Any

from pydantic import Field

from plm import ComponentConfig, Converted, Converter, PlmUserError, hookimpl
from plm_plugins.converters.text import library, library_version

if TYPE_CHECKING:
    from plm import Registry

_PDF_DATE = re.compile(r"D?:?(\d{4})(\d{2})?(\d{2})?")
_GENERIC_TITLE = re.compile(r"^(untitled|microsoft word - .*|document\d*|slide \d+|\s*)$", re.IGNORECASE)
_SENTENCE_END = (".", "!", "?", ":", '."', ".)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def pdf_date(value: str) -> str:
    """A PDF date (`D:20240501120000+02'00'`) as ISO (`2024-05-01`), or "": as much of it as
    is a date (`D:20241340` is `2024`, `D:20240231` `2024-02`, `D:00000000` "")."""
    m = _PDF_DATE.match(value.strip())
    if m is None or int(m.group(1)) == 0:
        return ""
    year, month, day = m.groups()
    if month is None or not 1 <= int(month) <= 12:
        return year
    try:
        return datetime.date(int(year), int(month), int(day)).isoformat() if day else f"{year}-{month}"
    except ValueError:
        return f"{year}-{month}"


def one_line(value: str) -> str:
    """A document information or outline value as one line: control characters (a NUL, a
    newline) are spaces, runs of spaces one."""
    return " ".join(_CONTROL.sub(" ", value).split())


def paragraphs(page: str) -> str:
    """A page's lines joined into paragraphs (blank lines between them)."""
    lines = [line.strip() for line in page.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    widths = sorted(len(line) for line in lines if line)
    if not widths:
        return ""
    typical = widths[len(widths) * 3 // 4]
    out: list[str] = []
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                out.append(" ".join(current))
                current = []
            continue
        current.append(line)
        if len(line) < typical * 0.7 and line.endswith(_SENTENCE_END):
            out.append(" ".join(current))
            current = []
    if current:
        out.append(" ".join(current))
    return "\n\n".join(out)


class PdfConverter(Converter):
    """PDF files with a text layer: text by page, the outline as headings, page numbers kept."""

    name = "pdf"
    extensions = (".pdf",)

    class Config(ComponentConfig):
        max_pages: int = Field(1000, ge=1, description="a PDF with more pages fails (one line), never read")
        password: str = Field("", description='the password of encrypted PDFs ("": they fail, saying so)')

    config: Config

    def version(self) -> str:
        return library_version("pypdfium2")

    def convert(self, data: bytes, path: str) -> Converted:
        pdfium = library("pypdfium2", "pdf", "pypdfium2")
        try:
            pdf = pdfium.PdfDocument(data, password=self.config.password or None)
        except pdfium.PdfiumError as err:
            reason = str(err)
            if "password" in reason.lower():
                fix = "set the right one" if self.config.password else "set the pdf converter's `password`"
                what = "the pdf converter's `password` does not open it" if self.config.password else ""
                raise PlmUserError(
                    f"encrypted ({what or 'it needs a password'}); {fix}, or save an unencrypted copy"
                ) from None
            raise PlmUserError(f"not a readable PDF ({reason}); it may be damaged") from None
        try:
            return self._read(pdf)
        finally:
            pdf.close()

    def _read(self, pdf: Any) -> Converted:
        n = len(pdf)
        if n > self.config.max_pages:
            raise PlmUserError(
                f"{n:,} pages, over the pdf converter's max_pages = {self.config.max_pages:,}; "
                "raise it to read this file"
            )
        headings: dict[int, list[str]] = {}
        try:
            for count, item in enumerate(pdf.get_toc(max_depth=6)):
                if count >= 10 * n:  # a hostile outline: far more entries than pages
                    break
                dest = item.get_dest()
                index, title = (dest.get_index() if dest is not None else None), _value(item.get_title)
                if index is None or not 0 <= index < n or not title:
                    continue
                headings.setdefault(index, []).append(f"{'#' * (item.level + 1)} {title[:1000]}")
        except Exception:  # a damaged outline costs the headings only
            headings = {}
        bodies: list[str] = []
        for i in range(n):
            try:
                page = pdf[i]
            except Exception as err:  # PdfiumError: a page tree that loops, a page that is no page
                raise PlmUserError(f"page {i + 1} of {n} cannot be read ({err}); the PDF may be damaged") from None
            textpage = page.get_textpage()
            try:
                bodies.append(paragraphs(textpage.get_text_bounded()))
            finally:
                textpage.close()
                page.close()
        if not any(bodies):
            raise PlmUserError(
                f"no text layer ({n} page{'s' if n != 1 else ''} of images: a scan?); OCR is not built in: "
                "run it first (e.g. ocrmypdf) or move the file out of the folder"
            )
        pages = ["\n\n".join([*headings.get(i, []), body]).strip() for i, body in enumerate(bodies)]
        text = "\n\n\f".join(pages)
        info = {key: _value(pdf.get_metadata_value, key) for key in ("Title", "Author", "CreationDate", "ModDate")}
        metadata: dict[str, Any] = {"pages": n}
        if info.get("Author"):
            metadata["author"] = info["Author"][:500]
        date = pdf_date(info.get("CreationDate", "") or info.get("ModDate", ""))
        if date:
            metadata["date"] = date
        title = info.get("Title", "").strip()
        if _GENERIC_TITLE.match(title):
            first = next((line for line in text.split("\n") if line.strip()), "")
            title = first.lstrip("#\f ").strip() if len(first) <= 200 else ""
        return Converted(text, title[:1000], metadata)


def _value(read: Any, *args: Any) -> str:
    """A string the PDF holds (`read(*args)`) as `one_line`, "" when it cannot be decoded (a
    title of invalid UTF-16 made the whole file fail)."""
    try:
        return one_line(str(read(*args)))
    except Exception:  # UnicodeDecodeError, PdfiumError
        return ""


@hookimpl
def plm_register_components(registry: Registry) -> None:
    registry.add(PdfConverter)
