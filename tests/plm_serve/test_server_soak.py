"""`plm serve` under racing writes, deletes and queries, as a real process on 127.0.0.1:
no answer is a 5xx and no query waits more than a few seconds. Bounded: about 15 s of
traffic, every request with a client timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from serve_helpers import server_helpers

pytestmark = pytest.mark.slow  # seconds each: the full suite and CI run them

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("bm25s")

_helpers = server_helpers()
Server, make_root, plm = _helpers.Server, _helpers.make_root, _helpers.plm

SOAK_S = 15.0
QUERY_LIMIT_S = 5.0  # a query answers within this, whatever the writers do


def test_racing_writers_deleter_and_queriers_get_no_5xx_and_no_stalled_query(tmp_path: Path) -> None:
    # One reader: every query but one waits for it, so a reload that swaps generations while
    # a query waits is frequent (the bug: the query kept waiting on the closed generation's
    # reader queue, and after 60 s got 503 "no reader was free").
    root = make_root(tmp_path)
    srv = Server(root, args=("--readers", "1"))
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    srv.start()
    problems: list[str] = []
    query_seconds: list[float] = []
    counts = {"write": 0, "delete": 0, "query": 0}
    lock = threading.Lock()
    end = time.monotonic() + SOAK_S

    def loop(kind: str, request: Callable[[httpx.Client, int], httpx.Response], limit_s: float) -> None:
        with httpx.Client(base_url=srv.url, timeout=limit_s) as client:
            n = 0
            while time.monotonic() < end and len(problems) < 20:
                n += 1
                start = time.monotonic()
                try:
                    response = request(client, n)
                except httpx.HTTPError as err:  # a timeout: the request stalled
                    with lock:
                        problems.append(f"{kind} {n}: {type(err).__name__} after {time.monotonic() - start:.1f}s")
                    continue
                took = time.monotonic() - start
                with lock:
                    counts[kind] += 1
                    if kind == "query":
                        query_seconds.append(took)
                    if response.status_code >= 500 or response.status_code not in (200, 404):
                        problems.append(f"{kind} {n}: {response.status_code} {response.text[:200]}")

    def write(writer: int) -> Callable[[httpx.Client, int], httpx.Response]:
        def post(client: httpx.Client, n: int) -> httpx.Response:
            record = {"id": "soak", "text": f"The soak walrus ledger, writer {writer}, edit {n}.", "team": "storage"}
            return client.post("/documents", json={"records": [record]})

        return post

    def delete(client: httpx.Client, n: int) -> httpx.Response:
        return client.delete("/documents/soak")  # 404 when it is already gone

    def query(client: httpx.Client, n: int) -> httpx.Response:
        if n % 10 == 0:
            return client.get("/documents/soak")  # through a reader too; 404 while deleted
        if n % 10 == 5:
            return client.get("/status")
        return client.get("/query", params={"q": "walrus ledger backups", "k": 3})

    loops = [("write", write(1), 60.0), ("write", write(2), 60.0), ("delete", delete, 60.0)]
    loops += [("query", query, QUERY_LIMIT_S)] * 3
    threads = [threading.Thread(target=loop, args=spec, daemon=True) for spec in loops]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SOAK_S + 70)
        assert not any(thread.is_alive() for thread in threads)
        assert problems == [], (problems, counts)
        assert counts["write"] >= 10 and counts["delete"] >= 5 and counts["query"] >= 100, counts
        assert max(query_seconds) < QUERY_LIMIT_S
        final = httpx.get(srv.url + "/query", params={"q": "alpha backups", "k": 1}, timeout=30)
        assert final.status_code == 200 and final.json()["hits"][0]["doc_id"] == "alpha"
    finally:
        assert srv.stop() == 0, srv.log.read_text()[-3000:]
    assert "Traceback" not in srv.log.read_text()
