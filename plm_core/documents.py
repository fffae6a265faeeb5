"""Records -> documents, and the one check every document passes before it is stored.

Loaders and the Python API (`job.ingest([Document(...), {"id": ..., "text": ...}])`) go
through `check_document`, so a bad record becomes one `failed:` line naming what is wrong
while every other record lands, never a batch lost to a UnicodeEncodeError in the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from plm_core.errors import PlmUserError
from plm_core.records import Document

MAX_ID_CHARS = 512
MAX_METADATA_DEPTH = 20


def _text(value: Any, what: str) -> str:
    """`value` must be a string encodable as UTF-8 (no lone surrogates)."""
    if not isinstance(value, str):
        raise PlmUserError(f"{what} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise PlmUserError(
            f"{what} holds text that is not valid Unicode (a lone surrogate at character {err.start}): "
            "fix the source encoding"
        ) from None
    return value


def _check_metadata(value: Any, where: str, depth: int = 0) -> None:
    """JSON-like metadata only: strings, finite numbers, booleans, null, lists and tables."""
    if depth > MAX_METADATA_DEPTH:
        raise PlmUserError(f"{where} is nested more than {MAX_METADATA_DEPTH} levels deep")
    if isinstance(value, str):
        _text(value, where)
    elif isinstance(value, float) and not math.isfinite(value):
        raise PlmUserError(f"{where} is {value}, not a finite number")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise PlmUserError(f"{where} has a non-string key {key!r}")
            _text(key, f"a key in {where}")
            _check_metadata(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_metadata(item, f"{where}[{i}]", depth + 1)
    elif value is not None and not isinstance(value, (bool, int, float)):
        try:  # dates and other values loaders produce: stored as their JSON text
            json.dumps(value, default=str)
        except (TypeError, ValueError):
            raise PlmUserError(f"{where} = {value!r} cannot be stored as JSON") from None


def check_document(doc: Document) -> None:
    """Raise PlmUserError (one line) when `doc` cannot be indexed as given."""
    if not isinstance(doc.id, str) or not doc.id.strip():
        raise PlmUserError(f"document id must be a non-empty string, got {doc.id!r}")
    _text(doc.id, f"document id {doc.id[:80]!r}")
    if len(doc.id) > MAX_ID_CHARS:
        raise PlmUserError(f"document id {doc.id[:40]!r}... has {len(doc.id)} characters; at most {MAX_ID_CHARS}")
    where = f"document {doc.id!r}"
    _text(doc.text, f"{where}: text")
    if not doc.text.strip():
        raise PlmUserError(f"{where}: text is empty: nothing to index")
    _text(doc.title, f"{where}: title")
    _text(doc.path, f"{where}: path")
    if not isinstance(doc.metadata, Mapping):
        raise PlmUserError(f"{where}: metadata must be a table, got {type(doc.metadata).__name__}")
    _check_metadata(doc.metadata, f"{where}: metadata")


def record_id(rec: Mapping[str, Any], id_fields: tuple[str, ...] = ("id", "_id")) -> str:
    """A record's id: a non-empty string or an integer (written as text)."""
    for field in id_fields:
        if field in rec:
            value = rec[field]
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise PlmUserError(f"record id {field!r} must be a string or an integer, got {type(value).__name__}")
            text = str(value)
            if not text.strip():
                raise PlmUserError(f"record id {field!r} is empty")
            return text
    raise PlmUserError(f"record has no {' or '.join(repr(f) for f in id_fields)}: {str(rec)[:80]}")


def document_from_record(
    rec: Mapping[str, Any],
    *,
    text_field: str = "text",
    id_fields: tuple[str, ...] = ("id", "_id"),
    include_title: bool = False,
    path: str = "",
) -> Document:
    """A document from a JSON-like record, strictly: the id is a string or an integer, the
    text a non-blank string, the title a string, the metadata a table. With
    `include_title` the title is also searched (title, blank line, text)."""
    if not isinstance(rec, Mapping):
        raise PlmUserError(f"a record must be a JSON object, got {type(rec).__name__}")
    doc_id = record_id(rec, id_fields)
    where = f"record {doc_id!r}"
    if text_field not in rec:
        raise PlmUserError(f"{where} has no {text_field!r} field")
    text = rec[text_field]
    if text is None:
        raise PlmUserError(f"{where}: {text_field!r} is null")
    _text(text, f"{where}: {text_field!r}")
    title = rec.get("title") or ""
    if not isinstance(title, str):
        raise PlmUserError(f"{where}: 'title' must be a string, got {type(title).__name__}")
    metadata = rec.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise PlmUserError(f"{where}: 'metadata' must be a table, got {type(metadata).__name__}")
    body = f"{title}\n\n{text}" if include_title and title.strip() else text
    doc = Document(id=doc_id, text=body, title=title, path=path, metadata=dict(metadata))
    check_document(doc)
    return doc
