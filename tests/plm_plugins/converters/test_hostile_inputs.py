"""Each built-in converter against hostile files (issue 45, reliability round four): zip bombs
and zips that lie, encrypted, damaged and 2,000-page PDFs, HTML built to make a parser crawl,
every encoding lie, notebooks and reST that reach for other files or expand without end.

The rule: a one-line `PlmUserError` or the right result (text a store can hold, without what
is not content), within a few seconds, never another exception (the folder loader would show
it as "the X converter failed (KeyError: ...)", which reads as a bug). A probe that found a
defect says so after its id; the defect is fixed in the converter named."""

from __future__ import annotations

import functools
import io
import json
import re
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from documents import pdf_bytes
from hostile import (
    HELVETICA,
    assert_one_line,
    assert_storable,
    lying_sizes,
    one_page_pdf,
    outlined_pdf,
    overlapping_zip,
    raw_pdf,
    stream,
    within,
)

from plm import Converted, Converter, PlmUserError
from plm_plugins.converters.docx import DocxConverter
from plm_plugins.converters.html import HtmlConverter
from plm_plugins.converters.markdown import MarkdownConverter
from plm_plugins.converters.notebook import NotebookConverter
from plm_plugins.converters.pdf import PdfConverter
from plm_plugins.converters.rst import RstConverter
from plm_plugins.converters.text import TextConverter

SECONDS = 5.0  # "no hang over a few seconds"; each probe here takes well under one on 2 cores
Check = Callable[[Converted], object]


def ok(*checks: Check) -> tuple[str, tuple[Check, ...]]:
    return ("ok", checks)


def fails(pattern: str) -> tuple[str, str]:
    return ("fails", pattern)


def has(*words: str) -> Check:
    def check(out: Converted) -> None:
        for word in words:
            assert word in out.text, (word, out.text[:300])

    return check


def lacks(*words: str) -> Check:
    def check(out: Converted) -> None:
        for word in words:
            assert word not in out.text, (word, out.text[:300])

    return check


def titled(title: str) -> Check:
    def check(out: Converted) -> None:
        assert out.title == title, out.title[:200]

    return check


def probe(
    converter: Converter, data: bytes | Callable[[], bytes], expected: tuple[str, object], seconds: float = SECONDS
) -> None:
    """Convert `data` (or what it makes: large inputs are made when their test runs) within
    `seconds`, and hold the answer to the rule and to `expected`."""
    data = data() if callable(data) else data
    try:
        with within(seconds):
            out = converter.convert(data, "hostile")
    except PlmUserError as err:
        assert expected[0] == "fails", f"failed where a result was expected: {err}"
        assert_one_line(str(err))
        assert re.search(str(expected[1]), str(err)), str(err)
        return
    assert expected[0] == "ok", f"read where a failure matching {expected[1]!r} was expected: {out.text[:200]!r}"
    assert isinstance(out, Converted)
    assert_storable(out.text)
    assert_storable(out.title, "title")
    assert "\n" not in out.title and len(out.title) <= 1000, out.title[:200]
    json.dumps(dict(out.metadata))
    for value in out.metadata.values():
        if isinstance(value, str):
            assert_storable(value, "metadata")
    for check in expected[1]:  # type: ignore[attr-defined]
        assert check(out) in (None, True), f"{check} does not hold: {out.text[:200]!r}"


# --------------------------------------------------------------------------- HTML
def page(body: str) -> bytes:
    return f"<html><body>{body}</body></html>".encode()


