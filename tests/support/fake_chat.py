"""A real HTTP server on 127.0.0.1 that answers like the OpenAI chat API (and like a broken
one: slow, trickling, 500, 401, malformed, a redirect), for the tests of the stages that ask an
LLM (`llm_rewrite`, the `llm` query generator). `tests/conftest.py` puts this folder on
sys.path: `from fake_chat import FakeChatAPI, serve`. Nothing here touches the network."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeChatAPI:
    """What the handler answers (`mode`) and every request it received."""

    def __init__(self) -> None:
        self.mode = "rewrite"
        self.content: str | None = None  # answer exactly this (modes rewrite and list)
        self.reply: Callable[[str], str] | None = None  # else answer reply(the user message), if set
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()  # ends a slow answer early when the test is over
        self.url = ""
        self.redirect_to = ""  # mode "redirect": answer 302 with this Location


def query_in(message: str) -> str:
    """The user's query inside a rendered prompt (the default ones end with "Query: ...")."""
    return message.rsplit("Query: ", 1)[-1]


class Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's signature
        pass

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - a redirected POST arrives as a GET
        self.server.api.requests.append({"path": self.path, "headers": dict(self.headers), "body": None})
        self._send(404, b"{}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        api: FakeChatAPI = self.server.api
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        api.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if api.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", api.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        user = body["messages"][-1]["content"]
        if api.mode == "slow":
            api.release.wait(5)
        if api.mode == "trickle":  # headers at once, then a byte now and then: no socket timeout fires
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            while not api.release.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
            return None
        if api.mode == "500":
            return self._send(500, json.dumps({"error": {"message": "model overloaded"}}).encode())
        if api.mode == "401":  # some servers quote the key they refused
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            return self._send(401, json.dumps({"error": {"message": f"bad key {key}"}}).encode())
        if api.mode == "malformed":
            return self._send(200, b'{"choices": [{"message": {"content": "half')
        if api.mode == "no_choices":
            return self._send(200, json.dumps({"object": "chat.completion", "choices": []}).encode())
        if api.mode == "null_content":
            return self._send(200, json.dumps({"choices": [{"message": {"content": None}}]}).encode())
        if api.content is not None:
            content = api.content
        elif api.reply is not None:
            content = api.reply(user)
        else:
            content = f"{query_in(user)} rewritten"
        reply = {"object": "chat.completion", "model": body["model"], "choices": [{"message": {"content": content}}]}
        self._send(200, json.dumps(reply).encode())


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a slow answer written after the client gave up: expected, not worth a traceback


def serve() -> Iterator[FakeChatAPI]:
    """A fresh server on a free port of 127.0.0.1 (its state's `url`), shut down when resumed:
    `yield from serve()` in a fixture."""
    state = FakeChatAPI()
    server = QuietServer(("127.0.0.1", 0), Handler)
    server.api = state  # type: ignore[attr-defined]
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()
    thread.join(5)
