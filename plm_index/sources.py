"""Reading what an ingest is given: paths (through the job's loader), Document objects and
plain records, with one rule for duplicate ids: the first claim wins."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from plm_core.errors import ConfigError, PlmUserError
from plm_core.interfaces import Loader
from plm_core.records import Document, LoadFailure
from plm_index.documents import check_document, check_id, document_from_record

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


def _valid_id(src: Any) -> str:
    """The id of a rejected Document when it could name a stored one (so a sync keeps that
    document's stored version), else ""."""
    doc_id = getattr(src, "id", "")
    try:
        check_id(doc_id)
    except PlmUserError:
        return ""
    return str(doc_id)


def load_sources(
    sources: Sequence[Source], loader: Loader | None, where: str
) -> tuple[list[Document], list[LoadFailure]]:
    """Documents from every source, plus the files (or records) that could not be read.

    A source that is itself unusable (a missing path) raises before anything changes; a
    second document with an id already seen is a failure, the first one wins, unless it
    comes from the same file (a folder given twice, or a file inside a given folder): that
    is the same document read again, and is taken once.
    """
    docs: list[Document] = []
    failures: list[LoadFailure] = []
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
                failures.append(LoadFailure(d.path or "records", msg, d.id))
            else:
                owner[d.id] = d.path or "an earlier record"
                docs.append(d)
                if same is not None:
                    read.add(same)
        for f in failed:
            if (f.path, f.error) in reported:
                continue  # the same file read again fails the same way
            reported.add((f.path, f.error))
            failures.append(f)
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
            take(*loader.load(str(src)))
    return docs, failures
