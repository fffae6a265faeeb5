"""The Host allowlist on its own: which `Host` values name the server, for each way it is
bound, and which `--allow-host` values are refused before the server starts."""

from __future__ import annotations

import socket

import pytest

from plm_core.errors import PlmUserError
from plm_serve.http_guard import HostAllowlist, page_csp

OWN = ["localhost", "localhost:8000", "LocalHost:8000", "localhost.:8000", "127.0.0.1:8000", "127.0.0.1"]
OWN += ["[::1]:8000", "[::1]", "[0:0:0:0:0:0:0:1]:8000", " localhost:8000 "]
FOREIGN = ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.evil.example", "::1"]
FOREIGN += ["localhost:8000@evil.example", "localhost..", ".localhost", "localhost:0", "localhost:65536", "local host"]
FOREIGN += ["2130706433", "127.1", "0x7f.0.0.1", "[::1", "[fe80::1%25eth0]:8000", "", "localhost:8000/x", "[evil]"]
FOREIGN += ["10.0.0.7:8000", "[::ffff:10.0.0.7]", "localhost:+80", "localhost:８０００"]


@pytest.mark.parametrize("host", OWN)
def test_a_loopback_bound_server_answers_its_own_names(host: str) -> None:
    assert HostAllowlist("127.0.0.1").allows(host)


@pytest.mark.parametrize("host", FOREIGN)
def test_a_loopback_bound_server_refuses_any_other_host(host: str) -> None:
    assert not HostAllowlist("127.0.0.1").allows(host)


def test_a_server_bound_to_every_address_answers_ip_addresses_and_its_machine_name() -> None:
    allowlist = HostAllowlist("0.0.0.0")
    for host in ("10.0.0.7:8000", "[2001:db8::7]:8000", "[::ffff:10.0.0.7]", "localhost:18000", socket.gethostname()):
        assert allowlist.allows(host), host
    for host in ("evil.example:8000", "2130706433", "127.0.0.1.evil.example"):  # a name can be rebound
        assert not allowlist.allows(host), host
    assert "any IP address" in allowlist.refusal("evil.example")


def test_allowed_names_are_added_and_star_turns_the_check_off() -> None:
    allowlist = HostAllowlist("192.168.1.5", ["plm.example.com", "[2001:DB8::1]", "Search.Internal."])
    for host in ("plm.example.com:443", "PLM.example.com", "192.168.1.5:8000", "[2001:db8::1]", "search.internal"):
        assert allowlist.allows(host), host
    assert not allowlist.allows("10.0.0.7") and not allowlist.allows("example.com")
    message = allowlist.refusal("example.com")
    assert "allowed: localhost, 127.0.0.1, [::1], 192.168.1.5, plm.example.com, [2001:db8::1]" in message
    assert HostAllowlist("127.0.0.1", ["*"]).allows("anything.example")


@pytest.mark.parametrize("value", ["http://plm.example.com", "plm.example.com:8000", "bad name", "a..b", "a/b"])
def test_a_bad_allow_host_value_is_refused_with_how_to_fix_it(value: str) -> None:
    with pytest.raises(PlmUserError, match="--allow-host") as err:
        HostAllowlist("127.0.0.1", [value])
    assert "e.g. --allow-host plm.example.com" in str(err.value)


def test_a_pages_policy_allows_its_own_script_only() -> None:
    html = "<!-- a comment naming <script> --><style>p{}</style><script>run()</script>"
    csp = page_csp(html)
    assert "script-src 'sha256-" in csp and csp.count("sha256-") == 1
    assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp
    assert page_csp("<p>no script</p>").startswith("default-src 'self'; script-src 'none'")