HTML = [
    # Found: a page whose <head> is never closed was read as empty: all of it skipped as head.
    pytest.param(
        b"<html><head><title>T</title><body><p>Hello world</p></body></html>",
        ok(has("Hello world"), titled("T")),
        id="unclosed-head-then-body",
    ),
    pytest.param(b"<head><title>T</title><p>Hello world", ok(has("Hello world")), id="unclosed-head-no-body"),
    # Found: <script/> (no content model in HTML: it opens a script) put the script in the text.
    pytest.param(
        page("<p>before</p><script/>alert('xss-self-closed')</script><p>after</p>"),
        ok(has("before", "after"), lacks("xss-self-closed")),
        id="self-closing-script",
    ),
    pytest.param(
        page(
            "<p>a</p><SCRIPT>upper1</SCRIPT><style>.up2{}</style><svg><script>svg3</script></svg>"
            "<script>x4</script\n><noscript>ns5</noscript><template>t6</template><iframe>if7</iframe><p>b</p>"
        ),
        ok(has("a", "b"), lacks("upper1", "up2", "svg3", "x4", "ns5", "t6", "if7")),
        id="script-style-payloads",
    ),
    pytest.param(
        page("<p>kept</p><script>var s = '<p>hidden</p>';"), ok(has("kept"), lacks("hidden")), id="script-never-closed"
    ),
    pytest.param(
        page("<p>a</p><!-- <p>c1</p> --><![CDATA[c2]]><![if !IE]><p>b</p><![endif]>"),
        ok(has("a", "b"), lacks("c1", "c2", "[if", "CDATA")),
        id="comments-and-cdata",
    ),
    # Found: `<![` not followed by a marked-section keyword raised AssertionError in html.parser.
    pytest.param(
        page("<![ foo [x]]><p>after the bad section</p>"), ok(has("after the bad section")), id="bad-marked-section"
    ),
    # Found: a NUL reached the text, and a store refuses the whole page for it (browsers drop it).
    pytest.param(page("<p>nul\x00byte</p>"), ok(has("nulbyte")), id="nul-bytes"),
    pytest.param(page("<p>refs&#0;&#xD800;&#x110000;&#99999999999;</p>"), ok(has("refs\ufffd")), id="bad-char-refs"),
    # Found: UTF-16 with its BOM (as Windows saves "Unicode") became text of NULs and mojibake.
    pytest.param(b"\xff\xfe" + "<p>Hello sixteen</p>".encode("utf-16-le"), ok(has("Hello sixteen")), id="utf16le-bom"),
    pytest.param(b"\xfe\xff" + "<p>Hello sixteen</p>".encode("utf-16-be"), ok(has("Hello sixteen")), id="utf16be-bom"),
    # Found: <meta charset=utf-16> on single-byte text was honoured (CJK mojibake); browsers ignore it.
    pytest.param(b"<meta charset='utf-16'><p>caf\xe9 cr\xe8me</p>", ok(has("café crème")), id="charset-lie-utf16"),
    # Found: charset=unicode_escape turned `\u0000` written in the page into a NUL.
    pytest.param(
        b"<meta charset='unicode_escape'><p>caf\xe9 \\u0000</p>",
        ok(has("café \\u0000")),
        id="charset-lie-unicode-escape",
    ),
    pytest.param(b"<meta charset='idna'><p>caf\xe9</p>", ok(has("café")), id="charset-lie-idna"),
    pytest.param(b"<meta charset='rot13'><p>caf\xe9</p>", ok(has("café")), id="charset-lie-not-a-text-codec"),
    pytest.param(b"<meta charset='x-no-such-thing'><p>caf\xe9</p>", ok(has("café")), id="charset-lie-unknown"),
    pytest.param(b"<meta charset='utf-8'><p>caf\xe9</p>", ok(has("café")), id="charset-lie-utf8"),
    pytest.param(lambda: b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000, ok(has("deep")), id="100k-nested-divs"),
    pytest.param(
        lambda: b"<p>" + b"word " * 2_000_000 + b"</p>", ok(lambda out: len(out.text) > 9_000_000), id="10mb-one-line"
    ),
    # Found (each a hang): html.parser makes text of a `<` it cannot close one character at a
    # time, searching the rest of the page again for each: 10 MB of `<` took 27 s, 60 KB of
    # `<a ` or of `<!--` minutes.
    pytest.param(
        lambda: b"<p>x</p>" + b"<" * 10_000_000, ok(lambda out: out.text.count("<") == 10_000_000), id="10mb-of-lt"
    ),
    pytest.param(lambda: b"<p>x</p>" + b"<!--" * 250_000, ok(has("x")), id="comments-never-closed"),
    pytest.param(lambda: b"<p>x</p>" + b"<a " * 300_000, ok(has("x")), id="tags-never-closed"),
    pytest.param(lambda: b"<p>x</p>" + b"<!-- >" * 100_000, ok(has("x")), id="comment-openers-before-gt"),
    pytest.param(
        lambda: b"<p>x</p>" + b'stylescript/</?"?=">"\'<' * 20_000 + b"'", ok(has("x")), id="quotes-never-closed"
    ),
    pytest.param(lambda: b"<p>x</p>" + b"<![CDATA[" * 100_000, ok(has("x")), id="cdata-never-closed"),
    # Found: a <title> left open gathered the page into a string grown by copying: quadratic.
    pytest.param(
        lambda: b"<title>" + b"word <b>x</b> " * 50_000,
        ok(lambda out: len(out.title) <= 1000),
        id="title-never-closed",
    ),
    pytest.param(
        lambda: b"<p>" + b"&amp;" * 1_000_000 + b"</p>",
        ok(lambda out: out.text.count("&") == 1_000_000),
        id="1m-entities",
    ),
    pytest.param(
        b"<head><base href='http://evil/'><meta http-equiv='refresh' content='0;url=http://evil'></head><p>ok</p>",
        ok(has("ok"), lacks("evil")),
        id="base-and-refresh",
    ),
    pytest.param(
        b"</p></div></pre></main></script></head><p <p <p>ok</p><div =>=</div>", ok(has("ok")), id="malformed-tags"
    ),
    pytest.param(b"<nav>menu</nav><footer>foot</footer>", ok(lambda out: out.text == ""), id="only-the-frame"),
]


