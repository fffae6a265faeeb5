"""A real folder kept indexed: nested, with same-named files, synced without losing a
document, and a sync with nothing to do that reads no file and loads no model.

Every test runs on both stores (SQLite and Postgres, through the `store_table` fixture).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plm_core.component import ComponentConfig
from plm_core.interfaces import Embedder
from plm_core.registry import Registry
from plm_core.settings import Settings
from plm_index.job import Job
from plm_index.plugins import build_registry
from plm_serve.syncing import sync_paths

CONFIG = """
[job]
name = "real_folder"

{store}

{embedder}

[index.load]
use = "markdown_dir"
{load}

[index.chunk]
use = "markdown_semantic"

[query.retrieve]
use = "bm25s"
tokenizer = "whitespace_lower"
"""

FOLDER = {
    "README.md": "# Runbooks\n\nHow this folder of runbooks is organised: one page per service.\n",
    "team-a/README.md": "# Team A\n\nTeam A owns the payments gateway and its zebra rollout.\n",
    "team-b/README.md": "# Team B\n\nTeam B owns the search cluster and its walrus reindex.\n",
    "team-b/deep/rotate-keys.md": "# Rotate keys\n\nRotate the API key of the walrus service every quarter.\n",
    "backup.md": "# Backup\n\nSnapshots run nightly; restore with the yak tool.\n",
}
IDS = ["README", "backup", "team-a/README", "team-b/README", "team-b/deep/rotate-keys"]
LONG_AGO = time.time() - 3600  # files older than a sync's racy window are remembered by stat


class CountingEmbedder(Embedder):
    """A stand-in for a model that is expensive to load: it counts its loads, and, like
    sentence-transformers, knows its name before loading (`expected_model_name`)."""

    name = "counting"
    loads = 0

    class Config(ComponentConfig):
        pass

    def warm_up(self) -> None:
        type(self).loads += 1

    @property
    def model_name(self) -> str:
        self.ensure_warm()
        return "counting-v1"

    @property
    def expected_model_name(self) -> str:
        return "counting-v1"

    def embed(self, texts: Sequence[str], progress: bool = False) -> Any:
        self.ensure_warm()
        rows = np.array([[len(t), t.count("a") + 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def registry() -> Registry:
    reg = build_registry()
    reg.add(CountingEmbedder)
    return reg


def write(folder: Path, files: dict[str, str], mtime: float | None = LONG_AGO) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if mtime is not None:
            os.utime(path, (mtime, mtime))
    return folder


def job_for(
    tmp_path: Path,
    store_table: str,
    registry: Registry,
    load: str = "",
    embedder: bool = False,
) -> Job:
    cfg = tmp_path / "job.toml"
    table = '[embedder]\nuse = "counting"' if embedder else ""
    cfg.write_text(CONFIG.format(store=store_table, embedder=table, load=load))
    settings = Settings(progress=False, data_dir=str(tmp_path / "data"))
    return Job.from_config(cfg, index_dir=tmp_path / "index", settings=settings, registry=registry)


def ingested_then_reopened(tmp_path: Path, store_table: str, registry: Registry, docs: Path) -> Job:
    """`docs` ingested with the counting embedder, then a new job on the same index (a new
    process, as `plm ingest` run again), with the loads counted from zero."""
    first = job_for(tmp_path, store_table, registry, embedder=True)
    first.ingest([docs])
    first.close()
    CountingEmbedder.loads = 0
    return job_for(tmp_path, store_table, registry, embedder=True)


def stored(job: Job) -> list[str]:
    return sorted(job.open().store.doc_fingerprints())


def test_nested_folder_same_named_files_are_documents_named_by_path(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    report = job.ingest([docs])
    assert report.failed == [] and sorted(report.added) == IDS
    assert stored(job) == IDS
    (hit,) = job.retrieve("zebra", k=1)
    assert hit.doc_id == "team-a/README" and hit.as_dict()["title"] == "Team A"
    assert sorted(h.doc_id for h in job.retrieve("walrus", k=5)) == ["team-b/README", "team-b/deep/rotate-keys"]


def test_a_file_or_subfolder_given_later_keeps_the_id_its_folder_gave(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    (docs / "team-a" / "README.md").write_text("# Team A\n\nTeam A now owns the okapi ledger.\n")
    one = job.ingest([docs / "team-a" / "README.md"])
    assert one.updated == ["team-a/README"] and one.added == []
    (docs / "team-b" / "new.md").write_text("# New\n\nA brand new capybara page.\n")
    sub = job.ingest([docs / "team-b"])
    assert sub.added == ["team-b/new"] and sub.deleted == []
    assert sub.notes == []  # the folder's other documents are the same collection, no "other sources"
    # what a watcher hands over: files under its folder
    (docs / "team-b" / "deep" / "rotate-keys.md").write_text("# Rotate keys\n\nRotate yearly now.\n")
    batch = sync_paths(job, [docs / "team-b" / "deep" / "rotate-keys.md"], [])
    assert batch.updated == ["team-b/deep/rotate-keys"] and batch.deleted == []
    assert stored(job) == sorted([*IDS, "team-b/new"])


def test_a_lost_record_of_read_files_renames_no_document(tmp_path: Path, store_table: str, registry: Registry) -> None:
    """Issue 45 B6: the folders given to ingest lived only in files.sqlite; once it was
    deleted, `plm ingest docs/team-a/README.md` stored the file as `README`."""
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    job.close()
    (tmp_path / "index" / "files.sqlite").unlink()
    (docs / "team-a" / "README.md").write_text("# Team A\n\nTeam A now owns the okapi ledger.\n")
    job = job_for(tmp_path, store_table, registry)
    one = job.ingest([docs / "team-a" / "README.md"])
    assert one.updated == ["team-a/README"] and one.added == []
    assert stored(job) == IDS


def test_an_index_of_file_stems_moves_to_path_ids_without_losing_or_doubling(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", {k: v for k, v in FOLDER.items() if k != "team-a/README.md"})
    old = job_for(tmp_path, store_table, registry, load='ids = "stem"', embedder=True)
    old.ingest([docs])
    assert stored(old) == ["README", "backup", "rotate-keys"]  # team-b/README lost its id to README
    old.close()

    job = job_for(tmp_path, store_table, registry, embedder=True)  # today's default: path ids
    report = job.ingest([docs])  # no --prune: the old ids go all the same
    assert stored(job) == ["README", "backup", "team-b/README", "team-b/deep/rotate-keys"]
    assert sorted(report.added) == ["team-b/README", "team-b/deep/rotate-keys"]
    assert report.deleted == ["rotate-keys"] and any("now named by their path" in n for n in report.notes)
    # The moved document's text was embedded before: the content cache serves it.
    assert report.work["embed"]["cached"] >= 1
    assert sorted(h.doc_id for h in job.retrieve("walrus", k=5)) == ["team-b/README", "team-b/deep/rotate-keys"]


def test_a_move_to_path_ids_killed_half_way_is_finished_by_the_next_ingest(
    tmp_path: Path, store_table: str, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45 B4: `kill -9` during the move from stem ids to path ids left both ids of the
    files already moved (a query returned `team-b/README` and `README`), and a plain
    `plm ingest` never removed them."""
    from plm_index.sync import Processor

    kept = ("backup.md", "team-b/README.md", "team-b/deep/rotate-keys.md")  # stems all different
    docs = write(tmp_path / "docs", {k: v for k, v in FOLDER.items() if k in kept})
    old = job_for(tmp_path, store_table, registry, load='ids = "stem"')
    old.ingest([docs])
    old.close()
    real, calls = Processor.process, []

    def killed_before_the_last_batch(self, batch, read_cache=True, embed=True):  # type: ignore[no-untyped-def]
        calls.append([d.id for d in batch])
        if "team-b/deep/rotate-keys" in calls[-1]:  # after team-b/README was stored under its path
            raise KeyboardInterrupt  # as kill -9 between two batches: nothing after it runs
        return real(self, batch, read_cache, embed)

    monkeypatch.setattr(Processor, "process", killed_before_the_last_batch)
    job = job_for(tmp_path, store_table, registry)
    job.syncer.batch_size = 1
    with pytest.raises(KeyboardInterrupt):
        job.ingest([docs])
    job.close()
    half = stored(job_for(tmp_path, store_table, registry))
    assert half == ["README", "backup", "rotate-keys", "team-b/README"], calls  # a file under both ids
    monkeypatch.setattr(Processor, "process", real)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])  # a plain ingest, no --prune
    assert stored(job) == ["backup", "team-b/README", "team-b/deep/rotate-keys"]
    assert sorted(h.doc_id for h in job.retrieve("walrus", k=5)) == ["team-b/README", "team-b/deep/rotate-keys"]


