"""A full disk is one clear error, every time, and loses nothing: SQLite rolls the write back
itself (SQLITE_FULL), and the store says the disk is full instead of "cannot rollback - no
transaction is active". The database is made full with `PRAGMA max_page_count`, which fails
a write with the same SQLITE_FULL a full disk gives (no root, no mount)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from plm_core.errors import StoreError
from plm_index.job import Job

pytest.importorskip("bm25s")

CONFIG = """
[job]
name = "full"
[store]
use = "sqlite"
[index.load]
use = "markdown_dir"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
"""


def test_writes_on_a_full_disk_say_so_and_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLM_PROGRESS", "0")
    (tmp_path / "job.toml").write_text(CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# D{i}\n\nSmall document number {i} about apples and pears.\n")
    job = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index").open()
    try:
        assert sorted(job.ingest([docs]).added) == ["d0", "d1", "d2"]
        before = job.store.stats()
        pages = job.store.db.execute("PRAGMA page_count").fetchone()[0]
        job.store.db.execute(f"PRAGMA max_page_count = {pages + 2}")
        rng = random.Random(0)
        words = " ".join(f"{rng.choice(['alpha', 'beta', 'gamma'])}{i}" for i in range(20000))
        for n in range(3):  # the second and third writes are where "cannot rollback" came from
            (docs / f"big{n}.md").write_text(f"# Big {n}\n\n{words}\n")
            with pytest.raises(StoreError) as caught:
                job.ingest([docs])
            message = str(caught.value)
            assert (
                f"the disk holding the store {tmp_path / 'index'}" in message and "free space and run again" in message
            )
            assert "rollback" not in message
        after = job.store.stats()
        assert {k: after[k] for k in ("documents", "chunks", "corpus_version")} == {
            k: before[k] for k in ("documents", "chunks", "corpus_version")
        }
        assert job.retrieve("apples pears", 3)  # the store still answers

        job.store.db.execute("PRAGMA max_page_count = 1073741823")  # space freed
        assert sorted(job.ingest([docs]).added) == ["big0", "big1", "big2"]
        assert job.store.stats()["documents"] == 6
    finally:
        job.close()


def test_a_full_disk_while_a_search_index_is_saved_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45 A3: a full disk while a BM25 segment was written was a raw OSError traceback.
    The fault is ENOSPC from the segment writer's own disk calls, injected where the disk is
    written (no root to fill a file system here)."""
    import errno

    from plm_core.errors import PlmUserError
    from plm_index.segments import files

    monkeypatch.setenv("PLM_PROGRESS", "0")
    (tmp_path / "job.toml").write_text(CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "d0.md").write_text("# D0\n\nApples and pears.\n")
    job = Job.from_config(tmp_path / "job.toml", index_dir=tmp_path / "index").open()
    try:
        job.ingest([docs])
        real = files._fsync_dir

        def full(folder: Path) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(files, "_fsync_dir", full)
        (docs / "d1.md").write_text("# D1\n\nPlums and cherries.\n")
        with pytest.raises(PlmUserError) as caught:
            job.ingest([docs])
        message = str(caught.value)
        assert "\n" not in message and "is full (No space left on device)" in message
        assert "the documents are stored" in message and "run `plm ingest` again" in message
        assert job.store.stats()["documents"] == 2  # stored; the index is behind
        segments = tmp_path / "index"
        assert not [p for p in segments.rglob(".tmp-*")]  # no half-written segment left
        monkeypatch.setattr(files, "_fsync_dir", real)  # space freed
        job.ingest([docs])
        assert [h.doc_id for h in job.retrieve("plums cherries", 1)] == ["d1"]
    finally:
        job.close()
