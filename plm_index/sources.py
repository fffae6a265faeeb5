"""Reading what an ingest is given: paths (through the job's loader), Document objects and
plain records, with one rule for duplicate ids: the first claim wins."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Loader
from plm_core.records import Document, LoadFailure
from plm_index.documents import check_document, check_id, document_from_record
from plm_index.file_stats import Seen, now_ns, root_for, signature

# A LoadFailure is a source that was already read and rejected (a record a loader turned
# down before the sync), reported as one `failed:` line like any other.
Source = str | Path | Document | Mapping[str, Any] | LoadFailure


def as_sources(sources: Any) -> list[Source]:
    """The sources as a list; one path, Document or record alone is one source (a plain
    string would otherwise be read character by character)."""
    if isinstance(sources, (str, Path, Document, Mapping, LoadFailure)):
        return [sources]
    if not isinstance(sources, Iterable):
        raise PlmUserError(
            f"sources must be paths, documents or records (or a list of them), got {type(sources).__name__}"
        )
    items = list(sources)
    for item in items:
        if not isinstance(item, (str, Path, Document, Mapping, LoadFailure)):
            raise PlmUserError(f"a source must be a path, a Document or a record (dict), got {type(item).__name__}")
    return items


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path`, every symlink resolved, is `root` (resolved too) or lies under it: the
    boundary of a folder being loaded or watched, which a link must not lead out of."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def _printable(text: Any) -> str:
    """A path or name that prints on any terminal (lone surrogates escaped)."""
    return str(text or "").encode("utf-8", "backslashreplace").decode("utf-8")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def failure_line(failure: LoadFailure, limit: int = 1000) -> str:
    """`failed: PATH: why` as one line whatever a file's name holds: a newline, ESC or any
    other control character is escaped (`\\n`, `\\x1b`), never printed, and a part longer than
    `limit` characters is cut, saying how long it was."""

    def shown(text: str) -> str:
        text = _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), _printable(text))
        return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"

    return f"failed: {shown(failure.path)}: {shown(failure.error)}"


def _valid_id(src: Any) -> str:
    """The id of a rejected Document when it could name a stored one (so a sync keeps that
    document's stored version), else ""."""
    doc_id = getattr(src, "id", "")
    try:
        check_id(doc_id)
    except PlmUserError:
        return ""
    return str(doc_id)


@dataclass
class Loaded:
    """What the sources gave: documents read, files that failed, and, for loaders that list
    their files (`Loader.files`), what a sync needs to read only changed files and to prune
    only what is gone from disk."""

    docs: list[Document] = field(default_factory=list)
    failed: list[LoadFailure] = field(default_factory=list)
    unchanged: dict[str, Seen] = field(default_factory=dict)  # path -> its stored document, not read
    signatures: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # path -> size, mtime, ctime, inode
    read: set[str] = field(default_factory=set)  # absolute paths read or listed: what prune may judge
    roots: list[str] = field(default_factory=list)  # folders listed, absolute
    listed_ns: int = 0  # when the first folder was listed
    unread: dict[str, list[str]] = field(default_factory=dict)  # extension -> files no converter reads


# Given a list of listed paths, the entries a sync may trust without reading those files.
Lookup = Callable[[list[str]], dict[str, Seen]]


def load_sources(
    sources: Sequence[Source],
    loader: Loader | None,
    where: str,
    seen: Lookup | None = None,
    roots: Sequence[str] = (),
) -> Loaded:
    """Documents from every source, plus the files (or records) that could not be read.

    A source that is itself unusable (a missing path) raises before anything changes; a
    second document with an id already seen is a failure, the first one wins, unless it
    comes from the same file (a folder given twice, or a file inside a given folder): that
    is the same document read again, and is taken once.

    A folder whose loader lists its files is read file by file: a file `seen` vouches for
    (same size and modification time as when its stored document was read) is not read.
    Ids are relative to the outermost of `roots` (folders read before) holding the source,
    else to the folder given (a file: its own folder), so a file or subfolder given later
    keeps the id it got when its whole folder was read.
    """
    out = Loaded()
    # id -> where it was first claimed: by a document, or by a file that failed (whose
    # stored version must stay, not be replaced by a later source's file of that id).
    owner: dict[str, str] = {}
    read: set[tuple[str, str]] = set()  # (id, real path) of every document taken from a file
    reported: set[tuple[str, str]] = set()
    real = functools.lru_cache(maxsize=4096)(os.path.realpath)  # a .jsonl's records share one path

    def take(found: Sequence[Document], failed: Sequence[LoadFailure]) -> None:
        for d in found:
            same = (d.id, real(d.path)) if d.path else None
            if same is not None and same in read:
                continue
            if d.id in owner:
                msg = f"duplicate document id {d.id!r} (also {owner[d.id]}, which keeps it)"
                out.failed.append(LoadFailure(d.path or "records", msg, d.id))
            else:
                owner[d.id] = d.path or "an earlier record"
                out.docs.append(d)
                if same is not None:
                    read.add(same)
            if d.path:
                out.read.add(d.path)
        for f in failed:
            if (f.path, f.error) in reported:
                continue  # the same file read again fails the same way
            reported.add((f.path, f.error))
            out.failed.append(f)
            if f.doc_id:
                owner.setdefault(f.doc_id, f.path)

    for n, src in enumerate(sources, 1):
        if isinstance(src, LoadFailure):
            take([], [src])
        elif isinstance(src, (Document, Mapping)):
            try:
                doc = src if isinstance(src, Document) else document_from_record(src)
                check_document(doc)
            except PlmUserError as err:
                take([], [LoadFailure(_printable(getattr(src, "path", "")) or f"record {n}", str(err), _valid_id(src))])
                continue
            take([doc], [])
        else:
            if loader is None:
                raise ConfigError(f"{where}: no loader stage in [index] to read {src}")
            loader.ensure_warm()
            path = os.path.abspath(src)
            root = root_for(path, roots)
            listed = loader.files(path) if lists_files(loader) and os.path.isdir(path) else None
            if listed is not None:
                out.listed_ns = out.listed_ns or now_ns()
                out.roots.append(path)
                for ext, names in loader.unread().items():
                    out.unread.setdefault(ext, []).extend(names)
                take([], listed[1])
                _read_listed(loader, root or path, listed[0], seen, out, owner, take)
            elif root is not None and root != path and lists_files(loader):
                out.read.add(path)  # a file inside a folder read before: named from that folder
                out.listed_ns = out.listed_ns or now_ns()
                if (sig := signature(path)) is not None:  # before reading: remembered as a listed file is
                    out.signatures[path] = sig
                take(*loader.load_files(root, [path]))
            else:
                take(*loader.load(str(src)))
    return out


def lists_files(loader: Loader | None) -> bool:
    """Whether the loader lists its files (one document each) for a sync to check."""
    return loader is not None and type(loader).files is not Loader.files


def _read_listed(
    loader: Loader,
    root: str,
    listed: list[str],
    seen: Lookup | None,
    out: Loaded,
    owner: dict[str, str],
    take: Callable[[Sequence[Document], Sequence[LoadFailure]], None],
) -> None:
    """Read the listed files of one folder, except those `seen` vouches for."""
    new = [p for p in listed if p not in out.signatures]
    for p in new:
        if (sig := signature(p)) is not None:
            out.signatures[p] = sig
    out.read.update(listed)
    trusted = seen(new) if seen is not None and new else {}
    todo: list[str] = []
    for p in new:
        entry = trusted.get(p)
        if entry is not None and entry.signature == out.signatures.get(p) and entry.doc_id not in owner:
            out.unchanged[p] = entry
            owner[entry.doc_id] = p
        else:
            todo.append(p)
    if todo:
        take(*loader.load_files(root, todo))
