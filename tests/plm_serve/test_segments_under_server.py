"""A BM25 segment changed on disk under a running `plm serve` (a real process on 127.0.0.1):
truncated in place, as `cp` or `rsync --inplace` over a live index does, or its bytes
overwritten in place. The server never dies of it (no SIGBUS from a memory map) and never
answers from the changed bytes: a query is a 503 with one line naming the segment and the
repair, `plm index stats` lists the damage, and `plm index rebuild` brings the answers back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from plm_needs import needs
from serve_helpers import server_helpers

httpx = pytest.importorskip("httpx")
pytestmark = [needs("fastapi", "bm25s"), pytest.mark.slow]

_helpers = server_helpers()
Server, make_root, plm = _helpers.Server, _helpers.make_root, _helpers.plm


def npy_data_at(path: Path) -> int:
    """Where a .npy file's array starts (after its header)."""
    import numpy as np

    with path.open("rb") as fh:
        np.lib.format.read_magic(fh)
        np.lib.format.read_array_header_1_0(fh)
        return fh.tell()


def truncate_in_place(path: Path) -> None:
    with path.open("r+b") as fh:  # the inode a reader maps, emptied: what `cp` does first
        fh.truncate(0)


def overwrite_in_place(path: Path, byte: int) -> None:
    """Same inode, same size, same header: the array's bytes replaced."""
    at, size = npy_data_at(path), path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(bytes([byte]) * (size - at))


CASES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "rows truncated": ("rows.npy", truncate_in_place),
    "indptr overwritten": ("indptr.npy", lambda p: overwrite_in_place(p, 0)),
    "rows overwritten": ("rows.npy", lambda p: overwrite_in_place(p, 0x7F)),
}


def wait_for(url: str, status: int, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        response = httpx.get(url, timeout=30)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.3)


@pytest.mark.parametrize("case", list(CASES))
def test_a_segment_changed_under_the_server_is_a_503_naming_it(tmp_path: Path, case: str) -> None:
    name, damage = CASES[case]
    root = make_root(tmp_path)
    srv = Server(root)
    assert plm("ingest", str(root / "docs"), "--config", str(srv.config), env=srv.env).returncode == 0
    (segment,) = [p for p in (root / "data").glob("serve_test/bm25s-*/segments/*") if p.is_dir()]
    srv.start()
    try:
        first = httpx.get(srv.url + "/query", params={"q": "alpha backups"}, timeout=30)
        assert first.status_code == 200 and first.json()["hits"][0]["doc_id"] == "alpha", first.text
        damage(segment / name)
        # Words no query met yet: their postings are read from the segment now.
        query = f"{srv.url}/query?q=gamma+mirrors+weekly"
        try:
            answer = httpx.get(query, timeout=30)
        except httpx.HTTPError as err:
            raise AssertionError(f"the server died: {err}\n{srv.log.read_text()[-3000:]}") from None
        assert answer.status_code == 503, answer.text
        line = answer.json()["error"]
        assert str(segment) in line and name in line and "plm index rebuild" in line and "\n" not in line, line
        assert httpx.get(srv.url + "/health", timeout=30).status_code == 200
        assert srv.proc.poll() is None

        stats = plm("index", "stats", "--config", str(srv.config), env=srv.env)
        assert stats.returncode == 1 and str(segment) in stats.stdout, stats.stdout + stats.stderr
        assert "problems: none" not in stats.stdout

        assert plm("index", "rebuild", "--config", str(srv.config), env=srv.env).returncode == 0
        back = wait_for(query, 200)
        assert back.status_code == 200 and back.json()["hits"][0]["doc_id"] == "gamma", back.text
    finally:
        rc = srv.stop()
    log = srv.log.read_text()
    assert rc == 0 and "Traceback" not in log, log[-3000:]
