"""Reading input files and records with the checks an ingest reports one by one.

Loaders turn a `BadInput` into a `LoadFailure` for that file (or record) and go on with
the rest; `docs_or_raise` gives `run()` its old behaviour of stopping at the first one.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from plm import Document, LoadFailure, PlmUserError
from plm.documents import check_id

# A NUL byte this early means binary (git and grep sniff the same way): UTF-8 text never
# holds one, and decoding a large binary file would only fail later with a vaguer error.
BINARY_SNIFF_BYTES = 8192
MB = 1024 * 1024


class BadInput(Exception):
    """A file or record that cannot become a document.

    The message says what is wrong and what to do, and leaves out where: the caller
    puts the path (or `file:line`) next to it.
    """


class EmptyInput(BadInput):
    """A file with no text (0 bytes, or only whitespace): its failure is `emptied`."""


def shown(path: str | Path) -> str:
    """`path` as text that can always be printed and stored: a name that is not valid
    UTF-8 (Python keeps its bytes as lone surrogates) shows those bytes as `\\xff`."""
    text = path.as_posix() if isinstance(path, Path) else path
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def failure(path: str | Path, error: str | BadInput | PlmUserError, doc_id: str = "") -> LoadFailure:
    """A LoadFailure that can always be printed and stored: the path as `shown`, and no
    doc_id when it could not name a document (no stored version can have such an id);
    `emptied` when the error is an EmptyInput."""
    if doc_id:
        try:
            check_id(doc_id)
        except PlmUserError:
            doc_id = ""
    return LoadFailure(shown(path), str(error), doc_id, emptied=isinstance(error, EmptyInput))


def read_text_file(path: Path, max_mb: float, skip: str) -> str:
    """The file's text, decoded as UTF-8 with universal newlines (as `Path.read_text`).

    Raises BadInput when the file cannot be read (`read_file`), is binary or not UTF-8.
    `skip` finishes messages with how to leave the file out, e.g. "move it out of the folder".
    """
    return decode_text(read_file(path, max_mb, skip), skip)


def read_file(path: Path, max_mb: float, skip: str) -> bytes:
    """The file's bytes. Raises BadInput when the file's name is not valid UTF-8 (it could be
    neither stored nor shown), or the file is unreadable, not a regular file or larger than
    `max_mb` (checked with stat() before reading anything)."""
    try:
        os.path.abspath(path).encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"its path is not valid UTF-8; rename it (or the folder holding it) or {skip}") from None
    try:
        info = path.stat()
    except OSError as err:
        if path.is_symlink() and isinstance(err, FileNotFoundError):
            target = path.readlink()
            raise BadInput(f"broken symlink (its target {target} does not exist); fix or remove the link") from err
        raise BadInput(f"cannot be read ({err.strerror}); check the path and its permissions") from err
    if not stat.S_ISREG(info.st_mode):
        # Opening a FIFO would block the ingest forever, so only regular files are read
        # (and `open_regular` checks again what it opened).
        raise BadInput(f"not a regular file (a {_kind(info.st_mode)}); {skip}")
    limit = int(max_mb * MB)
    if info.st_size > limit:
        raise BadInput(
            f"too large ({info.st_size / MB:.1f} MB, over the loader's max_file_mb = {max_mb:g}); "
            f"raise `max_file_mb` in the loader's config or {skip}"
        )
    try:
        with open_regular(path) as fh:
            data = fh.read(limit + 1)  # +1: a file that grew since stat() still fails
    except OSError as err:
        raise BadInput(f"cannot be read ({err.strerror}); check its permissions") from err
    if len(data) > limit:
        raise BadInput(f"too large (over the loader's max_file_mb = {max_mb:g}); raise `max_file_mb` or {skip}")
    return data


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for reading without waiting. `read_file` checks with stat() that the file
    is a regular one, then opens it, and a file swapped for a named pipe in between (an
    editor's save, a hostile folder) would hold the ingest forever in open(), a FIFO waiting
    for a writer. Opened non-blocking, what was opened is checked again: OSError when it is
    not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, "it was swapped for a named pipe or another special file while it was read")
    return os.fdopen(fd, "rb")


def decode_text(data: bytes, skip: str) -> str:
    """`data` as UTF-8 text with universal newlines; BadInput when it is binary (a NUL byte
    early on) or not UTF-8."""
    nul = data.find(b"\0", 0, BINARY_SNIFF_BYTES)
    if nul >= 0:
        raise BadInput(f"binary, not text (NUL byte at offset {nul}); {skip}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BadInput(
            f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}, line {line}); "
            f"re-save it as UTF-8 or {skip}"
        ) from err
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def docs_or_raise(loaded: tuple[list[Document], list[LoadFailure]]) -> list[Document]:
    """The documents, or PlmUserError with the first failure: what `Loader.run` does."""
    docs, failures = loaded
    if failures:
        raise PlmUserError(f"{failures[0].path}: {failures[0].error}")
    return docs


# (where, ref, record): `where` is the failure's path ("file:3"), `ref` how another
# record's message names this one ("line 3"); the record is a BadInput if it did not parse.
Record = tuple[str, str, Mapping[str, Any] | BadInput]


def parse_json(text: str, fix: str) -> Any:
    """`text` as JSON, or BadInput ending in `fix` (e.g. "fix or remove the line").

    JSON that Python cannot turn into values is bad input too: nesting deeper than the
    interpreter's recursion limit, a number of thousands of digits. A leading BOM (as
    Windows tools write) is skipped.
    """
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as err:
        at = f" at line {err.lineno}" if "\n" in text else ""  # a JSONL line's number is in its path
        raise BadInput(f"not valid JSON ({err.msg}{at}); {fix}") from None
    except RecursionError:
        raise BadInput(f"JSON nested too deeply to read; {fix}") from None
    except ValueError:  # int() refuses numbers over sys.get_int_max_str_digits() digits
        raise BadInput(f"holds a number with thousands of digits, too long to read (quote it); {fix}") from None


def jsonl_records(path: Path, text: str) -> Iterator[Record]:
    """One record per non-blank line of a JSON Lines file, named `file:line`."""
    where = shown(path)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield f"{where}:{lineno}", f"line {lineno}", _json_object(line, "line")


def _json_object(line: str, what: str) -> Mapping[str, Any] | BadInput:
    try:
        record = parse_json(line, f"fix or remove the {what}")
    except BadInput as err:
        return err
    if not isinstance(record, dict):
        return BadInput(f"expected a JSON object, got {type(record).__name__}; fix or remove the {what}")
    return record


def with_path(loaded: tuple[list[Document], list[LoadFailure]], path: Path) -> tuple[list[Document], list[LoadFailure]]:
    """Documents from one file remember it, so a sync can prune only what that file yielded."""
    docs, failures = loaded
    where = Path(os.path.abspath(path)).as_posix()
    # Made directly: dataclasses.replace reads the fields anew for every document.
    return [Document(d.id, d.text, d.title, where, d.metadata) for d in docs], failures
