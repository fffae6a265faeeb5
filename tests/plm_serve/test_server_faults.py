"""`plm serve` and its client against bad input and damaged state, as real processes on
127.0.0.1: records taken as the json_records loader takes them, ids with `/`, URLs that
are not UTF-8, bad client settings, a damaged build, and a Postgres that restarts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from plm_needs import needs
from serve_helpers import server_helpers

httpx = pytest.importorskip("httpx")
pytestmark = needs("fastapi", "bm25s")

_helpers = server_helpers()
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
    refused = httpx.post(server.url + "/documents", json={"records": records}, timeout=60)
    assert refused.status_code == 422, refused.text
    (failed,) = refused.json()["failed"]
    assert failed["doc_id"] == "nul" and "NUL" in failed["error"] and failed["path"] == "record 2"
    added = httpx.post(server.url + "/documents", json={"records": records[:1]}, timeout=60).json()
    assert added["added"] == ["docs/ops/zeta.md"] and added["failed"] == []
    body = {"text": "quokkas", "filters": {"team": "storage"}}
    (hit,) = [h for h in httpx.post(server.url + "/query", json=body).json()["hits"] if h["doc_id"].startswith("docs/")]
    assert hit["metadata"]["team"] == "storage"  # a top-level field is metadata, as in a .jsonl file
    gone = httpx.delete(server.url + "/documents/docs/ops/zeta.md", timeout=60)
    assert gone.status_code == 200 and gone.json()["deleted"] == ["docs/ops/zeta.md"]
    assert httpx.delete(server.url + "/documents/docs/ops/zeta.md").status_code == 404


def test_a_posted_metadata_object_is_the_documents_metadata_and_its_filter_finds_it(server: Server) -> None:
    # The shape the API took before: {"metadata": {...}}. It was stored as
    # metadata.metadata.team, and a filter on team found nothing, without a word.
    record = {"id": "meta-obj", "text": "Meta ocelots prowl the server room.", "metadata": {"team": "ops", "tier": 2}}
    added = httpx.post(server.url + "/documents", json={"records": [record]}, timeout=60)
    assert added.status_code == 200 and added.json()["added"] == ["meta-obj"], added.text
    try:
        body = {"text": "ocelots", "filters": {"team": "ops", "tier": {"gte": 2}}}
        hits = httpx.post(server.url + "/query", json=body).json()["hits"]
        assert [h["doc_id"] for h in hits] == ["meta-obj"]
        assert hits[0]["metadata"]["team"] == "ops" and hits[0]["metadata"]["tier"] == 2
        assert httpx.get(server.url + "/documents/meta-obj").json()["metadata"] == {"team": "ops", "tier": 2}
        clash = {"id": "meta-clash", "text": "Clashing ocelots.", "team": "ops", "metadata": {"team": "dev"}}
        refused = httpx.post(server.url + "/documents", json={"records": [clash]}, timeout=60)
        assert refused.status_code == 422 and "metadata key 'team' is given twice" in refused.text, refused.text
        assert httpx.get(server.url + "/documents/meta-clash").status_code == 404
    finally:
        httpx.delete(server.url + "/documents/meta-obj", timeout=60)


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


@pytest.mark.slow
def test_a_damaged_build_is_not_ready_and_queries_say_why(tmp_path: Path) -> None:
    import os

    root = make_root(tmp_path)
    srv = Server(root)
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    (build,) = [p for p in (root / "data").glob("serve_test/bm25s-*/segments/*") if p.is_dir()]
    for file in build.glob("*.npy"):  # bit rot: same size, mtime and inode
        before = file.stat()
        with file.open("r+b") as fh:
            fh.seek(before.st_size - 16)
            fh.write(b"\xff" * 16)
        os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))
    srv.start()
    try:
        ready = httpx.get(srv.url + "/ready")
        assert ready.status_code == 503 and "corrupt" in ready.json()["error"]
        for response in (
            httpx.get(srv.url + "/query", params={"q": "alpha"}),
            httpx.post(srv.url + "/query", json={"text": "alpha"}),
        ):
            assert response.status_code == 503, response.text
            assert "corrupt" in response.json()["error"] and "plm index rebuild" in response.json()["error"]
        assert plm("index", "rebuild", "--config", str(srv.config), env=srv.env).returncode == 0
    finally:
        assert srv.stop() == 0, srv.log.read_text()[-3000:]
    assert "Traceback" not in srv.log.read_text()


@pytest.mark.postgres
@pytest.mark.slow
def test_serve_reconnects_after_a_postgres_restart_and_ready_tells_the_truth(tmp_path: Path) -> None:
    import shutil
    import tempfile
    import time
    import warnings

    pgserver = pytest.importorskip("pgserver")
    pytest.importorskip("psycopg")
    from pgserver._commands import pg_ctl

    folder = Path(tempfile.mkdtemp(prefix="plm-pgr-"))  # short: the socket path must fit in 107 bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pg = pgserver.get_server(folder, cleanup_mode="stop")
        except Exception as err:  # noqa: BLE001 - any start failure is a skip with its reason
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip(f"the pgserver Postgres cannot start here: {err}")
    root = make_root(tmp_path)
    srv = Server(root, args=("--create",))  # started before the ingest: nothing served yet
    srv.config.write_text(srv.config.read_text().replace('use = "sqlite"', f'use = "postgres"\ndsn = "{pg.get_uri()}"'))
    srv.start()
    try:
        assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0

        def wait_for(status: int, path: str = "/ready", seconds: float = 60) -> httpx.Response:
            deadline = time.monotonic() + seconds
            while True:
                response = httpx.get(srv.url + path, timeout=30)
                if response.status_code == status or time.monotonic() > deadline:
                    return response
                time.sleep(0.3)

        first = wait_for(200)
        assert first.status_code == 200, first.text + srv.log.read_text()[-3000:]
        assert httpx.get(srv.url + "/query", params={"q": "alpha backups"}).json()["hits"][0]["doc_id"] == "alpha"

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=folder, user=pg.system_user)
        down = wait_for(503)
        assert down.status_code == 503 and "Postgres" in down.json()["error"], down.text
        query = httpx.get(srv.url + "/query", params={"q": "alpha backups"}, timeout=30)
        assert query.status_code == 503, query.text
        # A write while the store is down is a 503 (retry later), not a 400 (a bad request).
        record = {"id": "during", "text": "Written while Postgres is down: numbats."}
        refused = httpx.post(srv.url + "/documents", json={"records": [record]}, timeout=60)
        assert refused.status_code == 503 and "Postgres" in refused.json()["error"], refused.text

        pg.ensure_postgres_running()
        up = wait_for(200)
        assert up.status_code == 200, up.text + srv.log.read_text()[-3000:]
        hits = wait_for(200, "/query?q=alpha+backups").json()["hits"]
        assert hits[0]["doc_id"] == "alpha"
        record = {"id": "after", "text": "Written after the restart: wombats."}
        assert httpx.post(srv.url + "/documents", json={"records": [record]}, timeout=60).json()["added"] == ["after"]
    finally:
        rc = srv.stop()
        pg.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    log = srv.log.read_text()
    assert rc == 0 and "Traceback" not in log, log[-3000:]
