"""`plm serve` as a real process on 127.0.0.1, started and stopped by the tests: queries,
documents, status, metrics, errors, the API key, another process's sync, SIGTERM, the
`--server` client, and schemathesis over the OpenAPI schema."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs
from plugin_site import plugin_site

httpx = pytest.importorskip("httpx")
pytestmark = needs("fastapi", "bm25s")

REPO = Path(__file__).resolve().parents[2]
CONFIG = """
[job]
name = "serve_test"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
target_words = 40
min_words = 10
max_words = 60
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
"""
DOCS = {
    "alpha": "---\nteam: storage\n---\n# Alpha\n\n## Backup\n\nNightly backups of the alpha volume run at two.\n",
    "beta": "---\nteam: identity\n---\n# Beta\n\n## Tokens\n\nBeta tokens expire after one hour of use.\n",
    "gamma": "---\nteam: storage\n---\n# Gamma\n\n## Mirrors\n\nGamma mirrors replicate the archive weekly.\n",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plm(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "plm_index.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


class Server:
    def __init__(self, root: Path, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.root, self.port, self.args = root, free_port(), args
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in ("PLM_API_KEY", "PLM_SERVER")}
        self.env = {**env, "PLM_DATA_DIR": str(root / "data"), "PLM_PROGRESS": "0", **(extra_env or {})}
        self.config = root / "serve.toml"
        self.log = root / f"serve-{self.port}.log"

    def start(self) -> Server:
        cmd = [sys.executable, "-m", "plm_index.cli", "serve", "--config", str(self.config), "--port", str(self.port)]
        cmd += list(self.args)
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self.log.open("w"), stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("plm serve did not start:\n" + self.log.read_text()[-3000:])

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def make_root(tmp: Path) -> Path:
    docs = tmp / "docs"
    docs.mkdir(parents=True)
    for name, text in DOCS.items():
        (docs / f"{name}.md").write_text(text)
    (tmp / "serve.toml").write_text(CONFIG)
    return tmp


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = make_root(tmp_path_factory.mktemp("serve"))
    srv = Server(root)
    res = plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env)
    assert res.returncode == 0, res.stderr
    srv.start()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()[-3000:]


def test_query_matches_the_local_plm_query(server: Server) -> None:
    local = plm("query", "alpha backups", "--config", str(server.config), "--json", env=server.env)
    assert local.returncode == 0, local.stderr
    want = json.loads(local.stdout)
    posted = httpx.post(server.url + "/query", json={"text": "alpha backups", "k": 5}).json()
    got = httpx.get(server.url + "/query", params={"q": "alpha backups"}).json()
    for answer in (posted, got):
        assert answer["hits"] == want["hits"] and answer["hits"][0]["doc_id"] == "alpha"
        assert "retrieve" in answer["timings_ms"]
    # The client prints exactly what the local command prints, with no model and no index.
    env = {**server.env, "PLM_DATA_DIR": str(server.root / "elsewhere")}
    for as_json in ((), ("--json",)):
        remote = plm("query", "alpha backups", "--server", server.url, *as_json, env=env)
        again = plm("query", "alpha backups", "--config", str(server.config), *as_json, env=server.env)
        assert remote.returncode == 0, remote.stderr
        if as_json:
            assert json.loads(remote.stdout)["hits"] == json.loads(again.stdout)["hits"]
        else:
            assert remote.stdout == again.stdout
    # "tokens" is beta's (identity), "weekly" gamma's (storage): the filter keeps beta only ("weekly"
    # alone found nothing under this filter, and the check passed on no hits)
    filtered = httpx.post(server.url + "/query", json={"text": "tokens weekly", "filters": {"team": "identity"}})
    assert [h["doc_id"] for h in filtered.json()["hits"]] == ["beta"] and "note" not in filtered.json()
    # no hit: the answer says why, as the CLI's line does (a misspelled field reads as no match)
    none = httpx.get(server.url + "/query", params={"q": "weekly", "filter": "teem=identity"}).json()
    assert none["hits"] == [] and none["note"] == (
        'no match: no chunk matches the filters {"teem": "identity"} '
        "(a chunk without a filtered field never matches, != included)"
    )


def test_get_query_takes_filters_and_weights_in_the_clis_syntax(server: Server) -> None:
    args = ("--filter", "team=storage,identity", "--filter", "team!=identity", "--json")
    local = plm("query", "alpha backups", "--config", str(server.config), *args, env=server.env)
    assert local.returncode == 0, local.stderr
    params = [("q", "alpha backups"), ("filter", "team=storage,identity"), ("filter", "team != identity")]
    got = httpx.get(server.url + "/query", params=params).json()
    assert got["hits"] == json.loads(local.stdout)["hits"] and {h["doc_id"] for h in got["hits"]} == {"alpha"}
    assert got["filters"] == {"team": {"in": ["storage", "identity"], "ne": "identity"}}
    for name, value, says in (("filter", "version>>", "bad filter 'version>>'"), ("weight", "bm25=x", "SOURCE=NUMBER")):
        bad = httpx.get(server.url + "/query", params={"q": "alpha", name: value})
        assert bad.status_code == 400 and says in bad.json()["error"], bad.text


def test_get_document_returns_it_whole_and_rendered_even_with_a_slash_in_its_id(server: Server) -> None:
    alpha = httpx.get(server.url + "/documents/alpha", params={"chunk": "alpha_mdsem_0"}).json()
    assert alpha["text"] == DOCS["alpha"] and alpha["metadata"]["team"] == "storage"
    assert alpha["front_matter"] == "team: storage" and "team" not in alpha["html"]
    assert '<h2 id="backup">Backup</h2>' in alpha["html"] and alpha["anchor"] == "alpha"
    assert [h["id"] for h in alpha["headings"]] == ["alpha", "backup"]
    record = {"id": "docs/x y?#.md", "text": "# X\n\n<img src=x onerror=alert(1)> [a](javascript:alert(1))"}
    assert httpx.post(server.url + "/documents", json={"records": [record]}, timeout=60).status_code == 200
    try:
        got = httpx.get(server.url + "/documents/docs%2Fx%20y%3F%23.md")  # encoded, as the page sends it
        assert got.status_code == 200 and got.json()["id"] == record["id"], got.text
        assert httpx.get(server.url + "/documents/docs/x%20y%3F%23.md").json()["id"] == record["id"]
        html = got.json()["html"]
        assert "<img" not in html and "&lt;img" in html and 'href="javascript' not in html  # shown, never run
        assert got.json()["anchor"] is None  # no chunk asked for
    finally:
        httpx.delete(server.url + "/documents/docs%2Fx%20y%3F%23.md", timeout=60)
    missing = httpx.get(server.url + "/documents/docs/nope")
    assert missing.status_code == 404 and "no document with id 'docs/nope'" in missing.json()["error"]


def test_documents_are_added_searchable_at_once_and_deleted(server: Server) -> None:
    record = {"id": "delta", "title": "Delta", "text": "The delta zeppelin hangar opens at dawn."}
    added = httpx.post(server.url + "/documents", json={"records": [record]}, timeout=60)
    assert added.status_code == 200 and added.json()["added"] == ["delta"]
    hits = httpx.get(server.url + "/query", params={"q": "zeppelin hangar", "k": 1}).json()["hits"]
    assert hits[0]["doc_id"] == "delta"  # searchable when the response comes
    again = httpx.post(server.url + "/documents", json={"records": [record]}, timeout=60).json()
    assert again["unchanged"] == 1 and again["added"] == []
    gone = httpx.delete(server.url + "/documents/delta", timeout=60)
    assert gone.status_code == 200 and gone.json()["deleted"] == ["delta"]
    after = httpx.get(server.url + "/query", params={"q": "zeppelin"}).json()["hits"]
    assert all(h["doc_id"] != "delta" for h in after)
    missing = httpx.delete(server.url + "/documents/delta")
    assert missing.status_code == 404 and "no document with id 'delta'" in missing.json()["error"]
    status = httpx.get(server.url + "/status").json()
    assert status["documents"] == 3 and status["ready"] and status["last_sync"]["deleted"] == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("POST", "/query", {"text": "", "k": 5}, 422, "text"),
        ("POST", "/query", {"text": "x", "k": 0}, 422, "k"),
        ("POST", "/query", {"text": "x", "k": 10_001}, 422, "k"),
        ("POST", "/query", {"text": "x", "k": "5"}, 200, ""),
        ("POST", "/query", {"text": "x", "filters": {"team": {"bad": 1}}}, 400, "unknown operator"),
        ("POST", "/query", {"text": "   "}, 400, "the query is empty"),
        ("POST", "/query", {"text": "x", "weights": {"bm25": 1.0}}, 400, "need a fusing retrieval stage"),
        ("POST", "/query", {"text": "x", "weights": {"bm25": -1}}, 422, "weights"),
        ("POST", "/query", "not json", 422, "invalid request"),
        ("POST", "/documents", {"records": []}, 422, "records"),
        ("POST", "/documents", {"records": [{"text": "no id"}]}, 422, "record 1: missing field 'id'"),
        ("GET", "/query?q=x&k=zero", None, 422, "k"),
        # an unknown name is refused, not ignored (a mistyped filter answered unfiltered)
        ("GET", "/query?q=x&filters=team%3Dstorage", None, 400, "unknown query parameter 'filters' (did you mean"),
        ("GET", "/nowhere", None, 404, ""),
    ],
)
def test_bad_input_is_a_4xx_with_one_error_line(
    server: Server, method: str, path: str, body: Any, status: int, message: str
) -> None:
    kwargs: dict[str, Any] = {"content": body} if isinstance(body, str) else {"json": body}
    response = httpx.request(method, server.url + path, headers={"content-type": "application/json"}, **kwargs)
    assert response.status_code == status, response.text
    if status >= 400 and message:
        assert message in response.json()["error"]


def test_a_body_that_is_not_json_is_a_415_saying_so(server: Server) -> None:
    sent = httpx.post(server.url + "/query", content='{"text": "alpha"}', headers={"content-type": "text/plain"})
    assert sent.status_code == 415 and "Content-Type: application/json" in sent.json()["error"], sent.text
    # a JSON media type by another name is read as JSON: a bad field is still a 422 naming it
    vendor = httpx.post(
        server.url + "/query", content='{"text": ""}', headers={"content-type": "application/vnd.api+json"}
    )
    assert vendor.status_code == 422 and "text" in vendor.json()["error"], vendor.text


BROKEN_RERANKER = """
import plm


