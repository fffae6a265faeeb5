"""What a request to `plm serve` must pass before a route runs, and the record every request
leaves: two ASGI middlewares inside the app (plm_serve/http_guard.py's Host check and security
headers wrap everything, outside them).

`Guard` refuses, in this order: a request without the API key (with `PLM_API_KEY` set; `GET
/health` and the two pages need none: the pages hold no data and ask for the key), a body
whose declared `Content-Length` is over the limit (413), and a URL whose %-escapes are not
UTF-8 (400). It counts, times and logs every request (the `plm.serve.access` logger, one JSON
line each), refused or not. `BodyLimit` counts a body while it is read, so a chunked body
(no length to check first) is never held whole. Plain ASGI, not `@app.middleware("http")`:
that wrapper cost about a millisecond a request.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Collection
from typing import Any

from starlette.exceptions import HTTPException

from plm_serve.http_errors import error, shortened
from plm_serve.metrics import ServerMetrics

access = logging.getLogger("plm.serve.access")


def too_large(max_body_mb: float) -> str:
    return f"the request body is larger than {max_body_mb:g} MB"


class BodyTooLarge(HTTPException):
    """The body read so far is over the limit (an HTTPException, so FastAPI's body
    parsing lets it through rather than calling it a parse error)."""


class BodyLimit:
    """ASGI middleware: the body is counted while it is received, by whoever reads it,
    and BodyTooLarge raised once it passes the limit, so a chunked body (no length to
    check first) is never held whole."""

    def __init__(self, app: Any, max_body_mb: float) -> None:
        self.app, self.max_body_mb = app, max_body_mb
        self.limit = int(max_body_mb * 1024 * 1024)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        read = 0

        async def counted() -> Any:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise BodyTooLarge(413, too_large(self.max_body_mb))
            return message

        return await self.app(scope, counted, send)


class Guard:
    """ASGI middleware, outside the app's own: the API key, a declared body over the
    limit and a URL whose %-escapes are not UTF-8 are refused before the app runs (in
    that order), and every request is counted, timed and logged."""

    def __init__(
        self,
        app: Any,
        metrics: ServerMetrics,
        api_key: str | None,
        max_body_mb: float,
        open_paths: Collection[str],
    ) -> None:
        self.app, self.metrics, self.api_key, self.max_body_mb = app, metrics, api_key, max_body_mb
        self.limit = int(max_body_mb * 1024 * 1024)
        self.open_paths = frozenset(open_paths)  # answered without the key

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def sent(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            refused = self.refusal(scope)
            await (refused or self.app)(scope, receive, sent)
        finally:
            elapsed = time.perf_counter() - start
            self.metrics.request(getattr(scope.get("route"), "path", "(unmatched)"), status, elapsed)
            client = scope.get("client")
            access.info(
                json.dumps(
                    {
                        "method": scope["method"],
                        "path": shortened(scope["path"]),
                        "status": status,
                        "ms": round(1000 * elapsed, 2),
                        "client": client[0] if client else None,
                    }
                )
            )

    def refusal(self, scope: Any) -> Any:
        """The error response that refuses this request before the app runs, or None."""
        from starlette.datastructures import Headers

        headers = Headers(scope=scope)
        if self.api_key and scope["path"] not in self.open_paths:
            given = headers.get("authorization", "")
            expected = f"Bearer {self.api_key}"
            if not hmac.compare_digest(given.encode(), expected.encode()):
                return error(401, "missing or wrong API key: send `Authorization: Bearer <PLM_API_KEY>`")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return error(413, too_large(self.max_body_mb))  # a chunked body is counted as it is read (BodyLimit)
        # Starlette decodes %-escapes that are not UTF-8 to U+FFFD, so a bad query or id
        # would silently become another one: refuse it instead.
        if not_utf8(scope.get("raw_path") or b"", scope.get("query_string") or b""):
            return error(400, "the URL holds %-escapes that are not UTF-8; encode it as UTF-8")
        return None


def not_utf8(*raw: bytes) -> bool:
    """Whether any of these raw URL parts holds %-escapes (or bytes) that are not UTF-8."""
    from urllib.parse import unquote_to_bytes

    try:
        for part in raw:
            unquote_to_bytes(part.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
