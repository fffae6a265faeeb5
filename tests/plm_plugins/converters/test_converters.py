"""Each built-in converter on a real file of its format: text and structure kept, what is
not content left out, and a file it cannot read is one clear PlmUserError."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from documents import pdf_bytes, write_docx, write_notebook

from plm import PlmUserError
from plm_plugins.converters.docx import DocxConverter
from plm_plugins.converters.html import HtmlConverter
from plm_plugins.converters.markdown import MarkdownConverter
from plm_plugins.converters.notebook import NotebookConverter
from plm_plugins.converters.pdf import PdfConverter
from plm_plugins.converters.rst import RstConverter
from plm_plugins.converters.text import TextConverter


def test_pdf_text_by_page_with_outline_headings_and_information() -> None:
    data = pdf_bytes(
        [["Attention is all you need."], ["The Transformer reaches 28.4 BLEU."]],
        title="Attention",
        author="Vaswani",
        date="20170612",
        outline=[("Introduction", 0), ("Results", 1)],
    )
    out = PdfConverter().convert(data, "a.pdf")
    assert out.title == "Attention"
    assert dict(out.metadata) == {"pages": 2, "author": "Vaswani", "date": "2017-06-12"}
    first, second = out.text.split("\f")
    assert first.strip() == "# Introduction\n\nAttention is all you need."
    assert second.strip() == "# Results\n\nThe Transformer reaches 28.4 BLEU."


def test_pdf_without_a_title_takes_its_first_line() -> None:
    out = PdfConverter().convert(pdf_bytes([["Quokkas of Rottnest", "They live on an island."]]), "q.pdf")
    assert out.title.startswith("Quokkas of Rottnest")


def test_pdf_that_cannot_be_read_says_why() -> None:
    with pytest.raises(PlmUserError, match=r"no text layer \(1 page of images: a scan\?\); OCR is not built in"):
        PdfConverter().convert(pdf_bytes([["x"]], text_layer=False), "scan.pdf")
    with pytest.raises(PlmUserError, match="not a readable PDF"):
        PdfConverter().convert(b"%PDF-1.4\nnot really a pdf", "bad.pdf")
    with pytest.raises(PlmUserError, match="2,000 pages, over the pdf converter's max_pages = 1,000"):
        PdfConverter().convert(pdf_bytes([["p"]] * 2000), "book.pdf")


def test_encrypted_pdf_needs_its_password() -> None:
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_bytes([["Secret plans for the ocelot."]])))
    writer.encrypt("pw")
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(PlmUserError, match=r"encrypted \(it needs a password\); set the pdf converter's `password`"):
        PdfConverter().convert(out.getvalue(), "locked.pdf")
    assert "ocelot" in PdfConverter(password="pw").convert(out.getvalue(), "locked.pdf").text


def test_docx_headings_lists_tables_and_properties(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.author = "Bo"
    document.add_paragraph("Quarterly report", style="Title")
    document.add_paragraph("Revenue", style="Heading 1")
    document.add_paragraph("The armadillo line grew.")
    document.add_paragraph("first point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "region", "growth"
    table.cell(1, 0).text, table.cell(1, 1).text = "north", "12%"
    document.add_paragraph("Details", style="Heading 2")
    buffer = io.BytesIO()
    document.save(buffer)
    out = DocxConverter().convert(buffer.getvalue(), "r.docx")
    assert out.title == "Quarterly report" and out.metadata["author"] == "Bo"
    assert out.text == (
        "# Quarterly report\n\n# Revenue\n\nThe armadillo line grew.\n\n- first point\n\n"
        "region | growth\nnorth | 12%\n\n## Details"
    )


def test_damaged_docx_and_zip_bomb_are_one_line_each(tmp_path: Path) -> None:
    good = write_docx(tmp_path / "g.docx", [("", "text")]).read_bytes()
    with pytest.raises(PlmUserError, match=r"not a Word .docx file \(not a zip: damaged, or an old .doc\)"):
        DocxConverter().convert(good[: len(good) // 2], "half.docx")
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", b"\0" * (3 * 1024 * 1024))
    assert len(bomb.getvalue()) < 10_000
    with pytest.raises(
        PlmUserError, match=r"unzips to 3 MB, over the docx converter's max_unzipped_mb = 2 \(a zip bomb\?\)"
    ):
        DocxConverter(max_unzipped_mb=2).convert(bomb.getvalue(), "bomb.docx")
    with pytest.raises(PlmUserError, match="not a readable Word file"):
        DocxConverter().convert(bomb.getvalue(), "bomb.docx")


def test_html_keeps_the_main_content_only() -> None:
    page = (
        "<html><head><title>FAQ - Site</title><meta name='author' content='Ann'>"
        "<meta property='article:published_time' content='2024-05-01'><style>p{color:red}</style>"
        "<script>var hidden = '<p>scriptword</p>';</script></head><body>"
        "<nav><a href='/'>navword</a></nav><header>headerword</header>"
        "<main><h1>Frequently asked</h1><p>Why is the <b>giraffe</b>\n slow?</p><h2>Install</h2>"
        "<ul><li>one</li><li>two</li></ul><pre><code>pip install x\n# not a heading</code></pre></main>"
        "<aside>asideword</aside><footer>footerword</footer></body></html>"
    )
    out = HtmlConverter().convert(page.encode(), "faq.html")
    assert out.title == "Frequently asked"
    assert dict(out.metadata) == {"author": "Ann", "date": "2024-05-01"}
    assert out.text == (
        "# Frequently asked\n\nWhy is the giraffe slow?\n\n## Install\n\n- one\n\n- two\n\n"
        "```\npip install x\n# not a heading\n```"
    )


def test_html_without_main_drops_the_frame_and_reads_its_charset() -> None:
    page = "<html><head><meta charset='windows-1252'><title>Caf\xe9</title></head><body><nav>menu</nav>"
    page += "<p>cr\xe8me br\xfbl\xe9e</p><footer>foot</footer></body></html>"
    out = HtmlConverter().convert(page.encode("cp1252"), "cafe.htm")
    assert (out.title, out.text) == ("Café", "crème brûlée")


def test_notebook_markdown_and_code_cells_without_outputs(tmp_path: Path) -> None:
    path = write_notebook(
        tmp_path / "a.ipynb",
        [("markdown", "# Analysis { #top }\n\nWe study the ocelot."), ("code", "import pandas as pd\n# load")],
    )
    out = NotebookConverter().convert(path.read_bytes(), "a.ipynb")
    assert out.title == "Analysis" and out.metadata["language"] == "python"
    assert out.text == "# Analysis\n\nWe study the ocelot.\n\n```python\nimport pandas as pd\n# load\n```"
    assert "OUTPUT-NOT-INDEXED" not in out.text
    v3 = {"worksheets": [{"cells": [{"cell_type": "heading", "level": 2, "source": "Old"},
                                    {"cell_type": "code", "input": "x = 1"}]}], "metadata": {}}  # fmt: skip
    assert NotebookConverter().convert(json.dumps(v3).encode(), "v3.ipynb").text == "## Old\n\n```\nx = 1\n```"
    with pytest.raises(PlmUserError, match=r"not a readable notebook: not valid JSON"):
        NotebookConverter().convert(path.read_bytes()[:40], "cut.ipynb")
    with pytest.raises(PlmUserError, match="no list of `cells`"):
        NotebookConverter().convert(b'{"nbformat": 4}', "empty.ipynb")


def test_rst_sections_code_and_nothing_from_elsewhere(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRETWORD")
    text = (
        f"Guide\n=====\n\n:author: Ann\n\nIntro with *emphasis*.\n\nInstall\n-------\n\nRun::\n\n    pip install x\n\n"
        f".. note:: Be careful.\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>RAWWORD</b>\n\n"
        ".. toctree::\n\n   a\n\n- one\n- two\n"
    )
    out = RstConverter().convert(text.encode(), "guide.rst")
    assert out.title == "Guide" and out.metadata["author"] == "Ann"
    assert "# Guide" in out.text and "## Install" in out.text and "```\npip install x\n```" in out.text
    assert "**Note**\n\nBe careful." in out.text and "- one" in out.text
    assert "SECRETWORD" not in out.text and "RAWWORD" not in out.text


def test_markdown_and_text() -> None:
    md = b"---\ntitle: From front matter\ntags: [a, b]\n---\n# Heading { #h }\n\n!!! tip\n    Body.\n"
    out = MarkdownConverter().convert(md, "m.md")
    assert out.title == "From front matter" and out.metadata["tags"] == ["a", "b"]
    assert out.text.endswith("# Heading\n\n**Tip**\nBody.\n")
    assert MarkdownConverter().convert(b"```\n# no\n```\n# Yes { .x }\n", "m.md").title == "Yes"
    assert MarkdownConverter(clean=False).convert(b"# A { #a }\n", "m.md").text == "# A { #a }\n"
    assert TextConverter().convert("\ufeffplain\r\ntext".encode(), "t.txt").text == "plain\ntext"
    with pytest.raises(PlmUserError, match="not valid UTF-8"):
        TextConverter().convert(b"\xff\xfe bad", "t.txt")
