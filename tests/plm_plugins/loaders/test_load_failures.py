"""Bad input gives one clear failure per file (or record) from `Loader.load`; the rest loads.

`run()` keeps stopping at the first problem, and only an unusable source (missing path,
no matching files) raises from `load`.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from pathlib import Path
from typing import Any

import pytest
from hostile import within

from plm_core.errors import PlmUserError
from plm_core.records import LoadFailure
from plm_plugins.loaders.beir_corpus import BeirCorpusLoader
from plm_plugins.loaders.json_records import JsonRecordsLoader
from plm_plugins.loaders.markdown_dir import MarkdownLoader

MB = 1024 * 1024


def write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def only(failures: list[LoadFailure]) -> LoadFailure:
    assert len(failures) == 1, failures
    return failures[0]


def assert_one_line_without_path(failures: list[LoadFailure]) -> None:
    for failure in failures:
        assert failure.error and "\n" not in failure.error
        assert failure.path not in failure.error  # the summary prints the path next to it


# --- Markdown -------------------------------------------------------------------------


def test_markdown_mixed_folder_loads_good_files_and_reports_each_bad_one(tmp_path: Path) -> None:
    write(tmp_path, "a_good.md", "# Good\n")
    write(tmp_path, "b_empty.md", "")
    write(tmp_path, "c_binary.md", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    write(tmp_path, "d_latin1.md", "# Caf\xe9\n".encode("latin-1"))
    (tmp_path / "e_broken.md").symlink_to(tmp_path / "nowhere.md")
    write(tmp_path, "f_good.md", "# Also good\n")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["a_good", "f_good"]
    assert [(Path(f.path).name, f.doc_id) for f in failures] == [
        ("b_empty.md", "b_empty"),
        ("c_binary.md", "c_binary"),
        ("d_latin1.md", "d_latin1"),
        ("e_broken.md", "e_broken"),
    ]
    assert failures[0].path == (tmp_path / "b_empty.md").as_posix()
    assert_one_line_without_path(failures)


def test_markdown_empty_and_whitespace_files_fail_front_matter_only_loads(tmp_path: Path) -> None:
    write(tmp_path, "blank.md", " \n\t\r\n")
    write(tmp_path, "empty.md", "")
    write(tmp_path, "section.md", "---\ntitle: Section\n---\n")  # Hugo's _index.md: the POC indexed these
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["section"]
    assert [(f.doc_id, f.error) for f in failures] == [
        ("blank", "empty (only whitespace); add text or move it out of the folder"),
        ("empty", "empty (0 bytes); add text or move it out of the folder"),
    ]


def test_markdown_binary_file_fails(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    write(tmp_path, "image.md", b"GIF89a\x01\0\x01\0")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    failure = only(failures)
    assert (failure.doc_id, failure.error) == (
        "image",
        "binary, not text (NUL byte at offset 7); move it out of the folder",
    )


def test_markdown_non_utf8_names_the_byte_offset(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    write(tmp_path, "latin1.md", "# Title\nCaf\xe9\n".encode("latin-1"))
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    assert only(failures).error == (
        "not valid UTF-8 (byte 0xe9 at offset 11, line 2); re-save it as UTF-8 or move it out of the folder"
    )


def test_markdown_too_large_is_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    big = write(tmp_path, "big.md", b"x" * (2 * MB))
    opened: list[Path] = []
    real_open = Path.open

    def spy(self: Path, *args: Any, **kwargs: Any) -> Any:
        opened.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", spy)
    docs, failures = MarkdownLoader(max_file_mb=1).load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    failure = only(failures)
    assert (failure.doc_id, failure.error) == (
        "big",
        "too large (2.0 MB, over the loader's max_file_mb = 1); "
        "raise `max_file_mb` in the loader's config or move it out of the folder",
    )
    assert big not in opened


def test_markdown_50mb_file_with_the_default_limit_is_rejected_without_reading(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    with (tmp_path / "huge.md").open("wb") as fh:
        chunk = b"word " * (MB // 5)
        for _ in range(50):
            fh.write(chunk)
    start = time.perf_counter()
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert time.perf_counter() - start < 1.0
    assert [d.id for d in docs] == ["ok"]
    assert only(failures).error.startswith("too large (50.0 MB, over the loader's max_file_mb = 20); ")


def test_markdown_same_named_files_in_two_folders_are_two_documents(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "# Top\n")
    write(tmp_path, "a/README.md", "# From a\n")
    write(tmp_path, "b/README.md", "# From b\n")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert failures == []
    assert [(d.id, d.title) for d in docs] == [("README", "Top"), ("a/README", "From a"), ("b/README", "From b")]
    # A file given alone is named from its own folder; its folder given, from that folder.
    assert [d.id for d in MarkdownLoader().load(str(tmp_path / "a" / "README.md"))[0]] == ["README"]
    assert [d.id for d in MarkdownLoader().load(str(tmp_path / "a"))[0]] == ["README"]


def test_markdown_duplicate_id_two_extensions(tmp_path: Path) -> None:
    write(tmp_path, "a/page.md", "# md\n")
    write(tmp_path, "a/page.markdown", "# markdown\n")
    docs, failures = MarkdownLoader(pattern="**/*.m*").load(str(tmp_path))
    assert [(d.id, d.title) for d in docs] == [("a/page", "markdown")]
    assert only(failures).error.startswith(f"this file and {(tmp_path / 'a' / 'page.markdown').as_posix()} both ")


def test_markdown_duplicate_stem_first_in_sorted_order_wins(tmp_path: Path) -> None:
    write(tmp_path, "a/page.md", "# From a\n")
    write(tmp_path, "b/page.md", "# From b\n")
    docs, failures = MarkdownLoader(pattern="**/*.md", ids="stem").load(str(tmp_path))
    assert [(d.id, d.title) for d in docs] == [("page", "From a")]
    failure = only(failures)
    assert failure.path == (tmp_path / "b" / "page.md").as_posix()
    # The id is known, so a sync with --prune can still run (it keeps that id anyway).
    assert failure.doc_id == "page"
    assert failure.error == (
        f"this file and {(tmp_path / 'a' / 'page.md').as_posix()} both give document id 'page' (the file stem); "
        "the first in sorted order keeps it; rename one or add one to the loader's `exclude`"
    )


def test_markdown_duplicate_stem_stays_a_failure_when_the_first_file_fails(tmp_path: Path) -> None:
    write(tmp_path, "a/page.md", b"\0binary")
    write(tmp_path, "b/page.md", "# From b\n")
    docs, failures = MarkdownLoader(pattern="**/*.md", ids="stem").load(str(tmp_path))
    assert docs == []
    assert [(Path(f.path).parent.name, f.doc_id) for f in failures] == [("a", "page"), ("b", "page")]
    assert "both give document id 'page'" in failures[1].error


def test_markdown_broken_symlink_is_a_failure_not_skipped(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    (tmp_path / "gone.md").symlink_to(tmp_path / "deleted.md")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    failure = only(failures)
    assert (failure.doc_id, failure.error) == (
        "gone",
        f"broken symlink (its target {(tmp_path / 'deleted.md')} does not exist); fix or remove the link",
    )


def test_markdown_never_follows_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    folder, outside = tmp_path / "docs", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    write(outside, "secret.md", "# Secret\n")
    write(outside / "sub", "deep.md", "# Deep\n")
    write(folder, "ok.md", "# OK\n")
    (folder / "host.md").symlink_to(outside / "secret.md")
    (folder / "linked").symlink_to(outside / "sub", target_is_directory=True)
    (folder / "same.md").symlink_to(folder / "ok.md")  # inside, to a file read anyway: not read twice
    docs, failures = MarkdownLoader(pattern="**/*.md").load(str(folder))
    assert sorted(d.id for d in docs) == ["ok"]
    refused = {f.doc_id: f.error for f in failures}
    assert set(refused) <= {"host", "deep"} and "host" in refused
    assert all(error.startswith("a symlink leading outside") for error in refused.values())
    # a file given by name is read wherever it lives: the user named it
    assert [d.id for d in MarkdownLoader().load(str(folder / "host.md"))[0]] == ["host"]


def test_markdown_symlink_to_a_file_the_folder_reads_is_not_read_twice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A link to a file the folder reads anyway would give every hit twice (and go stale
    under a watcher): it is left out, with a warning. A link to a file the folder does not
    read itself (a hidden folder, another name pattern) is read, under the link's id."""
    write(tmp_path, "proj/README.md", "# Project\n")
    write(tmp_path, ".drafts/plan.md", "# Plan\n")
    write(tmp_path, "notes.txt", "# Notes\n")
    (tmp_path / "README.md").symlink_to(tmp_path / "proj" / "README.md")
    (tmp_path / "plan.md").symlink_to(tmp_path / ".drafts" / "plan.md")
    (tmp_path / "notes.md").symlink_to("notes.txt")
    loader = MarkdownLoader()
    with caplog.at_level("WARNING"):
        docs, failures = loader.load(str(tmp_path))
    assert sorted(d.id for d in docs) == ["notes", "plan", "proj/README"] and failures == []
    assert [r.getMessage() for r in caplog.records] == [
        "1 symlink(s) not read: each leads to a file of the folder that is read under its own id "
        "(README.md -> proj/README.md)"
    ]
    # The same for a watcher's batch of files, and a file named on its own is read.
    batch = [str(tmp_path / "README.md"), str(tmp_path / "plan.md")]
    assert [d.id for d in loader.load_files(str(tmp_path), batch)[0]] == ["plan"]
    assert [d.id for d in loader.load(str(tmp_path / "README.md"))[0]] == ["README"]


