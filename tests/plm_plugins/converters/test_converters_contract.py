"""Every built-in converter keeps the converters contract (`plm.testing.check_converter`) on
a small file of its format, and refuses a damaged one with a PlmUserError saying why."""

from __future__ import annotations

from pathlib import Path

import pytest
from documents import pdf_bytes, write_docx, write_notebook

import plm
import plm.testing

HTML = b"<html><head><title>Pods</title></head><body><main><h1>Pods</h1><p>A pod.</p></main></body></html>"
RST = b"Pods\n====\n\nA pod holds containers.\n\nLifecycle\n---------\n\nPending, then running.\n"
MARKDOWN = b"---\ntitle: Pods\ntags: [a, b]\n---\n# Pods\n\nA pod holds containers.\n"


def _sample(name: str, tmp_path: Path) -> tuple[bytes, bytes | None]:
    """A file of the converter's format with some text, and one it cannot use (None: any bytes do)."""
    if name == "pdf":
        return pdf_bytes([["Pods hold containers."], ["Nodes run pods."]], title="Pods"), b"%PDF-1.4\nnot a pdf"
    if name == "docx":
        path = write_docx(tmp_path / "a.docx", [("Title", "Pods"), ("Heading 1", "Lifecycle"), ("", "Pending.")])
        return path.read_bytes(), b"not a zip file"
    if name == "notebook":
        path = write_notebook(tmp_path / "a.ipynb", [("markdown", "# Pods\n\nA pod."), ("code", "print(1)")])
        return path.read_bytes(), b"{not json"
    if name == "html":
        return HTML, None
    if name == "rst":
        return RST, None
    if name == "markdown":
        return MARKDOWN, b"\xff\xfe not UTF-8"
    return b"Pods hold containers.\nNodes run pods.\n", b"\xff\xfe not UTF-8"


@pytest.mark.parametrize("name", ["docx", "html", "markdown", "notebook", "pdf", "rst", "text"])
def test_a_built_in_converter_keeps_the_contract(name: str, tmp_path: Path) -> None:
    registration = plm.default_registry().get(name, "converters")
    data, unusable = _sample(name, tmp_path)
    try:
        converter = registration.cls()
        plm.testing.check_converter(converter, data, unusable=unusable)
    except plm.MissingDependencyError as err:
        pytest.skip(str(err))