class ListRanker(plm.Reranker):
    name = "list_ranker"

    def run(self, data):
        return list(data.hits)  # a list, not a plm.Ranking


@plm.hookimpl
def plm_register_components(registry):
    registry.add(ListRanker)
"""


def test_a_broken_stage_of_the_recipe_is_a_500_in_the_errors_shape(tmp_path: Path) -> None:
    # the server's own stage returning the wrong type is not the client's fault (it was a 400)
    site = plugin_site(tmp_path / "site", "list_ranker", BROKEN_RERANKER)
    root = make_root(tmp_path / "root")
    (root / "serve.toml").write_text(CONFIG + '[query.rerank]\nuse = "list_ranker"\n')
    srv = Server(root, extra_env={"PYTHONPATH": str(site)})
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    srv.start()
    try:
        got = httpx.get(srv.url + "/query", params={"q": "backups"})
        assert got.status_code == 500, got.text
        assert "'list_ranker' (rerankers) returned a list, not the Ranking it must return" in got.json()["error"]
    finally:
        assert srv.stop() == 0


def test_a_record_cannot_replace_a_document_that_a_file_holds(server: Server) -> None:
    # replaced by a record, the document lost its path and front matter, and nothing put it back
    clobber = httpx.post(server.url + "/documents", json={"records": [{"id": "alpha", "text": "gone"}]}, timeout=60)
    assert clobber.status_code == 409, clobber.text
    assert "document 'alpha' comes from the file " in clobber.json()["error"]
    assert httpx.get(server.url + "/documents/alpha").json()["text"] == DOCS["alpha"]  # stored nothing


@pytest.mark.slow
def test_concurrent_writes_each_return_once_their_write_is_served(server: Server) -> None:
    # Each write waits until a version at least as new as its own is served; waiting for its
    # exact version hung for the full 60 s whenever another write moved the reloader past it
    # (a race: several rounds of six writes at once).
    ids = [f"concurrent{i}" for i in range(6)]

    def post(doc_id: str, words: str) -> None:
        start = time.monotonic()
        record = {"id": doc_id, "text": f"The {doc_id} walrus ledger says {words}."}
        response = httpx.post(server.url + "/documents", json={"records": [record]}, timeout=120)
        took[doc_id] = time.monotonic() - start if response.status_code == 200 else math.inf

    try:
        for round_ in range(4):
            took: dict[str, float] = {}
            threads = [threading.Thread(target=post, args=(doc_id, f"round {round_}")) for doc_id in ids]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(150)
            assert len(took) == len(ids) and max(took.values()) < 30, took
        hits = httpx.get(server.url + "/query", params={"q": "walrus ledger", "k": 10}).json()["hits"]
        assert {h["doc_id"] for h in hits} >= set(ids)
    finally:
        for doc_id in ids:
            httpx.delete(server.url + f"/documents/{doc_id}", timeout=120)


def test_a_record_without_an_id_is_a_422_naming_it_and_nothing_is_stored(server: Server) -> None:
    records = [{"id": "okapi-note", "text": "Okapis graze at dawn."}, {"text": "no id"}]
    response = httpx.post(server.url + "/documents", json={"records": records}, timeout=60)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["error"].startswith("1 of 2 records are invalid, nothing was stored: record 2: missing field 'id'")
    assert answer["failed"] == [{"path": "record 2", "doc_id": "", "error": answer["failed"][0]["error"]}]
    hits = httpx.get(server.url + "/query", params={"q": "okapis graze"}).json()["hits"]
    assert "okapi-note" not in {h["doc_id"] for h in hits}


def test_the_body_size_is_limited(server: Server) -> None:
    huge = {"text": "x" * (11 * 1024 * 1024)}
    response = httpx.post(server.url + "/query", json=huge, timeout=60)
    assert response.status_code == 413 and "larger than 10 MB" in response.json()["error"]


def test_a_chunked_body_is_refused_while_it_is_read_not_after(server: Server) -> None:
    # A chunked body has no length to check first: the server must count while it reads and
    # answer 413 once the limit is passed, not wait for (and hold) the whole body.
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n")
        conn.sendall(b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        for _ in range(11 * 16 + 1):  # 11 MB, over the 10 MB limit; the body never ends
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        conn.settimeout(15)
        answer = b""
        while b"}" not in answer and (part := conn.recv(65536)):  # the JSON body may come apart
            answer += part
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"larger than 10 MB" in answer
    assert httpx.get(server.url + "/health").status_code == 200


def test_metrics_count_requests_and_show_the_version(server: Server) -> None:
    httpx.get(server.url + "/query", params={"q": "tokens"})
    text = httpx.get(server.url + "/metrics").text
    assert 'plm_requests_total{path="/query",status="200"}' in text
    assert "plm_request_seconds_bucket" in text and "plm_corpus_version" in text


@pytest.mark.slow
def test_another_process_syncing_is_picked_up_without_blocking_queries(server: Server) -> None:
    (server.root / "docs" / "epsilon.md").write_text("# Epsilon\n\n## Quotas\n\nEpsilon quotas cap the kiwi uploads.\n")
    results: list[int] = []
    stop = threading.Event()

    def query_loop() -> None:
        while not stop.is_set():
            results.append(httpx.get(server.url + "/query", params={"q": "kiwi uploads"}, timeout=30).status_code)

    threading.Thread(target=query_loop, daemon=True).start()
    res = plm("ingest", str(server.root / "docs"), "--config", str(server.config), env=server.env)
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hits = httpx.get(server.url + "/query", params={"q": "kiwi uploads", "k": 1}).json()["hits"]
        if hits and hits[0]["doc_id"] == "epsilon":
            break
        time.sleep(0.2)
    stop.set()
    assert hits and hits[0]["doc_id"] == "epsilon"
    assert results and set(results) == {200}


ROUTES = [("GET", "/health"), ("GET", "/"), ("GET", "/doc?id=alpha"), ("GET", "/status"), ("GET", "/query?q=alpha")]
ROUTES += [("GET", "/documents/alpha"), ("GET", "/metrics"), ("GET", "/openapi.json"), ("GET", "/nowhere")]
ROUTES += [("POST", "/documents"), ("DELETE", "/documents/alpha"), ("OPTIONS", "/documents")]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "::1", ""])
def test_a_host_that_is_not_this_server_is_refused_on_every_route(server: Server, host: str) -> None:
    # DNS rebinding: a page whose own name resolves to 127.0.0.1 would read and write this
    # server as its own origin; the browser sends that name in Host.
    port = server.url.rsplit(":", 1)[1]
    record = {"records": [{"id": "rebound", "text": "written through a rebound name"}]}
    for method, path in ROUTES:
        headers = {"Host": host.format(port=port)}
        response = httpx.request(method, server.url + path, headers=headers, json=record if method == "POST" else None)
        assert response.status_code == 421, (method, path, response.text)
        error = response.json()["error"]
        assert "is not a name of this server" in error and "localhost, 127.0.0.1, [::1]" in error
        assert "--allow-host NAME" in error and response.headers["x-frame-options"] == "DENY"
    assert httpx.get(server.url + "/documents/alpha").status_code == 200  # nothing was deleted
    assert httpx.get(server.url + "/documents/rebound").status_code == 404  # nor written


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "LOCALHOST:{port}", "localhost.:{port}", "[::1]:{port}", "127.0.0.1"]
)
def test_this_servers_own_names_are_answered(server: Server, host: str) -> None:
    port = server.url.rsplit(":", 1)[1]
    assert httpx.get(server.url + "/status", headers={"Host": host.format(port=port)}).status_code == 200


def test_a_write_from_a_page_of_another_origin_is_refused(server: Server) -> None:
    record = {"records": [{"id": "csrf", "text": "written by another site's page"}]}
    other_port = server.url.rsplit(":", 1)[0] + ":1"  # another site on this machine
    for origin in ("http://evil.example", "null", "http://localhost.evil.example", other_port, "not a url"):
        headers = {"Origin": origin, "Content-Type": "text/plain"}
        response = httpx.post(server.url + "/documents", content=json.dumps(record), headers=headers)
        assert response.status_code == 403 and "--cors-origin" in response.json()["error"], response.text
        response = httpx.delete(server.url + "/documents/alpha", headers={"Origin": origin})
        assert response.status_code == 403
    assert httpx.get(server.url + "/documents/csrf").status_code == 404
    own = httpx.delete(server.url + "/documents/csrf", headers={"Origin": server.url})  # the server's own page
    assert own.status_code == 404  # let through: there was nothing to delete


def test_every_response_carries_the_security_headers_and_no_third_party_script(server: Server) -> None:
    responses = {
        "page": httpx.get(server.url + "/"),
        "document page": httpx.get(server.url + "/doc"),
        "api": httpx.get(server.url + "/status"),
        "404": httpx.get(server.url + "/nowhere"),
        "405": httpx.put(server.url + "/query"),
        "422": httpx.post(server.url + "/query", json={"text": ""}),
        "413": httpx.post(server.url + "/query", content=b"x" * (11 * 1024 * 1024), timeout=60),
        "421": httpx.get(server.url + "/status", headers={"Host": "evil.example"}),
    }
    for name, response in responses.items():
        headers = response.headers
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY", name
        assert headers["referrer-policy"] == "no-referrer", name
        csp = headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "http" not in csp and "unsafe-eval" not in csp, (name, csp)
        if "page" in name:
            assert (
                "script-src 'sha256-" in csp
                and "default-src 'self'" in csp
                and "unsafe-inline" not in csp.split(";")[1]
            )
        else:
            assert csp.startswith("default-src 'none'"), (name, csp)
    for page in ("/", "/doc"):
        assert "<script src" not in httpx.get(server.url + page).text
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):  # Swagger UI and ReDoc load CDN scripts: off
        assert httpx.get(server.url + path).status_code == 404
    assert httpx.get(server.url + "/openapi.json").json()["info"]["title"] == "plm"


@pytest.mark.slow
def test_client_errors_are_one_line(server: Server, tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    res = plm("query", "x", "--server", down, env=server.env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "cannot reach a plm server" in res.stderr
    res = plm("status", env={**server.env, "PLM_SERVER": server.url})
    assert res.returncode == 0 and "documents" in res.stdout
    res = plm("status", env={k: v for k, v in server.env.items() if k != "PLM_SERVER"})
    assert res.returncode == 2 and "--server" in res.stderr
    silent = socket.socket()  # accepts, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        res = plm("query", "x", "--server", url, env={**server.env, "PLM_SERVER_TIMEOUT": "1"})
        assert res.returncode == 2 and "did not answer within 1s" in res.stderr, res.stderr
    finally:
        silent.close()


@pytest.mark.slow
def test_the_client_never_echoes_a_password_nor_sends_the_key_to_another_origin(tmp_path: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: dict[int, list[str | None]] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            port = self.server.server_address[1]
            seen.setdefault(port, []).append(self.headers.get("Authorization"))
            self.send_response(302 if port == first.server_address[1] else 200)
            self.send_header("Location", f"http://127.0.0.1:{second.server_address[1]}/status")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    first, second = (ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2))
    for srv in (first, second):
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if k != "PLM_SERVER"}
    try:
        url = f"http://127.0.0.1:{first.server_address[1]}"
        res = plm("status", "--server", url, env={**env, "PLM_API_KEY": "k3y\n"})  # a key file's newline
        assert seen[first.server_address[1]] == ["Bearer k3y"] and second.server_address[1] not in seen
        assert res.returncode == 2 and "redirect" in res.stderr and "k3y" not in res.stderr, res.stderr
        res = plm("status", "--server", url, env={**env, "PLM_API_KEY": "k3y\nmore"})
        assert res.returncode == 2 and "Traceback" not in res.stderr and "$PLM_API_KEY" in res.stderr, res.stderr
        assert "k3y" not in res.stderr and len(seen[first.server_address[1]]) == 1  # nothing sent
        for url in (f"http://user:pw-S3cret@127.0.0.1:{first.server_address[1]}", "http://u:pw-S3cret@[::1"):
            res = plm("query", "x", "--server", url, env=env)
            assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
            assert "pw-S3cret" not in res.stderr and "PLM_API_KEY" in res.stderr, res.stderr
    finally:
        for srv in (first, second):
            srv.shutdown()
            srv.server_close()


@pytest.mark.slow
def test_an_api_key_guards_everything_but_health(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    srv = Server(root, {"PLM_API_KEY": "k3y"}, args=("--readers", "2", "--allow-host", "plm.test"))
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    srv.start()
    try:
        assert httpx.get(srv.url + "/health").status_code == 200
        for page in ("/", "/doc?id=alpha"):  # the pages hold no data: they ask for the key
            assert httpx.get(srv.url + page).status_code == 200
        for path in ("/query?q=alpha", "/status", "/ready", "/metrics", "/documents/alpha"):
            assert httpx.get(srv.url + path).status_code == 401
            assert httpx.get(srv.url + path, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert httpx.get(srv.url + path, headers={"Authorization": "Bearer k3y"}).status_code == 200
        # A key is no reason to skip the Host check; a name given with --allow-host is answered.
        key = {"Authorization": "Bearer k3y"}
        assert httpx.get(srv.url + "/status", headers={**key, "Host": "evil.example"}).status_code == 421
        assert httpx.get(srv.url + "/status", headers={**key, "Host": "plm.test:443"}).status_code == 200
        res = plm("query", "alpha", "--server", srv.url, env={**srv.env, "PLM_API_KEY": "nope"})
        assert res.returncode == 2 and "refused the request" in res.stderr and "check PLM_API_KEY" in res.stderr
        assert plm("query", "alpha", "--server", srv.url, env=srv.env).returncode == 0
    finally:
        assert srv.stop() == 0


@pytest.mark.slow
def test_an_empty_index_is_not_ready_until_documents_arrive(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    srv = Server(root, args=("--create",)).start()  # without it, a config with no index is refused
    try:
        assert httpx.get(srv.url + "/ready").status_code == 503
        assert httpx.get(srv.url + "/query", params={"q": "alpha"}).status_code == 503
        record = {"id": "one", "text": "The only document talks about walruses."}
        assert httpx.post(srv.url + "/documents", json={"records": [record]}, timeout=60).status_code == 200
        assert httpx.get(srv.url + "/ready").status_code == 200
        assert httpx.get(srv.url + "/query", params={"q": "walruses"}).json()["hits"][0]["doc_id"] == "one"
    finally:
        assert srv.stop() == 0


@pytest.mark.slow
def test_serve_watch_catches_up_then_follows_the_folder(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    srv = Server(root, args=("--watch", str(root / "docs"))).start()
    try:
        deadline = time.monotonic() + 60
        while httpx.get(srv.url + "/ready").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)  # the catch-up ingests the folder (nothing was ingested before)
        assert httpx.get(srv.url + "/query", params={"q": "alpha backups"}).json()["hits"][0]["doc_id"] == "alpha"
        (root / "docs" / "zeta.md").write_text("# Zeta\n\n## Walrus\n\nZeta walruses migrate each spring.\n")
        (root / "docs" / "beta.md").unlink()
        found: list[str] = []
        while time.monotonic() < deadline:
            found = [h["doc_id"] for h in httpx.get(srv.url + "/query", params={"q": "walruses tokens"}).json()["hits"]]
            if found[:1] == ["zeta"] and "beta" not in found:
                break
            time.sleep(0.2)
        assert found[:1] == ["zeta"] and "beta" not in found
        watcher = httpx.get(srv.url + "/status").json()["watcher"]
        assert watcher["running"] and watcher["batches"] >= 1
        assert f"watch: catch-up {root / 'docs'}; added 3, updated 0" in srv.log.read_text()
    finally:
        assert srv.stop() == 0
    # Restarted after an edit: the catch-up syncs that file alone, within milliseconds of the
    # watch being in place, and its line is logged all the same.
    (root / "docs" / "zeta.md").write_text("# Zeta\n\n## Walrus\n\nZeta walruses winter in the north.\n")
    again = Server(root, args=("--watch", str(root / "docs"))).start()
    try:
        deadline = time.monotonic() + 30
        while "watch: catch-up" not in again.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert f"watch: catch-up {root / 'docs'}; added 0, updated 1, unchanged 2, deleted 0" in again.log.read_text()
    finally:
        assert again.stop() == 0


@pytest.mark.slow
def test_no_input_yields_a_500_and_responses_match_the_schema(server: Server) -> None:
    """schemathesis generates requests from /openapi.json for every operation; each response
    must not be a 5xx and must match the documented status codes and bodies."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    # Excluded: "schema-valid data is accepted". Filters are free-form JSON whose meaning (known
    # operators, key names) no JSON schema states; a bad one is rightly a 400 with its reason.

    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/query", "/documents", "/documents/{doc_id}", "/status", "/health"}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            case.call_and_validate(base_url=server.url, excluded_checks=[positive_data_acceptance])

        check()