def test_markdown_symlink_loop_is_a_failure(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    assert only(failures).error == (
        "cannot be read (Too many levels of symbolic links); check the path and its permissions"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_markdown_named_pipe_is_a_failure_and_never_opened(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    os.mkfifo(tmp_path / "pipe.md")  # opening it would block the ingest forever
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    assert only(failures).error == "not a regular file (a named pipe); move it out of the folder"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_markdown_file_swapped_for_a_named_pipe_after_its_check_is_a_failure_not_a_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found: `read_file` checks with stat() that a file is regular, then opens it; a file
    replaced by a named pipe in between (the fault injected here, right after the stat) held
    `markdown_dir` forever in open(), as it held the folder loader before it. Both read
    through the one non-blocking open in `plm_plugins/loaders/files.py` (`open_regular`)."""
    write(tmp_path, "a.md", "# A\n\nThe heron.")
    victim = write(tmp_path, "b.md", "# B\n\nThe zebra.")
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
        docs, failures = MarkdownLoader().load(str(tmp_path))
    assert swapped and [d.id for d in docs] == ["a"]
    assert only(failures).error == (
        "cannot be read (it was swapped for a named pipe or another special file while it was read); "
        "check its permissions"
    )


def test_markdown_folder_matching_the_pattern_is_skipped(tmp_path: Path) -> None:
    # Folders are not files: `**/*` matches every folder, and reporting each would be noise.
    write(tmp_path, "ok.md", "# OK\n")
    (tmp_path / "notes.md").mkdir()
    assert MarkdownLoader().load(str(tmp_path)) == (MarkdownLoader().run(str(tmp_path)), [])


def test_markdown_read_error_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a file without read permission gives a non-root user (root can read it anyway).
    write(tmp_path, "ok.md", "# OK\n")
    locked = write(tmp_path, "locked.md", "# Locked\n")
    real_open = os.open  # what the loader opens a file with (`files.open_regular`), where the kernel says no

    def deny(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    docs, failures = MarkdownLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["ok"]
    failure = only(failures)
    assert (failure.doc_id, failure.error) == ("locked", "cannot be read (Permission denied); check its permissions")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_markdown_file_without_read_permission_is_a_failure(tmp_path: Path) -> None:
    write(tmp_path, "ok.md", "# OK\n")
    locked = write(tmp_path, "locked.md", "# Locked\n")
    locked.chmod(0)
    try:
        docs, failures = MarkdownLoader().load(str(tmp_path))
    finally:
        locked.chmod(0o644)
    assert [d.id for d in docs] == ["ok"]
    assert only(failures).error == "cannot be read (Permission denied); check its permissions"


def test_markdown_one_bad_file_given_as_the_source_is_a_failure(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.md", "")
    error = "empty (0 bytes); add text or move it out of the folder"
    assert MarkdownLoader().load(str(path)) == ([], [LoadFailure(path.as_posix(), error, doc_id="empty", emptied=True)])


def test_markdown_unusable_source_still_raises_from_load(tmp_path: Path) -> None:
    with pytest.raises(PlmUserError, match="no such file or folder"):
        MarkdownLoader().load(str(tmp_path / "missing"))
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(PlmUserError, match="no such file or folder"):
        MarkdownLoader().load(str(tmp_path / "dangling"))
    write(tmp_path, "notes.txt", "text")
    with pytest.raises(PlmUserError, match="no files match"):
        MarkdownLoader().load(str(tmp_path))


def test_markdown_run_still_raises_on_the_first_failure(tmp_path: Path) -> None:
    write(tmp_path, "a.md", "# A\n")
    write(tmp_path, "b.md", "")
    write(tmp_path, "c.md", b"\0")
    with pytest.raises(PlmUserError) as info:
        MarkdownLoader().run(str(tmp_path))
    assert (
        str(info.value) == f"{(tmp_path / 'b.md').as_posix()}: empty (0 bytes); add text or move it out of the folder"
    )


def test_markdown_max_file_mb_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_file_mb"):  # pydantic ValidationError
        MarkdownLoader(max_file_mb=0)


# --- JSON records ---------------------------------------------------------------------


def test_jsonl_bad_lines_are_failures_and_good_records_load(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "a", "text": "first"}),
        "{not json",
        json.dumps({"id": "a", "text": "again"}),
        json.dumps({"id": "b", "title": "no text"}),
        json.dumps(["a", "list"]),
        json.dumps({"text": "no id"}),
        json.dumps({"id": "c", "text": "last"}),
    ]
    path = write(tmp_path, "r.jsonl", "\n".join(lines) + "\n")
    docs, failures = JsonRecordsLoader().load(str(path))
    assert [(d.id, d.text) for d in docs] == [("a", "first"), ("c", "last")]
    where = path.as_posix()
    assert [(f.path, f.doc_id, f.error) for f in failures] == [
        (
            f"{where}:2",
            "",
            "not valid JSON (Expecting property name enclosed in double quotes); fix or remove the line",
        ),
        (
            f"{where}:3",
            "a",
            "id 'a' is already used by line 1, which keeps it; ids must be unique, so change or remove this record",
        ),
        (
            f"{where}:4",
            "b",
            "missing field 'text'; every record needs its text: add it or remove the record, "
            "or set the loader's text_field to the key that holds it",
        ),
        (f"{where}:5", "", "expected a JSON object, got list; fix or remove the line"),
        (
            f"{where}:6",
            "",
            "missing field 'id'; every record needs a unique id: add one or remove the record, "
            "or set the loader's id_field to the key that holds it",
        ),
    ]


def test_json_list_per_record_failures(tmp_path: Path) -> None:
    records = [{"id": 1, "text": "one"}, 7, {"id": 1, "text": "dup"}, {"id": 2, "text": ["not", "a", "string"]}]
    path = write(tmp_path, "r.json", json.dumps(records))
    docs, failures = JsonRecordsLoader().load(str(path))
    assert [d.id for d in docs] == ["1"]
    assert [(f.path.rsplit(": ", 1)[1], f.doc_id) for f in failures] == [
        ("record 2", ""),
        ("record 3", "1"),
        ("record 4", "2"),
    ]
    assert "already used by record 1" in failures[1].error
    assert failures[2].error == "field 'text' must be a string, got list; fix the record"


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("bin.jsonl", b'{"id": 1}\0\0', "binary, not text (NUL byte at offset 9); give a UTF-8 .json or .jsonl file"),
        (
            "latin1.jsonl",
            '{"id": 1, "text": "caf\xe9"}'.encode("latin-1"),
            "not valid UTF-8 (byte 0xe9 at offset 22, line 1); "
            "re-save it as UTF-8 or give a UTF-8 .json or .jsonl file",
        ),
        (
            "broken.json",
            b'[{"id": 1,\n',
            "not valid JSON (Expecting property name enclosed in double quotes at line 2); fix the file",
        ),
        (
            "object.json",
            b'{"id": 1, "text": "x"}',
            "expected a JSON list of objects, got dict; wrap the records in [...]",
        ),
    ],
)
def test_json_whole_file_problems_are_one_failure(tmp_path: Path, name: str, data: bytes, error: str) -> None:
    path = write(tmp_path, name, data)
    docs, failures = JsonRecordsLoader().load(str(path))
    assert docs == []
    failure = only(failures)
    assert (failure.path.startswith(path.as_posix()), failure.doc_id, failure.error) == (True, "", error)


def test_json_too_large_file_is_one_failure(tmp_path: Path) -> None:
    path = write(tmp_path, "r.jsonl", json.dumps({"id": "a", "text": "x" * MB}))
    docs, failures = JsonRecordsLoader(max_file_mb=0.5).load(str(path))
    assert docs == []
    assert only(failures).error == (
        "too large (1.0 MB, over the loader's max_file_mb = 0.5); "
        "raise `max_file_mb` in the loader's config or give a UTF-8 .json or .jsonl file"
    )


def test_json_unusable_source_raises_and_run_raises_on_the_first_failure(tmp_path: Path) -> None:
    with pytest.raises(PlmUserError, match="no such file"):
        JsonRecordsLoader().load(str(tmp_path / "missing.jsonl"))
    with pytest.raises(PlmUserError, match="unknown suffix"):
        JsonRecordsLoader().load(str(write(tmp_path, "r.csv", "id,text\n")))
    path = write(tmp_path, "r.jsonl", '{"id": "a", "text": "ok"}\n{"id": "a", "text": "dup"}\n{oops\n')
    with pytest.raises(PlmUserError, match=r"r\.jsonl:2: id 'a' is already used by line 1"):
        JsonRecordsLoader().run(str(path))


# --- BEIR -----------------------------------------------------------------------------


def test_beir_bad_lines_are_failures_and_good_lines_load(tmp_path: Path) -> None:
    lines = [
        json.dumps({"_id": "d1", "text": "one"}),
        "[1, 2",
        json.dumps({"_id": "d1", "text": "dup"}),
        json.dumps({"_id": "d2"}),
        json.dumps({"_id": "d3", "text": "x", "metadata": ["not", "an", "object"]}),
        json.dumps({"_id": "d4", "text": "four"}),
    ]
    path = write(tmp_path, "corpus.jsonl", "\n".join(lines))
    docs, failures = BeirCorpusLoader().load(str(tmp_path))
    assert [d.id for d in docs] == ["d1", "d4"]
    where = path.as_posix()
    assert [(f.path, f.doc_id, f.error) for f in failures] == [
        (f"{where}:2", "", "not valid JSON (Expecting ',' delimiter); fix or remove the line"),
        (
            f"{where}:3",
            "d1",
            "id 'd1' is already used by line 1, which keeps it; ids must be unique, so change or remove this record",
        ),
        (f"{where}:4", "d2", "missing field 'text'; every record needs its text: add it or remove the record"),
        (f"{where}:5", "d3", "field 'metadata' must be a JSON object or null, got list; fix the record"),
    ]
    with pytest.raises(PlmUserError, match=r"corpus\.jsonl:2: not valid JSON"):
        BeirCorpusLoader().run(str(path))


def test_beir_non_utf8_corpus_is_one_failure(tmp_path: Path) -> None:
    path = write(tmp_path, "corpus.jsonl", b'{"_id": "1", "text": "ok"}\n{"_id": "2", "text": "\xff"}\n')
    docs, failures = BeirCorpusLoader().load(str(path))
    assert docs == []
    assert only(failures) == LoadFailure(
        path.as_posix(),
        "not valid UTF-8 (byte 0xff at offset 49, line 2); re-save it as UTF-8 or give a UTF-8 BEIR corpus.jsonl",
    )


def test_unreadable_subfolder_is_a_failure_without_doc_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root reads every folder, so the kernel's refusal is simulated where os.walk meets it."""
    write(tmp_path, "a.md", "# A\n\ntext")
    locked = tmp_path / "team"
    locked.mkdir()
    write(locked, "t.md", "# T\n\ntext")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    docs, failures = MarkdownLoader(pattern="**/*.md").load(str(tmp_path))
    assert "a" in [d.id for d in docs]
    failure = next(f for f in failures if f.path == locked.as_posix())
    assert failure.doc_id == "" and "folder cannot be read (Permission denied)" in failure.error


def test_markdown_by_another_name_is_not_read_and_a_warning_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`*.md` is case-sensitive and names one extension: `NOTES.MD` and `a.markdown` are
    not read, and one warning names them rather than nothing; excluded ones are not named."""
    write(tmp_path, "guide.md", "# Guide\n")
    write(tmp_path, "sub/NOTES.MD", "# Notes\n")
    write(tmp_path, "other.markdown", "# Other\n")
    write(tmp_path, "drafts/old.markdown", "# Old\n")
    write(tmp_path, "notes.txt", "plain\n")
    with caplog.at_level("WARNING"):
        docs, failures = MarkdownLoader(exclude=["drafts"]).load(str(tmp_path))
    assert [d.id for d in docs] == ["guide"] and failures == []
    assert [r.getMessage() for r in caplog.records] == [
        "2 Markdown file(s) not read: the loader's pattern '**/*.md' matches names ending in .md only, case "
        "included (other.markdown, sub/NOTES.MD); rename them to .md, or set the loader's `pattern` "
        "(e.g. '**/*.markdown')"
    ]
    caplog.clear()
    with caplog.at_level("WARNING"):  # a pattern of the user's own: their choice, no warning
        assert [d.id for d in MarkdownLoader(pattern="**/*.markdown").load(str(tmp_path))[0]] == [
            "drafts/old",
            "other",
        ]
    assert caplog.records == []


def test_a_folder_is_listed_in_the_order_paths_sort(tmp_path: Path) -> None:
    """The files a folder gives come in `Path`'s order (by parts: a folder's files by name,
    `a/b.md` before `a b.md` and `a-b/`), whatever characters the names hold; a file
    removed from the middle leaves the others' order as it was."""
    names = [
        "a/b.md", "a b.md", "a-b/c.md", "a.md", "ab.md", "a/a b/z.md", "a/a/z.md", "a/a.md", "A.md",
        "é.md", "e\u0301.md", "~.md", "a_/x.md", "a!/x.md", "z/0/1/2.md", "z/01.md", "z/0.md", "Ω/ω.md",
    ]  # fmt: skip
    for name in names:
        write(tmp_path, name, f"# {name}\n")
    listed = MarkdownLoader(pattern="**/*.md").files(str(tmp_path))
    assert listed is not None
    want = [str(p) for p in sorted(tmp_path / n for n in names)]
    assert listed[0] == want
    assert [d.path for d in MarkdownLoader(pattern="**/*.md").load(str(tmp_path))[0]] == want
