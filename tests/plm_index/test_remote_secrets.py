"""`plm query --server`, `plm status --server` and `--wait` never print the API key, even
when the server (or a proxy before it) quotes the request's Authorization header back in its
error (issue 45 C8). The server is a real one on 127.0.0.1, started and stopped here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEY = "s3cr3t-KEY-0123456789"


class Echoing(BaseHTTPRequestHandler):
    """Answers every request with an error that quotes its Authorization header."""

    def do_GET(self) -> None:
        header = self.headers.get("Authorization", "")
        status, error = {
            "/query": (400, f"bad request: header Authorization: {header}"),
            "/ready": (503, f"not ready; you sent {header.split(' ', 1)[-1]}"),
            "/status": (500, f"upstream said: {header}"),
        }.get(self.path.split("?")[0], (404, f"no such path ({header})"))
        body = json.dumps({"error": error}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # `plm query --server` posts its query

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echoing)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    "args",
    [("query", "what is our RPO?"), ("status",), ("query", "what is our RPO?", "--wait", "1")],
    ids=["query", "status", "wait"],
)
def test_an_error_that_quotes_the_key_never_prints_it(server: str, args: tuple[str, ...]) -> None:
    env = {**os.environ, "PLM_API_KEY": KEY, "PLM_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "plm_index.cli", *args, "--server", server]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert res.returncode != 0
    assert KEY not in res.stdout + res.stderr, res.stderr
    assert "***" in res.stderr and "Traceback" not in res.stderr
