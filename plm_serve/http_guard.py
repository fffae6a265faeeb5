"""Who may talk to `plm serve` through a browser: the Host allowlist and the security headers.

A web page can point a DNS name it owns at 127.0.0.1 (DNS rebinding) and then read and
write a local server as if it were its own origin; the browser sends that name in `Host`.
So every request, on every route and whether or not `PLM_API_KEY` is set, must name this
server in `Host`: `localhost`, `127.0.0.1`, `[::1]`, the address it is bound to, or a name
given with `--allow-host` (`PLM_ALLOW_HOSTS`). Bound to every address (`--host 0.0.0.0` or
`::`), any IP address is a Host too (no page can rebind an IP address), and so is this
machine's host name; other names must be allowed by hand. The port is not checked: a page
cannot choose the Host name, whatever its port, and behind a port mapping (`docker -p
18000:8000`) the port a client sends is not the one bound. `--allow-host '*'` turns the
check off (for a proxy that checks Host itself).

A write (POST, PUT, PATCH, DELETE) sent by a page of another origin (its `Origin` header
is not this server's own `scheme://Host`, nor a `--cors-origin`; `null` included) is
refused as well.

Every response carries `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`,
`Referrer-Policy: no-referrer` and a `Content-Security-Policy`: the API's allows nothing
to run; a page's allows its own inline script (by hash) and its own origin, no other.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from plm_core.errors import PlmUserError

log = logging.getLogger("plm.serve")

LOOPBACK = ("localhost", "127.0.0.1", "::1")
WILDCARD = ("0.0.0.0", "::", "")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::(?P<port>[0-9]{1,5}))?")
_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?")
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def page_csp(html: str) -> str:
    """The Content-Security-Policy for one of the static pages: its own inline scripts (by
    their SHA-256, so no other script can run, injected or not), its inline style, and
    requests to its own origin only; it may not be framed."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in re.findall(r"<script>(.*?)</script>", re.sub(r"<!--.*?-->", "", html, flags=re.S), flags=re.S)
    )
    return (
        f"default-src 'self'; script-src {hashes or chr(39) + 'none' + chr(39)}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )


def _normal(name: str) -> str:
    """A host name or IP address as compared: lowercase, no trailing dot, an IP address in
    its canonical form (`[0:0::1]` is `::1`)."""
    name = name.strip().lower().removesuffix(".")
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowlist:
    """The Host names a server answers to; see the module docstring."""

    def __init__(self, bound: str, extra: Iterable[str] = ()) -> None:
        extra = [value.strip() for value in extra if value.strip()]
        self.any_host = "*" in extra
        self.any_ip = bound.strip("[]") in WILDCARD
        names = [*LOOPBACK]
        if not self.any_ip:
            names.append(bound)
        else:
            names.append(socket.gethostname())
        for value in extra:
            if value != "*":
                names.append(self.checked_name(value))
        self.names = tuple(dict.fromkeys(_normal(n) for n in names))

    @staticmethod
    def checked_name(value: str) -> str:
        """A name given to --allow-host, or PlmUserError saying what is wrong with it."""
        bare = value.strip().lower()
        if bare.startswith("[") and bare.endswith("]"):
            bare = bare[1:-1]
        if _is_ip(bare):
            return bare
        if ":" in bare or "/" in bare:
            raise PlmUserError(
                f"--allow-host {value!r}: give a host name or IP address alone, without a scheme or port "
                "(ports are not checked), e.g. --allow-host plm.example.com"
            )
        if not _NAME.fullmatch(bare):
            raise PlmUserError(f"--allow-host {value!r} is not a host name; e.g. --allow-host plm.example.com")
        return bare

    def allows(self, host: str) -> bool:
        """Whether a `Host` header value (`name`, `name:port`, `[v6]:port`) names this server."""
        if self.any_host:
            return True
        match = _HOST.fullmatch(host.strip().lower())
        if match is None or (match["port"] is not None and not 0 < int(match["port"]) < 65536):
            return False
        if match["v6"] is not None:
            if not _is_ip(match["v6"]) or ipaddress.ip_address(match["v6"]).version != 6:
                return False
            name = _normal(match["v6"])
        else:
            if not _NAME.fullmatch(match["name"]):
                return False  # an empty label: `a..b`, `.a`
            name = _normal(match["name"])
        return name in self.names or (self.any_ip and _is_ip(name))

    def refusal(self, host: str | None) -> str:
        shown = ", ".join(f"[{n}]" if ":" in n else n for n in self.names)
        if self.any_ip:
            shown += ", any IP address"
        what = "the request has no Host header" if host is None else f"Host {host[:100]!r} is not a name of this server"
        return (
            f"{what} (a check against DNS rebinding); allowed: {shown}; "
            "to allow another name, start plm serve with --allow-host NAME (or PLM_ALLOW_HOSTS='NAME ...')"
        )


def _origin_host(origin: str) -> str | None:
    try:
        parts = urlsplit(origin)
        return parts.netloc if parts.scheme in ("http", "https") and parts.netloc else None
    except ValueError:
        return None


class HostGuard:
    """ASGI wrapper (outside everything else, error pages included): the Host check, the
    cross-origin write check, and the security headers on every response."""

    def __init__(self, app: Any, allowlist: HostAllowlist, cors_origins: Iterable[str] = ()) -> None:
        self.app, self.allowlist, self.cors_origins = app, allowlist, frozenset(cors_origins)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        hosts = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"]
        if len(hosts) != 1 or not self.allowlist.allows(hosts[0]):
            message = (
                "the request has more than one Host header; send one"
                if len(hosts) > 1
                else self.allowlist.refusal(hosts[0] if hosts else None)
            )
            log.info("refused a request: %s", message)
            return await self._error(send, 421 if hosts else 400, message)
        if scope.get("method") in WRITES:
            origin = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"origin"), None)
            if origin is not None and origin not in self.cors_origins:
                # Same origin: the page's scheme://host:port names what Host names (a page of
                # this server). Another port of localhost is another site.
                if (_origin_host(origin) or "").lower() != hosts[0].strip().lower():
                    message = (
                        f"a write from the page at origin {origin[:100]!r} is refused: it is not this server; "
                        "to allow a site to write, start plm serve with --cors-origin ORIGIN"
                    )
                    return await self._error(send, 403, message)

        async def secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {k.lower() for k, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", API_CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        return await self.app(scope, receive, secured)

    async def _error(self, send: Any, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
        headers.append((b"content-security-policy", API_CSP.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
