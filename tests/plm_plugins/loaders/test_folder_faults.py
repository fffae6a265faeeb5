"""The `folder` loader when the folder fights back (issue 45, reliability round four): files
swapped, deleted or growing while they are read, special files under a converter's
extension, and damaged copies of files already stored. The rule: one `failed:` line per such
file, every other file read, nothing stored lost, never a hang (each probe runs under a
deadline; a blocked open() of a named pipe is interrupted by it)."""

from __future__ import annotations

import os
import pathlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from documents import pdf_bytes, write_docx, write_pdf
from hostile import assert_one_line, overlapping_zip, within

import plm
from plm import Converted, Registry
from plm_index.plugins import build_registry
from plm_plugins.converters.text import TextConverter
from plm_plugins.loaders.folder import FolderLoader

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
CONFIG = """
[job]
name = "faults"
[store]
use = "sqlite"
[index.load]
use = "folder"
[index.chunk]
use = "markdown_semantic"
[query.retrieve]
use = "bm25s"
tokenizer = "bm25s_stem"
"""


def good_folder(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "zebra.txt").write_text("The zebra crossing is painted white.")
    (root / "guide.md").write_text("# Guide\n\nThe heron guide.")
    write_pdf(root / "paper.pdf", [["The ocelot paper, page one."]])
    write_docx(root / "report.docx", [("Title", "Report"), ("", "The armadillo report.")])
    return root


def errors(failures: list[Any]) -> dict[str, str]:
    for failure in failures:
        assert_one_line(failure.error)
    return {Path(f.path).name: f.error for f in failures}


@needs_fifo
def test_a_file_swapped_for_a_named_pipe_after_its_check_is_a_failure_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: `read_file` checks with stat() that a file is regular, then opens it; a file
    replaced by a named pipe in between (the fault injected here, right after the stat) held
    the ingest forever in open(). Every loader now opens without blocking and checks what
    it opened (plm_plugins/loaders/files.py, `open_regular`)."""
    root = good_folder(tmp_path / "docs")
    victim = root / "notes" / "zebra.txt"
    real_stat = pathlib.Path.stat
    swapped: list[Path] = []

    def stat_then_swap(self: Path, *args: Any, **kwargs: Any) -> Any:
        result = real_stat(self, *args, **kwargs)
        if self == victim and not swapped:
            swapped.append(self)
            os.unlink(victim)
            os.mkfifo(victim)
        return result

    monkeypatch.setattr(pathlib.Path, "stat", stat_then_swap)
    with within(5):
        docs, failures = FolderLoader().load(str(root))
    assert swapped and sorted(d.id for d in docs) == ["guide", "paper.pdf", "report.docx"]
    assert errors(failures) == {
        "zebra.txt": "cannot be read (it was swapped for a named pipe or another special file while it was read); "
        "check its permissions"
    }


@needs_fifo
def test_special_files_under_a_converters_extension_are_one_failure_each(tmp_path: Path) -> None:
    root = good_folder(tmp_path / "docs")
    os.mkfifo(root / "pipe.pdf")
    (root / "loop.docx").symlink_to(root / "loop.docx")
    (root / "gone.html").symlink_to(root / "nowhere.html")
    (root / "zero.txt").symlink_to("/dev/zero")  # outside the folder: never opened
    (root / "folder.rst").mkdir()  # a folder, not a file: not listed
    short = Path(f"/tmp/plm-sock-{os.getpid()}")  # a socket's path must be short
    short.mkdir(exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(short / "s.txt"))
        (root / "socket.txt").symlink_to(short / "s.txt")
        with within(5):
            docs, failures = FolderLoader().load(str(root))
    finally:
        listener.close()
        (short / "s.txt").unlink(missing_ok=True)
        short.rmdir()
    assert sorted(d.id for d in docs) == ["guide", "notes/zebra.txt", "paper.pdf", "report.docx"]
    found = errors(failures)
    assert found["pipe.pdf"] == "not a regular file (a named pipe); move it out of the folder"
    assert found["loop.docx"].startswith("cannot be read (Too many levels of symbolic links)")
    assert found["gone.html"].startswith("broken symlink (its target ")
    assert "leading outside" in found["zero.txt"] and "leading outside" in found["socket.txt"]
    assert sorted(found) == ["gone.html", "loop.docx", "pipe.pdf", "socket.txt", "zero.txt"]


def test_a_file_deleted_between_listing_and_reading_is_one_failure(tmp_path: Path) -> None:
    root = good_folder(tmp_path / "docs")
    loader = FolderLoader()
    listed = loader.files(str(root))
    assert listed is not None
    files, _ = listed
    (root / "paper.pdf").unlink()
    docs, failures = loader.load_files(str(root), files)
    assert sorted(d.id for d in docs) == ["guide", "notes/zebra.txt", "report.docx"]
    assert [(f.doc_id, f.error) for f in failures] == [
        ("paper.pdf", "cannot be read (No such file or directory); check the path and its permissions")
    ]


def test_a_file_growing_while_it_is_read_is_read_to_the_limit_never_past_it(tmp_path: Path) -> None:
    """A log being written: the read stops at `max_file_mb` (+1 byte), whatever the file has
    grown to; either the bytes read are the document or the file is "too large"."""
    root = good_folder(tmp_path / "docs")
    growing = root / "growing.txt"
    growing.write_text("start of the log\n")
    stop = threading.Event()

    def append() -> None:
        with growing.open("a") as fh:
            while not stop.is_set():
                fh.write("another log line of words\n" * 2000)
                fh.flush()

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        time.sleep(0.2)
        with within(5):
            docs, failures = FolderLoader(max_file_mb=1).load(str(root))
    finally:
        stop.set()
        writer.join(5)
    read = {d.id: d for d in docs}
    assert {"guide", "notes/zebra.txt", "paper.pdf", "report.docx"} <= set(read)
    if "growing.txt" in read:
        assert len(read["growing.txt"].text) <= 1024 * 1024 + 1
    else:
        assert errors(failures)["growing.txt"].startswith("too large")


class SwappingText(TextConverter):
    """The text converter, but each file is replaced on disk (same size, same modification
    time, by a rename) while it is converted: what an editor's save does mid-ingest."""

    name = "swapping_text"
    extensions = (".swap",)  # type: ignore[assignment]

    def convert(self, data: bytes, path: str) -> Converted:
        target = Path(path)
        if b"before" in data:
            old = target.stat()
            fresh = target.with_name(".fresh")
            fresh.write_bytes(data.replace(b"before", b"after!"))
            os.utime(fresh, ns=(old.st_atime_ns, old.st_mtime_ns))
            os.replace(fresh, target)
        return super().convert(data, path)


