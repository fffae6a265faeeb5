"""A client for a running `plm serve`, standard library only (no model, no HTTP package):
what `plm query --server` and `plm status --server` use. Every failure is one line."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from plm_core.errors import PlmUserError

TIMEOUT_S = 60.0  # PLM_SERVER_TIMEOUT overrides it


def server_url(explicit: str | None) -> str | None:
    """The server to ask: --server, else PLM_SERVER, else None (use a local index)."""
    url = (explicit or os.environ.get("PLM_SERVER") or "").strip().rstrip("/")
    if url and not url.startswith(("http://", "https://")):
        raise PlmUserError(f"--server takes an http:// or https:// URL, got {url!r}")
    return url or None


def call(url: str, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
    """JSON from the server, or a PlmUserError saying what went wrong and what to do."""
    if timeout is None:
        try:
            timeout = float(os.environ.get("PLM_SERVER_TIMEOUT") or TIMEOUT_S)
        except ValueError:
            raise PlmUserError("PLM_SERVER_TIMEOUT must be a number of seconds") from None
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    if key := os.environ.get("PLM_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - the user's URL
            raw = response.read()
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