@pytest.mark.parametrize(("data", "expected"), HTML)
def test_hostile_html(data: bytes, expected: tuple[str, object]) -> None:
    probe(HtmlConverter(), data, expected)


def test_html_form_around_the_whole_page_is_content() -> None:
    """Found: `<form>` was skipped with all it holds, so an ASP.NET page (one form around the
    whole body) was read as empty, then failed as "empty". Debatable, since a form's labels are
    seldom content; a demanding user would rather have a login form's labels indexed than lose
    every WebForms page of an intranet. Its controls (select, button) stay out."""
    data = page(
        "<form id='form1'><h1>Opening hours</h1><p>We open at nine.</p><select><option>opt</option></select>"
        "<button>Send</button></form>"
    )
    probe(HtmlConverter(), data, ok(has("# Opening hours", "We open at nine."), lacks("opt", "Send")))


def test_html_comment_never_closed_is_text_after_it() -> None:
    """A `<!--` that nothing closes hides the rest of the page in a browser; here the page goes
    on after it. Debatable: what follows may be commented-out text, but a stray `<!--` in a
    code sample would otherwise cost the whole rest of a page, and losing text is worse than
    indexing some. (The point of the probe: no hang, and the text after it is read.)"""
    probe(HtmlConverter(), page("<p>before</p><!-- <p>after it</p>"), ok(has("before", "after it")))


# --------------------------------------------------------------------------- PDF
def encrypted(user: str, owner: str, algorithm: str = "AES-256") -> bytes:
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_bytes([["Secret plans for the ocelot."]])))
    writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


PAGE_3 = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>"
)


def page_tree_cycle() -> bytes:
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",  # the tree lists itself as a page
            PAGE_3,
            stream(b"BT /F1 12 Tf 50 700 Td (Cycle page) Tj ET"),
            HELVETICA,
        ]
    )


def lying_page_count() -> bytes:
    return raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 2000000 >>",
            PAGE_3,
            stream(b"BT /F1 12 Tf 50 700 Td (Lying count) Tj ET"),
            HELVETICA,
        ]
    )


def outline_siblings(n: int) -> bytes:
    items = [b"<< /Type /Outlines /First 7 0 R /Last %d 0 R /Count %d >>" % (6 + n, n)]
    for k in range(n):
        after = b" /Next %d 0 R" % (8 + k) if k < n - 1 else b""
        items.append(b"<< /Title (H%d) /Parent 6 0 R /Dest [4 0 R /Fit]%s >>" % (k, after))
    return outlined_pdf(items)


def outline_depth(n: int) -> bytes:
    items = [b"<< /Type /Outlines /First 7 0 R /Last 7 0 R /Count 1 >>"]
    for k in range(n):
        child = b" /First %d 0 R /Last %d 0 R /Count 1" % (8 + k, 8 + k) if k < n - 1 else b""
        items.append(b"<< /Title (D%d) /Parent %d 0 R /Dest [4 0 R /Fit]%s >>" % (k, 6 + k, child))
    return outlined_pdf(items)


TO_UNICODE = stream(
    b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X def\n"
    b"1 begincodespacerange <00> <FF> endcodespacerange\n"
    b"3 beginbfchar <41> <0000> <42> <D800> <43> <0041> endbfchar endcmap CMapName currentdict /CMap defineresource pop end end"  # noqa: E501
)


def headings_of(out: Converted) -> list[str]:
    return [line for line in out.text.split("\n") if line.startswith("#")]