def test_prune_never_deletes_a_document_whose_file_still_exists(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    job.close()

    # The top folder only: the nested files exist, so they stay, listed in a note.
    top = job_for(tmp_path, store_table, registry, load='pattern = "*.md"')
    report = top.ingest([docs], prune=True)
    assert report.deleted == [] and stored(top) == IDS
    assert report.updated == [] and report.unchanged == 2  # which files are read is not what they are
    (note,) = [n for n in report.notes if "no longer read" in n]
    assert "kept 3 document(s)" in note and "--prune-unread" in note
    # An excluded folder, likewise; asked for, they go.
    top.close()
    excluded = job_for(tmp_path, store_table, registry, load='exclude = ["deep"]')
    assert excluded.ingest([docs], prune=True).deleted == []
    assert excluded.ingest([docs], prune_unread=True).deleted == ["team-b/deep/rotate-keys"]

    # A file that is gone is pruned; a watcher's start-up catch-up is this same sync.
    (docs / "team-a" / "README.md").unlink()
    gone = excluded.ingest([docs], prune=True)
    assert gone.deleted == ["team-a/README"]
    assert stored(excluded) == ["README", "backup", "team-b/README"]


def test_a_sync_with_nothing_to_do_reads_no_file_and_loads_no_model(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER)
    job = ingested_then_reopened(tmp_path, store_table, registry, docs)
    backup = docs / "backup.md"
    reads: list[str] = []
    load_files = job.loader.load_files  # type: ignore[union-attr]
    job.loader.load_files = lambda root, files: reads.extend(files) or load_files(root, files)  # type: ignore[union-attr]
    again = job.ingest([docs], prune=True)
    assert again.skipped and again.unchanged == len(IDS) and again.documents == len(IDS)
    assert reads == []  # not one file opened
    assert CountingEmbedder.loads == 0 and not job.embedder.is_warm  # type: ignore[union-attr]
    assert job.retrieve("yak", k=1)[0].doc_id == "backup"

    # Other bytes of the same size, the modification time set back: the ctime tells (as
    # git's index does), so the file is read, and remembered again.
    backup.write_text(FOLDER["backup.md"].replace("yak", "gnu"))
    os.utime(backup, (LONG_AGO, LONG_AGO))
    touched = job.ingest([docs])
    assert touched.updated == ["backup"] and reads == [str(backup)]
    assert job.retrieve("gnu", k=1)[0].doc_id == "backup"
    os.utime(docs / "README.md", (LONG_AGO + 60, LONG_AGO + 60))  # read, content compared: unchanged
    assert job.ingest([docs]).skipped
    assert CountingEmbedder.loads == 1  # the one changed document was embedded


def test_a_change_whose_chunks_are_all_cached_loads_no_model(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    # front matter edited, or an edit undone: the chunks' vectors are in the cache already,
    # and a new process read them without loading the model (6 s for MiniLM) to size them
    docs = write(tmp_path / "docs", FOLDER)
    job = ingested_then_reopened(tmp_path, store_table, registry, docs)
    write(docs, {"backup.md": "---\nteam: ops\n---\n" + FOLDER["backup.md"]}, mtime=LONG_AGO + 60)
    report = job.ingest([docs])
    assert report.updated == ["backup"] and report.work["embed"] == {"computed": 0, "cached": 1}
    assert CountingEmbedder.loads == 0 and "load model" not in report.timings
    assert [h.doc_id for h in job.retrieve("yak", k=1, filters={"team": "ops"})] == ["backup"]
    write(docs, {"backup.md": FOLDER["backup.md"].replace("yak", "gnu")}, mtime=LONG_AGO + 120)
    changed = job.ingest([docs])
    assert (
        changed.work["embed"] == {"computed": 1, "cached": 0}
        and CountingEmbedder.loads == 1
        and changed.timings["load model"] >= 0
    )
    assert job.retrieve("gnu", k=1)[0].doc_id == "backup"


def test_a_document_deleted_behind_the_record_is_read_again(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    job.delete(["backup"])  # `plm delete`: the file is still there, its stat unchanged
    report = job.ingest([docs])
    assert report.added == ["backup"] and stored(job) == IDS


def test_a_file_saved_within_the_racy_window_is_read_next_time(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    docs = write(tmp_path / "docs", FOLDER, mtime=None)  # just written: as new as the sync
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    page = docs / "backup.md"
    stat = page.stat()
    page.write_text(FOLDER["backup.md"].replace("yak", "gnu"))  # same size, same clock tick
    os.utime(page, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert job.ingest([docs]).updated == ["backup"]


def test_a_file_name_that_is_not_utf8_fails_each_sync_and_never_stops_the_others(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    """Issue 45 A1: the second sync of a folder holding `bad\\xffname.md` crashed in the
    record of read files (a path SQLite cannot store), and so did every sync after it."""
    docs = write(tmp_path / "docs", FOLDER)
    (docs / os.fsdecode(b"bad\xffname.md")).write_text("# Bad\n\nA name that is not UTF-8.\n")
    job = job_for(tmp_path, store_table, registry)
    for _ in range(3):
        report = job.ingest([docs])
        assert [f.path.rsplit("/", 1)[-1] for f in report.failed] == ["bad\\xffname.md"]
    write(docs, {"backup.md": "# Backup\n\nSnapshots now run hourly.\n"}, mtime=None)
    report = job.ingest([docs])
    assert report.updated == ["backup"] and len(report.failed) == 1 and stored(job) == IDS
    job.close()


def test_a_record_of_read_files_that_cannot_be_written_only_means_reading_again(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    """Issue 45 A2: an immutable `files.sqlite` (`chattr +i`) ended the next ingest in a
    PermissionError from the record's reset; it is only a cache."""
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    job.close()
    record = tmp_path / "index" / "files.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{record}{suffix}").unlink(missing_ok=True)
    record.write_bytes(b"not a database")  # damaged, so the next sync resets it
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(record)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available on this file system (the test needs an immutable file)")
    try:
        job = job_for(tmp_path, store_table, registry)
        write(docs, {"backup.md": "# Backup\n\nSnapshots now run hourly.\n"}, mtime=None)
        report = job.ingest([docs])
        assert report.updated == ["backup"] and not report.failed and stored(job) == IDS
        job.close()
    finally:
        subprocess.run(["chattr", "-i", str(record)], capture_output=True)


def test_a_file_whose_name_can_be_no_id_never_blocks_prune(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    """Issue 45 B5: a file named with a tab, newline, DEL or ESC (its id is refused) blocked
    `--prune` for the whole folder, so deleted files stayed searchable."""
    docs = write(tmp_path / "docs", FOLDER)
    for name in ("tab\there.md", "new\nline.md", "del\x7f.md", "esc\x1b.md"):
        (docs / name).write_text("# Odd\n\nA file whose name can be no id.\n")
    job = job_for(tmp_path, store_table, registry)
    assert len(job.ingest([docs]).failed) == 4
    (docs / "backup.md").unlink()
    report = job.ingest([docs], prune=True)
    assert report.deleted == ["backup"] and len(report.failed) == 4 and not report.notes
    assert stored(job) == [i for i in IDS if i != "backup"]
    job.close()


def test_an_edit_that_keeps_size_and_modification_time_is_read(
    tmp_path: Path, store_table: str, registry: Registry
) -> None:
    """Issue 45 B7: an edit of the same size whose modification time was set back (a tool
    that restores timestamps, a checkout) was never read again; the ctime tells, as git's does."""
    docs = write(tmp_path / "docs", FOLDER)
    job = job_for(tmp_path, store_table, registry)
    job.ingest([docs])
    before = (docs / "backup.md").stat()
    text = FOLDER["backup.md"].replace("yak", "emu")
    assert len(text) == len(FOLDER["backup.md"])
    (docs / "backup.md").write_text(text)
    os.utime(docs / "backup.md", ns=(before.st_atime_ns, before.st_mtime_ns))
    after = (docs / "backup.md").stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    report = job.ingest([docs])
    assert report.updated == ["backup"] and report.unchanged == len(IDS) - 1
    assert job.retrieve("emu", k=1)[0].doc_id == "backup"
    job.close()
