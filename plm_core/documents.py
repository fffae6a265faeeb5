"""Turning records into documents, and checking documents (placeholder; being replaced)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plm_core.errors import PlmUserError
from plm_core.records import Document


def document_from_record(rec: Mapping[str, Any], *, text_field: str = "text") -> Document:
    if "id" not in rec and "_id" not in rec:
        raise PlmUserError(f"record has no 'id' or '_id': {str(rec)[:80]}")
    if text_field not in rec:
        raise PlmUserError(f"record {rec.get('id', rec.get('_id'))!r} has no {text_field!r} field")
    return Document(
        id=str(rec.get("id", rec.get("_id"))),
        text=str(rec[text_field]),
        title=str(rec.get("title", "")),
        metadata=dict(rec.get("metadata") or {}),
    )


def check_document(doc: Document) -> None:
    return None