PDF = [
    pytest.param(PdfConverter, b"", fails(r"^not a readable PDF \("), id="empty-file"),
    pytest.param(
        PdfConverter, b"<html><body>not a pdf</body></html>", fails(r"^not a readable PDF"), id="html-named-pdf"
    ),
    pytest.param(PdfConverter, b"\x00\xff" * 50_000, fails(r"^not a readable PDF"), id="garbage"),
    pytest.param(PdfConverter, one_page_pdf()[:300], fails(r"^not a readable PDF"), id="truncated-before-xref"),
    pytest.param(
        PdfConverter,
        raw_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]),
        fails(r"^not a readable PDF"),
        id="zero-pages",
    ),
    pytest.param(
        PdfConverter,
        lying_page_count(),
        ok(has("Lying count"), lambda out: out.metadata["pages"] == 1),
        id="page-count-lies",
    ),
    # Found: a page PDFium cannot load raised PdfiumError ("the pdf converter failed (PdfiumError: ...)").
    pytest.param(
        PdfConverter,
        page_tree_cycle(),
        fails(r"^page 2 of 2 cannot be read \(.*\); the PDF may be damaged$"),
        id="page-tree-cycle",
    ),
    pytest.param(
        PdfConverter, one_page_pdf(media_box=b"0 0 14400000 14400000"), ok(has("hostile page")), id="huge-page"
    ),
    pytest.param(
        PdfConverter, one_page_pdf(media_box=b"0 0 -1e30 nan"), ok(has("hostile page")), id="nonsense-page-box"
    ),
    # Found: a title of invalid UTF-16 raised UnicodeDecodeError: the whole file lost for its title.
    pytest.param(
        PdfConverter,
        one_page_pdf(info=b"<< /Title <FEFFD800> /Author <FEFFDC00DC00> >>"),
        ok(has("hostile page"), titled("Hello from a hostile page.")),
        id="info-not-utf16",
    ),
    # Found: a NUL in the title made a store refuse the document; a newline broke the title line.
    pytest.param(
        PdfConverter,
        one_page_pdf(info=b"<< /Title (Caf\xe9 \x00 nul\x07\nline two\r# x) /Author (A\x00B) >>"),
        ok(titled("Café nul line two # x"), lambda out: out.metadata["author"] == "A B"),
        id="info-control-chars",
    ),
    # Found: D:20241340 became the "date" 2024-13-40, D:99999999 9999-99-99.
    pytest.param(
        PdfConverter,
        one_page_pdf(info=b"<< /CreationDate (D:20241340) >>"),
        ok(lambda out: out.metadata["date"] == "2024"),
        id="impossible-date",
    ),
    pytest.param(
        PdfConverter,
        one_page_pdf(info=b"<< /CreationDate (D:20240231) /ModDate (garbage) >>"),
        ok(lambda out: out.metadata["date"] == "2024-02"),
        id="no-such-day",
    ),
    pytest.param(
        PdfConverter,
        lambda: one_page_pdf(info=b"<< /CreationDate (garbage) /Title (" + b"T" * 1_000_000 + b") >>"),
        ok(lambda out: "date" not in out.metadata and out.title == "T" * 1000),
        id="megabyte-title",
    ),
    pytest.param(PdfConverter, one_page_pdf(info=b"42"), ok(has("hostile page")), id="info-not-a-dictionary"),
    pytest.param(
        PdfConverter,
        outlined_pdf(
            [
                b"<< /Type /Outlines /First 7 0 R /Last 8 0 R /Count 2 >>",
                b"<< /Title (A) /Parent 6 0 R /Dest [4 0 R /Fit] /Next 8 0 R >>",
                b"<< /Title (B) /Parent 6 0 R /Dest [4 0 R /Fit] /Next 7 0 R >>",
            ]
        ),
        ok(lambda out: headings_of(out) == ["# A", "# B"]),
        id="outline-cycle",
    ),
    pytest.param(
        PdfConverter,
        outlined_pdf(
            [
                b"<< /Type /Outlines /First 7 0 R /Last 7 0 R /Count 1 >>",
                b"<< /Title (Parent) /Parent 6 0 R /Dest [4 0 R /Fit] /First 7 0 R /Last 7 0 R /Count 1 >>",
            ]
        ),
        ok(has("Outlined page text.")),
        id="outline-own-child",
    ),
    pytest.param(
        PdfConverter,
        outlined_pdf(
            [
                b"<< /Type /Outlines /First 7 0 R /Last 9 0 R /Count 3 >>",
                b"<< /Title (Nowhere) /Parent 6 0 R /Dest [99 0 R /Fit] /Next 8 0 R >>",
                b"<< /Title (Named) /Parent 6 0 R /Dest (nope) /Next 9 0 R >>",
                b"<< /Title <FEFF0000D800> /Parent 6 0 R /Dest [4 0 R /Fit] >>",
            ]
        ),
        ok(lambda out: headings_of(out) == [] and "Outlined page text." in out.text),
        id="outline-points-nowhere",
    ),
    pytest.param(
        PdfConverter,
        lambda: outline_siblings(100_000),
        ok(lambda out: len(headings_of(out)) == 10),
        id="outline-100k-entries",
    ),
    pytest.param(
        PdfConverter,
        lambda: outline_depth(5000),
        ok(lambda out: max(len(h.split()[0]) for h in headings_of(out)) <= 6),
        id="outline-5000-deep",
    ),
    pytest.param(
        PdfConverter,
        one_page_pdf(
            resources=b"/Font << /F1 3 0 R >> /XObject << /X1 6 0 R >>",
            content=b"BT /F1 12 Tf 50 700 Td (Text with a form) Tj ET /X1 Do",
            extra=[
                stream(
                    b"/X1 Do",
                    b" /Type /XObject /Subtype /Form /BBox [0 0 100 100] /Resources << /XObject << /X1 6 0 R >> >>",
                )
            ],
        ),
        ok(has("Text with a form")),
        id="form-draws-itself",
    ),
    pytest.param(
        PdfConverter,
        one_page_pdf(text=b"ABCABC plain words", font=HELVETICA[:-2] + b"/ToUnicode 6 0 R >>", extra=[TO_UNICODE]),
        ok(has("plain words")),
        id="glyphs-map-to-nul-and-surrogates",
    ),
    pytest.param(PdfConverter, pdf_bytes([["x"]], text_layer=False), fails(r"no text layer"), id="scan"),
]


