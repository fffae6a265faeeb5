"""`plm serve` and its client against bad input and damaged state, as real processes on
127.0.0.1: records taken as the json_records loader takes them, ids with `/`, URLs that
are not UTF-8, bad client settings, a damaged build, and a Postgres that restarts."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")

_spec = importlib.util.spec_from_file_location("plm_serve_test_server", Path(__file__).with_name("test_server.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _helpers
_spec.loader.exec_module(_helpers)
Server, make_root, plm, free_port = _helpers.Server, _helpers.make_root, _helpers.plm, _helpers.free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = make_root(tmp_path_factory.mktemp("faults"))
    srv = Server(root)
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    srv.start()
    yield srv
    assert srv.stop() == 0, srv.log.read_text()[-3000:]


def test_posted_records_are_taken_as_the_json_records_loader_takes_them(server: Server) -> None:
    records = [
        {"id": "docs/ops/zeta.md", "title": "Zeta", "text": "Zeta quokkas nest under the bridge.", "team": "storage"},
        {"id": "nul", "text": "a\u0000b"},
    ]
    added = httpx.post(server.url + "/documents", json={"records": records}, timeout=60).json()
    assert added["added"] == ["docs/ops/zeta.md"]
    (failed,) = added["failed"]
    assert failed["doc_id"] == "nul" and "NUL" in failed["error"] and failed["path"] == "record 2"
    body = {"text": "quokkas", "filters": {"team": "storage"}}
    (hit,) = [h for h in httpx.post(server.url + "/query", json=body).json()["hits"] if h["doc_id"].startswith("docs/")]
    assert hit["metadata"]["team"] == "storage"  # a top-level field is metadata, as in a .jsonl file
    gone = httpx.delete(server.url + "/documents/docs/ops/zeta.md", timeout=60)
    assert gone.status_code == 200 and gone.json()["deleted"] == ["docs/ops/zeta.md"]
    assert httpx.delete(server.url + "/documents/docs/ops/zeta.md").status_code == 404


@pytest.mark.parametrize("path", ["/query?q=%FF%FE", "/query?q=ok&k=%C3", "/documents/%FF"])
def test_a_url_that_is_not_utf8_is_a_400(server: Server, path: str) -> None:
    method = "DELETE" if path.startswith("/documents") else "GET"
    response = httpx.request(method, server.url + path)
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
    assert httpx.get(server.url + "/query", params={"q": "café"}).status_code == 200


@pytest.mark.parametrize(
    ("env", "url", "message"),
    [
        ({}, "http://[::1", "--server is not a valid URL"),
        ({}, "http://127.0.0.1:99999", "--server is not a valid URL"),
        ({}, "http://:8000", "--server has no host"),
        ({"PLM_SERVER_TIMEOUT": "-1"}, "", "PLM_SERVER_TIMEOUT must be a positive number of seconds"),
        ({"PLM_SERVER_TIMEOUT": "nan"}, "", "got 'nan'"),
        ({"PLM_SERVER_TIMEOUT": "inf"}, "", "got 'inf'"),
        ({"PLM_SERVER_TIMEOUT": "0"}, "", "got '0'"),
        ({"PLM_SERVER_TIMEOUT": "soon"}, "", "got 'soon'"),
    ],
)
def test_bad_client_settings_are_one_line(tmp_path: Path, env: dict[str, str], url: str, message: str) -> None:
    server = url or f"http://127.0.0.1:{free_port()}"
    base = {k: v for k, v in Server(tmp_path).env.items() if k not in ("PLM_SERVER_TIMEOUT",)}
    res = plm("query", "x", "--server", server, env={**base, **env})
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1
