"""A client for a running `plm serve`, standard library only (no model, no HTTP package):
what `plm query --server` and `plm status --server` use. Every failure is one line."""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from plm_core.errors import PlmUserError

TIMEOUT_S = 60.0  # PLM_SERVER_TIMEOUT overrides it


def server_url(explicit: str | None) -> str | None:
    """The server to ask: --server, else PLM_SERVER, else None (use a local index)."""
    url = (explicit or os.environ.get("PLM_SERVER") or "").strip().rstrip("/")
    if url and not url.startswith(("http://", "https://")):
        raise PlmUserError(f"--server takes an http:// or https:// URL, got {url!r}")
    if url:
        try:  # a malformed host or port fails here, as one line, not deep in urllib
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - parsing the port is the check
        except ValueError as err:
            raise PlmUserError(f"--server is not a valid URL ({err}); give e.g. http://127.0.0.1:8000") from None
        if not parts.hostname:
            raise PlmUserError("--server has no host; give e.g. http://127.0.0.1:8000")
    return url or None


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