@pytest.mark.parametrize(("make", "data", "expected"), PDF)
def test_hostile_pdf(make: Callable[[], Converter], data: bytes, expected: tuple[str, object]) -> None:
    pytest.importorskip("pypdfium2")
    probe(make(), data, expected)


def test_pdf_with_an_owner_password_only_is_read() -> None:
    """A PDF encrypted with an owner password and no user password (printing or copying
    "forbidden") opens in every viewer without asking: its text is read, as a user expects."""
    probe(PdfConverter(), encrypted("", "owner"), ok(has("ocelot")))
    probe(PdfConverter(), encrypted("", "owner", "RC4-128"), ok(has("ocelot")))


def test_pdf_with_a_wrong_password_says_the_password_is_wrong() -> None:
    """Found: with `password` set but wrong, the message still said to set `password`."""
    locked = encrypted("pw", "owner")
    probe(PdfConverter(), locked, fails(r"^encrypted \(it needs a password\); set the pdf converter's `password`"))
    probe(
        PdfConverter(password="nope"),
        locked,
        fails(r"^encrypted \(the pdf converter's `password` does not open it\); set the right one"),
    )
    probe(PdfConverter(password="owner"), locked, ok(has("ocelot")))


def test_a_2000_page_pdf_is_read_in_seconds_once_allowed() -> None:
    """The existing test refuses 2,000 pages at max_pages = 1,000 without reading them; raised,
    all 2,000 are read, a form feed before each page after the first, in a few seconds."""
    data = pdf_bytes([[f"Page {n} words."] for n in range(2000)])
    probe(
        PdfConverter(max_pages=3000),
        data,
        ok(lambda out: out.metadata["pages"] == 2000 and out.text.count("\f") == 1999, has("Page 1999 words.")),
    )


# --------------------------------------------------------------------------- Word
@functools.cache
def word_parts() -> dict[str, bytes]:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("Hello docx body")
    buffer = io.BytesIO()
    document.save(buffer)
    with zipfile.ZipFile(buffer) as zf:
        return {info.filename: zf.read(info.filename) for info in zf.infolist()}


def word(
    replace: dict[str, bytes] | None = None, add: tuple[tuple[str, bytes], ...] = (), drop: tuple[str, ...] = ()
) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in word_parts().items():
            if name not in drop:
                zf.writestr(name, (replace or {}).get(name, data))
        for name, data in add:
            zf.writestr(name, data)
    return out.getvalue()


def body(xml: bytes, prolog: bytes = b"") -> dict[str, bytes]:
    """word/document.xml with `xml` in place of the body's text, `prolog` in place of its XML declaration."""
    document = word_parts()["word/document.xml"]
    if prolog:
        document = re.sub(rb"^<\?xml[^>]*\?>", prolog, document)
    return {"word/document.xml": document.replace(b"Hello docx body", xml)}


def with_body_before(xml: bytes, after: bytes) -> dict[str, bytes]:
    document = word_parts()["word/document.xml"]
    return {
        "word/document.xml": document.replace(b"<w:body>", b"<w:body>" + xml, 1).replace(
            b"</w:body>", after + b"</w:body>"
        )
    }


OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "lollollollol">'
    + b"".join(b'<!ENTITY %c "%s">' % (98 + i, b"&%c;" % (97 + i) * 10) for i in range(9))
    + b"]>"
)
TRAVERSAL = f"plm-hostile-{uuid.uuid4().hex}.txt"

