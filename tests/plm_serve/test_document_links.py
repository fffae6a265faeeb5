"""The document page's links as `plm serve` (a real process on 127.0.0.1) gives them: a
relative link to another stored document of the ingested folder opens that document's page,
and following it shows that document; every other link is left as written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from plm_needs import needs
from serve_helpers import server_helpers

httpx = pytest.importorskip("httpx")
pytestmark = needs("fastapi", "bm25s")

_helpers = server_helpers()
Server, plm = _helpers.Server, _helpers.plm

FILES = {
    "README.md": "# Handbook\n\nThe handbook of every project, kept at the top of the folder.\n",
    "proj-a/guide.md": (
        "# Guide\n\nRead the [docs index](docs/index.md), the [handbook](../README.md) and the "
        "[backup notes](notes.md#Backup--Restore). See [the site](https://example.com/docs/index.md), "
        "[this guide's top](#guide), [a missing page](missing.md), [a file above](../../outside.md) "
        "and [the diagram](diagram.png).\n"
    ),
    "proj-a/docs/index.md": "# Docs index\n\nEvery page of project A's documentation is listed here.\n",
    "proj-a/notes.md": "# Notes\n\n## Backup & Restore\n\nBackups run nightly and restores are drilled monthly.\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("links")
    for name, text in FILES.items():
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text)
    (root / "outside.md").write_text("# Outside\n\nA file above the ingested folder.\n")
    (root / "serve.toml").write_text(_helpers.CONFIG)
    srv = Server(root)
    res = plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env)
    assert res.returncode == 0, res.stderr
    srv.start()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()[-3000:]


def links(server: Server, doc_id: str) -> dict[str, str]:
    """Each link's text -> its href, in the document as GET /documents/{id} renders it."""
    got = httpx.get(server.url + "/documents/" + quote(doc_id, safe=""))
    assert got.status_code == 200, got.text
    return {text: href for href, text in re.findall(r'<a href="([^"]*)">([^<]*)</a>', got.json()["html"])}


def follow(server: Server, href: str) -> dict[str, Any]:
    """What the document page at `href` shows: the page itself, then the document it asks for."""
    page = httpx.get(server.url + href)
    assert page.status_code == 200 and "plm document" in page.text
    (doc_id,) = parse_qs(urlsplit(href).query)["id"]
    got = httpx.get(server.url + "/documents/" + quote(doc_id, safe=""))  # as the page's script asks
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_relative_links_open_the_linked_documents_page(server: Server) -> None:
    found = links(server, "proj-a/guide")
    assert found["docs index"] == "/doc?id=proj-a/docs/index"  # nested: from the guide's folder
    assert found["handbook"] == "/doc?id=README"  # `../`
    assert found["backup notes"] == "/doc?id=proj-a/notes#backup-restore"  # the anchor as the page names it
    assert follow(server, found["docs index"])["id"] == "proj-a/docs/index"
    assert follow(server, found["handbook"])["text"] == FILES["README.md"]
    notes = follow(server, found["backup notes"])
    assert notes["id"] == "proj-a/notes" and "backup-restore" in [h["id"] for h in notes["headings"]]


def test_other_links_are_left_as_written(server: Server) -> None:
    found = links(server, "proj-a/guide")
    assert found["the site"] == "https://example.com/docs/index.md" and found["this guide's top"] == "#guide"
    assert found["a missing page"] == "missing.md"  # no such stored document
    assert found["a file above"] == "../../outside.md" and found["the diagram"] == "diagram.png"
    assert found["docs index"].startswith("/doc?id=")  # while the same document's stored links are rewritten
