"""`GET /files/{id}` when the indexed folder itself is replaced by a symlink to another folder
after indexing (as `mv docs docs.old && ln -s /elsewhere docs` would): the file server judges
paths against the folder's real path as it was indexed, so nothing outside it is served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from plm_needs import needs
from serve_helpers import server_helpers

httpx = pytest.importorskip("httpx")
pytestmark = needs("fastapi", "bm25s")

_helpers = server_helpers()
Server, plm = _helpers.Server, _helpers.plm
CONFIG = _helpers.CONFIG.replace('use = "markdown_dir"', 'use = "folder"')


def test_a_folder_swapped_for_a_link_serves_nothing_outside_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("The heron notes, indexed.")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE-SECRET")
    (tmp_path / "serve.toml").write_text(CONFIG)
    srv = Server(tmp_path)
    res = plm("ingest", str(docs), "--config", str(srv.config), env=srv.env)
    assert res.returncode == 0 and "failed 0" in res.stdout, res.stdout + res.stderr
    srv.start()
    try:
        before = httpx.get(f"{srv.url}/files/notes.txt", timeout=5)
        assert before.status_code == 200 and b"heron" in before.content  # served while it is the folder indexed
        os.rename(docs, tmp_path / "docs.old")
        docs.symlink_to(outside, target_is_directory=True)
        after = httpx.get(f"{srv.url}/files/notes.txt", timeout=5)
        assert after.status_code == 404, after.text
        assert b"OUTSIDE-SECRET" not in after.content
        assert httpx.get(f"{srv.url}/documents/notes.txt", timeout=5).json()["file"] is None
    finally:
        assert srv.stop() == 0, srv.log.read_text()[-3000:]
