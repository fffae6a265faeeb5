"""A folder of any format as `plm serve` (a real process on 127.0.0.1) shows it: a PDF's page
is rendered with its page markers and opens at the hit's page, the original file is served
from inside the indexed folder only (a PDF as itself, anything else sandboxed), and a
document with no file inside an indexed folder has none to open."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from documents import write_pdf
from plm_needs import needs
from serve_helpers import server_helpers

httpx = pytest.importorskip("httpx")
pytestmark = needs("fastapi", "bm25s", "pypdfium2")

_helpers = server_helpers()
Server, plm = _helpers.Server, _helpers.plm

CONFIG = _helpers.CONFIG.replace('use = "markdown_dir"', 'use = "folder"').replace(
    "max_words = 60", 'max_words = 60\nheadings = "commonmark"'
)


def words(tag: str) -> str:
    return " ".join(f"{tag}{i % 5}" for i in range(50)) + "."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("files")
    docs = root / "docs"
    (docs / "papers").mkdir(parents=True)
    write_pdf(docs / "papers" / "paper.pdf", [[words("alpha")], [words("beta")], [words("gamma")]], title="Paper")
    (docs / "page.html").write_text("<title>Page</title><main><h1>Page</h1><p>The heron flies.</p></main>")
    (docs / "guide.md").write_text(
        "# Guide\n\nSee [the paper](papers/paper.pdf) about the heron, which every new member of the team "
        "reads first.\n\n"
        f"## Configure {{ #configure .wide }}\n\n{words('kestrel')}\n\n```bash\n# not a heading\nrun\n```\n"
    )
    (root / "serve.toml").write_text(CONFIG)
    srv = Server(root)
    res = plm("ingest", str(docs), "--config", str(srv.config), env=srv.env)
    assert res.returncode == 0, res.stderr
    srv.start()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()[-3000:]


def hit(server: Server, query: str) -> dict:
    got = httpx.get(server.url + "/query", params={"q": query, "k": 1})
    assert got.status_code == 200, got.text
    return dict(got.json()["hits"][0])


def test_a_pdf_hit_opens_the_document_and_the_file_at_its_page(server: Server) -> None:
    found = hit(server, "gamma3")
    assert (found["doc_id"], found["metadata"]["page"]) == ("papers/paper.pdf", 3)
    got = httpx.get(f"{server.url}/documents/papers/paper.pdf", params={"chunk": found["chunk_id"]})
    assert got.status_code == 200, got.text
    shown = got.json()
    assert (shown["pages"], shown["page"], shown["anchor"]) == (3, 3, "page-3")
    assert shown["file"] == "/files/papers/paper.pdf#page=3"
    assert all(f'<p class="page" id="page-{n}">page {n}</p>' in shown["html"] for n in (1, 2, 3))
    original = httpx.get(server.url + shown["file"].split("#")[0])
    assert original.status_code == 200 and original.headers["content-type"] == "application/pdf"
    assert original.headers["content-security-policy"] == "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    assert original.content == (server.root / "docs" / "papers" / "paper.pdf").read_bytes()


def test_only_files_inside_the_indexed_folder_are_served(server: Server) -> None:
    html = httpx.get(server.url + "/files/page.html")
    assert html.status_code == 200 and html.headers["content-security-policy"].startswith("sandbox")
    posted = httpx.post(server.url + "/documents", json={"records": [{"id": "posted", "text": "The heron posts."}]})
    assert posted.status_code == 200, posted.text
    assert httpx.get(server.url + "/documents/posted").json()["file"] is None
    for missing in ("posted", "nothing", "../../etc/passwd", quote("/etc/passwd", safe="")):
        got = httpx.get(server.url + "/files/" + missing)
        assert got.status_code == 404, (missing, got.text)
    assert "only files inside an indexed folder are served" in httpx.get(server.url + "/files/posted").json()["error"]


def test_a_link_from_a_markdown_page_to_a_pdf_opens_its_page(server: Server) -> None:
    got = httpx.get(server.url + "/documents/guide").json()
    assert '<a href="/doc?id=papers/paper.pdf">the paper</a>' in got["html"]


def test_a_heading_with_attributes_is_one_clean_anchor_a_hit_opens(server: Server) -> None:
    found = hit(server, "kestrel2")
    assert (found["doc_id"], found["heading_path"]) == ("guide", ["Configure"])
    shown = httpx.get(f"{server.url}/documents/guide", params={"chunk": found["chunk_id"]}).json()
    assert shown["anchor"] == "configure" and '<h2 id="configure">Configure</h2>' in shown["html"]
    assert [h["text"] for h in shown["headings"]] == ["Guide", "Configure"]


def test_a_huge_id_is_cut_in_the_answer_and_the_log(server: Server) -> None:
    """Issue 45 E14: a 100 KB id was echoed whole in the 404 and in the access log."""
    huge = "x" * 10_000  # (an HTTP request line over 16 KB may be refused before plm: h11's limit)
    for route in ("/documents/", "/files/"):
        got = httpx.get(server.url + route + huge)
        assert got.status_code == 404 and len(got.text) < 500, len(got.text)
        assert "... (10,002 characters)" in got.json()["error"]  # the quoted id, cut, saying its length
    gone = httpx.delete(server.url + "/documents/" + huge)
    assert gone.status_code == 404 and len(gone.text) < 500
    logged = [line for line in server.log.read_text().splitlines() if "xxxxxxxxxx" in line]
    assert logged and all(len(line) < 600 for line in logged), max(map(len, logged))