def job_for(tmp_path: Path, registry: Registry | None = None) -> plm.Job:
    config = tmp_path / "faults.toml"
    config.write_text(CONFIG)
    return plm.Job.from_config(config, index_dir=tmp_path / "index", registry=registry)


def test_a_file_swapped_while_it_is_converted_is_read_again_by_the_next_ingest(tmp_path: Path) -> None:
    """The swap keeps the size and the modification time: only its inode and change time say
    the stored text is stale. The next ingest must read it again, never call it unchanged."""
    registry = build_registry(autoload=True)
    registry.add(SwappingText)
    root = good_folder(tmp_path / "docs")
    swapped = root / "draft.swap"
    swapped.write_text("The pelican draft, before the edit.")
    hour_ago = time.time() - 3600
    for path in root.rglob("*"):
        os.utime(path, (hour_ago, hour_ago))  # nothing "racily clean": the record is written
    job = job_for(tmp_path, registry)
    first = job.ingest([root])
    assert "draft.swap" in first.added and not first.failed
    assert "before" in job.retrieve("pelican", k=1)[0].text
    second = job.ingest([root])
    assert (second.updated, second.failed) == (["draft.swap"], [])
    assert "after!" in job.retrieve("pelican", k=1)[0].text
    job.close()


def bomb(path: Path) -> None:
    path.write_bytes(overlapping_zip(300, 1 << 20))


def garbage(path: Path) -> None:
    path.write_bytes(pdf_bytes([["The ocelot paper, page one."]])[:200])


def pipe(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("name", "damage", "word", "error"),
    [
        pytest.param("paper.pdf", garbage, "ocelot", "not a readable PDF", id="pdf-cut-short"),
        pytest.param("report.docx", bomb, "armadillo", "unzips to 300 MB", id="docx-became-a-zip-bomb"),
        pytest.param("notes/zebra.txt", pipe, "zebra", "not a regular file (a named pipe)", id="text-became-a-pipe"),
    ],
)
def test_a_damaged_copy_of_a_stored_file_loses_nothing_stored(
    tmp_path: Path, name: str, damage: Any, word: str, error: str
) -> None:
    """A file that read well, damaged since: the sync says so on one line and keeps the
    document it stored (a plain ingest and `--prune` alike); the other files are untouched."""
    if damage is pipe and not hasattr(os, "mkfifo"):
        pytest.skip("needs named pipes (POSIX)")
    root = good_folder(tmp_path / "docs")
    job = job_for(tmp_path)
    assert not job.ingest([root]).failed
    damage(root / name)
    doc_id = name  # (no Markdown here: every id keeps its extension)
    for prune in (False, True):
        with within(10):
            report = job.ingest([root], prune=prune)
        assert [(f.doc_id, f.error.startswith(error)) for f in report.failed] == [(doc_id, True)], report.failed
        assert report.deleted == [] and report.updated == []
        assert [h.doc_id for h in job.retrieve(word, k=1)] == [doc_id]
    job.close()
