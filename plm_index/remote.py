"""A client for a running `plm serve`, standard library only (no model, no HTTP package):
what `plm query --server` and `plm status --server` use. Every failure is one line."""

from __future__ import annotations

import json
import math
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from plm_core.errors import PlmUserError

TIMEOUT_S = 60.0  # PLM_SERVER_TIMEOUT overrides it


# Whatever follows "Bearer" in a message is a key (e.g. a header value quoted by an error).
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)


def scrub(message: str, *secrets: str | None) -> str:
    """The message with whatever follows "Bearer", and each of `secrets` wherever it stands,
    masked: the last guard before a message reaches a log or a terminal."""
    message = _BEARER.sub(r"\1***", message)
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    return message


def bearer_key(env: str) -> str | None:
    """The API key in environment variable `env` (None when unset or empty), surrounding
    whitespace (a file's trailing newline) removed; PlmUserError naming the variable, never
    the value, when what is left cannot be sent as a header. What `plm serve`, its client and
    `llm_rewrite` read their keys with."""
    key = (os.environ.get(env) or "").strip()
    if key and not (key.isascii() and key.isprintable() and not any(ch.isspace() for ch in key)):
        raise PlmUserError(
            f"the API key in ${env} holds a space, a control or a non-ASCII character, so it cannot be sent "
            "as a header; export the key alone"
        )
    return key or None


class RedirectRefused(PlmUserError):
    """A server answered with a redirect, which a client holding a key does not follow."""


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        target = origin(urllib.parse.urljoin(req.full_url, newurl))
        raise RedirectRefused(f"{origin(req.full_url)} answered {code} with a redirect to {target}")


NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)
"""An opener that follows no redirect (RedirectRefused instead): urllib would send the
Authorization header on to wherever a Location points, so a key goes to the origin it was
configured for only. The --server client and llm_rewrite open every request with it."""


def origin(url: str) -> str:
    """scheme://host[:port] of a URL, without what may be a user name and password."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def server_url(explicit: str | None) -> str | None:
    """The server to ask: --server, else PLM_SERVER, else None (use a local index)."""
    url = (explicit or os.environ.get("PLM_SERVER") or "").strip().rstrip("/")
    if not url:
        return None
    # Messages name the URL without what may be a password (user:password@host).
    shown = re.sub(r"//[^/?#]*@", "//***@", url)
    if not url.startswith(("http://", "https://")):
        raise PlmUserError(f"--server takes an http:// or https:// URL, got {shown!r}")
    if "@" in re.split(r"[/?#]", url.split("//", 1)[1], maxsplit=1)[0]:
        raise PlmUserError(
            f"--server {shown}: a user name or password in the URL is not sent; a server started with PLM_API_KEY "
            "takes its key from PLM_API_KEY here too (export PLM_API_KEY=...)"
        )
    try:  # a malformed host or port fails here, as one line, not deep in urllib
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as err:
        raise PlmUserError(f"--server is not a valid URL ({err}); give e.g. http://127.0.0.1:8000") from None
    if not parts.hostname:
        raise PlmUserError("--server has no host; give e.g. http://127.0.0.1:8000")
    return url


def timeout_s() -> float:
    """PLM_SERVER_TIMEOUT as a positive, finite number of seconds (default TIMEOUT_S)."""
    given = (os.environ.get("PLM_SERVER_TIMEOUT") or "").strip()
    if not given:
        return TIMEOUT_S
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise PlmUserError(f"PLM_SERVER_TIMEOUT must be a positive number of seconds (e.g. 60), got {given[:40]!r}")
    return value


def call(url: str, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
    """JSON from the server, or a PlmUserError saying what went wrong and what to do."""
    if timeout is None:
        timeout = timeout_s()
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if key := bearer_key("PLM_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url + path, data=data, headers=headers, method=method)
    try:
        with NO_REDIRECTS.open(request, timeout=timeout) as response:
            raw = response.read()
    except RedirectRefused as err:
        raise PlmUserError(
            f"{err}; the client does not follow redirects (the API key goes to the server named only): "
            "pass the address that answers as --server"
        ) from None
    except urllib.error.HTTPError as err:
        raise PlmUserError(_http_error(url, err)) from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(err, TimeoutError) or isinstance(reason, TimeoutError):
            raise PlmUserError(f"the plm server at {url} did not answer within {timeout:g}s") from None
        raise PlmUserError(f"cannot reach a plm server at {url}: {reason} (is `plm serve` running there?)") from None
    try:
        return json.loads(raw)
    except ValueError:
        raise PlmUserError(f"{url}{path} did not answer with JSON: is it a plm server?") from None


def _http_error(url: str, err: urllib.error.HTTPError) -> str:
    try:
        message = json.loads(err.read()).get("error") or ""
    except (ValueError, AttributeError, OSError):
        message = ""
    # A server (or a proxy before it) may quote the request's Authorization header back.
    message = scrub(str(message), bearer_key("PLM_API_KEY"))
    if err.code == 401:
        state = "set PLM_API_KEY to the server's key" if not os.environ.get("PLM_API_KEY") else "check PLM_API_KEY"
        return f"the plm server at {url} refused the request: {message or 'wrong or missing API key'} ({state})"
    if message and err.code < 500:
        return message
    return f"the plm server at {url} answered {err.code} {err.reason}{': ' + message if message else ''}"


def wait_ready(url: str, seconds: float) -> None:
    """Poll `GET /ready` until the server answers 200, for at most `seconds`: a client started
    together with `plm serve` (one pasted block, a container) waits instead of failing on
    `Connection refused` while the server loads its model and index."""
    import time

    deadline = time.monotonic() + seconds
    last = "no answer"
    while True:
        try:
            call(url, "GET", "/ready", timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            return
        except PlmUserError as err:
            last = str(err)
            if "refused the request" in last:  # a wrong API key does not get better by waiting
                raise
        if time.monotonic() >= deadline:
            raise PlmUserError(f"the plm server at {url} was not ready within {seconds:g}s ({last})")
        time.sleep(0.2)