DOCX = [
    pytest.param(lambda: pdf_bytes([["x"]]), fails(r"^not a Word \.docx file \(not a zip"), id="pdf-named-docx"),
    pytest.param(lambda: b"just some text", fails(r"^not a Word \.docx file \(not a zip"), id="text-named-docx"),
    # Found: a Word file saved with a password (an OLE file holding "EncryptedPackage") was
    # called "damaged, or an old .doc"; an old .doc was not named as one.
    pytest.param(
        lambda: OLE + b"\0" * 512 + "EncryptedPackage".encode("utf-16-le") + b"\0" * 512,
        fails(r"^encrypted \(saved with a password\); save a copy without one$"),
        id="encrypted-docx",
    ),
    pytest.param(lambda: OLE + b"\0" * 2048, fails(r"^an old Word \.doc file \(OLE\), not a \.docx"), id="old-doc"),
    # Found: an Excel file renamed .docx said "file '<_io.BytesIO object at 0x7f...>' is not a Word file".
    pytest.param(
        lambda: word(
            {
                "[Content_Types].xml": word_parts()["[Content_Types].xml"].replace(
                    b"wordprocessingml.document.main", b"spreadsheetml.sheet.main"
                )
            }
        ),
        fails(
            r"^not a Word document: its content type is application/vnd\.openxmlformats-officedocument\.spreadsheetml"
        ),
        id="xlsx-named-docx",
    ),
    pytest.param(
        lambda: word(drop=("[Content_Types].xml",)),
        fails(r"^not a readable Word file \(KeyError"),
        id="no-content-types",
    ),
    pytest.param(lambda: word(drop=("word/document.xml",)), fails(r"^not a readable Word file"), id="no-document-part"),
    pytest.param(
        lambda: word(
            add=((f"../../../../../../tmp/{TRAVERSAL}", b"evil"), ("/etc/plm-evil", b"x"), ("C:\\evil", b"x"))
        ),
        ok(has("Hello docx body"), lambda out: not Path("/tmp", TRAVERSAL).exists()),
        id="path-traversal-entries",
    ),
    pytest.param(
        lambda: word(add=tuple((f"junk/{i}.bin", b"") for i in range(50_000))),
        ok(has("Hello docx body")),
        id="50k-entries",
    ),
    pytest.param(
        lambda: overlapping_zip(300, 1 << 20),
        fails(r"^unzips to 300 MB, over the docx converter's max_unzipped_mb = 200 \(a zip bomb\?\)"),
        id="overlapping-entries-bomb",
    ),
    pytest.param(
        lambda: lying_sizes(word(body(b"Hello <!--" + b"A" * 50_000_000 + b"-->")), "word/document.xml", 1000),
        fails(r"^not a readable Word file \(BadZipFile: Bad CRC-32"),
        id="sizes-lie-50mb-inflates",
    ),
    pytest.param(
        lambda: word(add=(("word/embeddings/inner.zip", overlapping_zip(300, 1 << 20)),)),
        ok(has("Hello docx body")),
        id="bomb-nested-inside",
    ),
    pytest.param(lambda: b"MZ" + b"\0" * 5000 + word(), ok(has("Hello docx body")), id="self-extractor-prefix"),
    pytest.param(
        lambda: word(
            body(b"Hello &x; body", b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>')
        ),
        ok(has("Hello"), lacks("root:", "nologin")),
        id="xxe",
    ),
    pytest.param(
        lambda: word(body(b"Hello &j; body", LAUGHS)),
        fails(r"^not a readable Word file \(XMLSyntaxError: Maximum entity amplification"),
        id="billion-laughs",
    ),
    pytest.param(
        lambda: word(
            with_body_before(
                b"<w:tbl><w:tr><w:tc>" * 3000 + b"<w:p><w:r><w:t>deep</w:t></w:r></w:p>",
                b"</w:tc></w:tr></w:tbl>" * 3000,
            )
        ),
        fails(r"^not a readable Word file \(XMLSyntaxError: Excessive depth"),
        id="3000-nested-tables",
    ),
    pytest.param(
        lambda: word({"docProps/core.xml": b"<not xml"}), fails(r"^not a readable Word file"), id="properties-not-xml"
    ),
]


@pytest.mark.parametrize(("make", "expected"), DOCX)
def test_hostile_docx(make: Callable[[], bytes], expected: tuple[str, object]) -> None:
    pytest.importorskip("docx")
    probe(DocxConverter(), make(), expected)


# --------------------------------------------------------------------------- notebooks
def notebook(**fields: object) -> bytes:
    return json.dumps(fields).encode()


NOTEBOOKS = [
    # Found: nbformat 3 worksheets whose `cells` is not a list raised TypeError.
    pytest.param(
        notebook(worksheets=[{"cells": 5}, {"cells": None}, {"cells": [{"cell_type": "markdown", "source": "kept"}]}]),
        ok(has("kept")),
        id="v3-cells-not-a-list",
    ),
    pytest.param(notebook(cells="abc"), fails(r"no list of `cells`"), id="cells-a-string"),
    pytest.param(
        lambda: b"[" * 100_000 + b"]" * 100_000,
        fails(r"^not a readable notebook: JSON nested too deeply"),
        id="deep-json",
    ),
    pytest.param(
        lambda: b'{"cells": [], "n": ' + b"1" * 100_000 + b"}",
        fails(r"a number with thousands of digits"),
        id="huge-number",
    ),
    pytest.param(
        notebook(
            cells=[
                {"cell_type": "markdown", "source": 42},
                {"cell_type": "code", "source": ["x = 1", 7, None]},
                3,
                None,
            ]
        ),
        ok(lambda out: out.text == "```\nx = 1\n```"),
        id="sources-not-strings",
    ),
    # Found: a language name holding backticks closed the code fence and made "# Injected" a heading, and the title.
    pytest.param(
        notebook(
            metadata={"language_info": {"name": "py```\n# Injected"}},
            cells=[{"cell_type": "code", "source": "x = 1"}, {"cell_type": "markdown", "source": "# After\n\nwords"}],
        ),
        ok(titled("After"), lambda out: out.metadata["language"] == "py" and out.text.startswith("```py\nx = 1\n```")),
        id="language-injects-a-heading",
    ),
    # Found: metadata that is not text became its repr: language "{'a': 1}", author "{'x': 1}".
    pytest.param(
        notebook(
            metadata={"language_info": {"name": {"a": 1}}, "authors": [{"name": {"x": 1}}], "title": 5},
            cells=[{"cell_type": "markdown", "source": "body"}],
        ),
        ok(lambda out: dict(out.metadata) == {} and out.title == ""),
        id="metadata-not-strings",
    ),
    # Found: a NUL in the notebook's title made a store refuse the whole notebook.
    pytest.param(
        notebook(metadata={"title": "Ti\u0000tle\nnext"}, cells=[{"cell_type": "markdown", "source": "body"}]),
        ok(titled("Ti tle next")),
        id="title-with-nul",
    ),
    pytest.param(
        lambda: notebook(cells=[{"cell_type": "code", "source": "print()", "outputs": [{"text": "y" * 30_000_000}]}]),
        ok(lambda out: out.text == "```\nprint()\n```"),
        id="30mb-of-outputs",
    ),
    pytest.param(
        notebook(
            cells=[
                {"cell_type": "heading", "level": 99, "source": "H"},
                {"cell_type": "heading", "level": True, "source": "T"},
            ]
        ),
        ok(lambda out: out.text == "H\n\n# T"),
        id="heading-levels-out-of-range",
    ),
    # Found: a notebook saved as UTF-16 with a BOM was "binary, not text (NUL byte at offset 5)".
    pytest.param(
        '{"cells": [{"cell_type": "markdown", "source": "# Sixteen"}]}'.encode("utf-16"),
        ok(titled("Sixteen")),
        id="utf16-bom",
    ),
]


@pytest.mark.parametrize(("data", "expected"), NOTEBOOKS)
def test_hostile_notebook(data: bytes, expected: tuple[str, object]) -> None:
    probe(NotebookConverter(), data, expected)


# --------------------------------------------------------------------------- reST
def substitution_bomb(levels: int) -> bytes:
    lines = [f".. |l{i}| replace:: |l{i + 1}| |l{i + 1}| |l{i + 1}| |l{i + 1}|" for i in range(levels)]
    return ("T\n=\n\n|l0| body\n\n" + "\n".join(lines) + f"\n.. |l{levels}| replace:: lol\n").encode()


RST = [
    pytest.param(
        b"T\n=\n\n.. csv-table:: x\n   :url: http://127.0.0.1:9/x.csv\n\nbody", ok(has("body")), id="csv-table-url"
    ),
    pytest.param(
        b"T\n=\n\n|a| body\n\n.. |a| replace:: |b|\n.. |b| replace:: |a|\n", ok(has("body")), id="substitution-loop"
    ),
    # Found: substitutions nested four wide, 25 deep, expanded without end (4^25).
    pytest.param(
        substitution_bomb(25),
        fails(r"^its substitutions, nested in one another, bring in over 10,000 more \(a substitution bomb\?\)"),
        id="substitution-bomb",
    ),
    pytest.param(
        b"T\n=\n\n|a| and |a|\n\n.. |a| replace:: |b| x\n.. |b| replace:: bee\n",
        ok(has("bee x and bee x")),
        id="nested-substitution-kept",
    ),
    # Found: docutils rescans the rest of a paragraph for each `*` left open: 90 KB took a minute.
    pytest.param(
        lambda: ("T\n=\n\n" + "\n".join(["*a " * 1000] * 30) + "\n").encode(),
        ok(has("*a *a")),
        id="emphasis-never-closed",
    ),
    # Found: 1,500 bare URLs in one paragraph exhausted the stack: the whole file "not readable".
    pytest.param(
        lambda: ("T\n=\n\n" + "\n".join(f"http://example.com/{i}" for i in range(1500)) + "\n").encode(),
        ok(has("http://example.com/1499")),
        id="1500-bare-urls",
    ),
    pytest.param(b"T\n=\n\n.. |n| unicode:: U+0000\n\nbefore |n| after", ok(has("before")), id="substitution-of-nul"),
    pytest.param(
        b"T\n=\n\n" + b"".join(b"  " * i + b"- item\n\n" for i in range(300)),
        fails(r"^not readable as reStructuredText \(RecursionError"),
        id="300-nested-lists",
    ),
    pytest.param(b"T\n=\n\ncaf\xe9", fails(r"^not valid UTF-8 \(byte 0xe9 at offset 8, line 4\)"), id="not-utf8"),
]


@pytest.mark.parametrize(("data", "expected"), RST)
def test_hostile_rst(data: bytes, expected: tuple[str, object]) -> None:
    pytest.importorskip("docutils")
    probe(RstConverter(), data, expected)


def test_rst_reads_no_other_file_by_any_directive(tmp_path: Path) -> None:
    """`include` is covered by test_converters; `csv-table :file:`, `raw :file:`, `include
    :literal:`, `image` and a `raw` role must not read one either."""
    pytest.importorskip("docutils")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRETWORD,SECRETCELL")
    data = (
        f"T\n=\n\n.. include:: {secret}\n   :literal:\n\n.. csv-table:: x\n   :file: {secret}\n\n"
        f".. raw:: html\n   :file: {secret}\n\n.. image:: {secret}\n\n.. role:: raw-html(raw)\n   :format: html\n\n"
        ":raw-html:`<b>x</b>` body\n"
    ).encode()
    probe(RstConverter(), data, ok(has("body"), lacks("SECRETWORD", "SECRETCELL")))


def test_rst_line_over_docutils_limit_fails_saying_which() -> None:
    """Found: docutils reads nothing of a file with a line over 10,000 characters (its guard
    against slow parsing), so the file came out "empty (no text in it)". Debatable: raising
    docutils' limit would read it, but the limit guards docutils' own regular expressions (a
    line of 10,000 `*a ` took 0.7 s, 300,000 did not end); one line naming the line is what a
    user can act on."""
    pytest.importorskip("docutils")
    probe(RstConverter(), b"T\n=\n\nshort\n\n" + b"word " * 4000 + b"\n", fails(r"^line 6 is over 10,000 characters"))


# --------------------------------------------------------------------------- Markdown and text
MARKDOWN = [
    pytest.param(
        MarkdownConverter,
        "\ufeff---\ntitle: Front\n---\n# H\n\nbody".encode(),
        ok(titled("Front")),
        id="bom-then-front-matter",
    ),
    pytest.param(
        MarkdownConverter,
        b"---\r\ntitle: CRLF\r\n---\r\n# H\r\n\r\nbody\r\n",
        ok(titled("CRLF"), lacks("\r")),
        id="crlf-front-matter",
    ),
    pytest.param(MarkdownConverter, b"# T\rbody\rmore", ok(lambda out: out.text == "# T\nbody\nmore"), id="lone-cr"),
    pytest.param(MarkdownConverter, b"# T\x00\n", fails(r"^binary, not text \(NUL byte at offset 3\)"), id="nul-early"),
    pytest.param(
        MarkdownConverter,
        b"# T\n\ncaf\xe9",
        fails(r"^not valid UTF-8 \(byte 0xe9 at offset 8, line 3\)"),
        id="not-utf8",
    ),
    pytest.param(
        MarkdownConverter,
        b"---\na: &a [x,x,x,x,x,x,x,x,x,x]\n"
        + b"".join(b"%c: &%c [%s]\n" % (98 + i, 98 + i, b",".join([b"*%c" % (97 + i)] * 10)) for i in range(8))
        + b"---\n# T\n",
        ok(titled("T"), lambda out: all(isinstance(v, str) for v in out.metadata.values())),
        id="yaml-alias-bomb",
    ),
    pytest.param(
        MarkdownConverter,
        b"---\nx: !!python/object/apply:os.system ['echo PWNED']\n---\n# T\n",
        ok(lambda out: isinstance(out.metadata["x"], str)),
        id="yaml-python-tag",
    ),
    pytest.param(MarkdownConverter, lambda: b"# T\n\n" + b"word " * 2_000_000, ok(titled("T")), id="10mb-one-line"),
    pytest.param(MarkdownConverter, lambda: b">" * 100_000 + b" deep\n", ok(has("deep")), id="100k-nested-quotes"),
    # Found: UTF-16 with its BOM (PowerShell's `>`, Notepad's "Unicode") was "binary, not text".
    pytest.param(
        TextConverter,
        "\ufeffhello sixteen\r\nline".encode("utf-16"),
        ok(lambda out: out.text == "hello sixteen\nline"),
        id="text-utf16-bom",
    ),
    pytest.param(
        TextConverter,
        b"\xff\xfe" + b"\x00\xd8",
        fails(r"^binary, not text \(NUL byte at offset 2\)"),
        id="text-utf16-lone-surrogate",
    ),
    pytest.param(
        TextConverter,
        b"\xff\xfe caf\xe9",
        fails(r"^not valid UTF-8 \(byte 0xff at offset 0"),
        id="text-ff-fe-but-not-utf16",
    ),
    pytest.param(TextConverter, b"\xef\xbb\xbf", ok(lambda out: out.text == ""), id="text-only-a-bom"),
]


@pytest.mark.parametrize(("make", "data", "expected"), MARKDOWN)
def test_hostile_markdown_and_text(make: Callable[[], Converter], data: bytes, expected: tuple[str, object]) -> None:
    probe(make(), data, expected)


@pytest.mark.parametrize("unit", ["[[", "{{< "], ids=["wikilinks-never-closed", "shortcodes-never-closed"])
def test_markdown_openers_never_closed_are_read_in_seconds(unit: str) -> None:
    """plm_plugins/commonmark.py's _WIKILINK and _SHORTCODE rescanned a line for each `[[` or
    `{{<` left open: 10 KB of `[[` took 7 s, 40 KB 2 minutes. Their parts are bounded now."""
    probe(MarkdownConverter(), (unit * 20_000).encode(), ok(has(unit.strip())), seconds=10)  # was minutes
