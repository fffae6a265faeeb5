"""Fingerprints: what makes a stored document current (its content and everything on the
index side it depends on), compared by a sync to skip what has not changed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from plm_core.records import Document

FORMAT_VERSION = "1"


def doc_fingerprint(index_fp: str | Any, doc: Document) -> str:
    """What makes a stored document current: the index-side fingerprint and its content
    (`index_fp` may be `hashlib.sha256(index_fp.encode())`, copied for each document)."""
    h = index_fp.copy() if not isinstance(index_fp, str) else hashlib.sha256(index_fp.encode())
    meta = _sorted_json(dict(doc.metadata)) if doc.metadata else "{}"
    # id, title, path, metadata and text, each followed by a NUL byte, hashed in one update
    h.update(("\0".join((doc.id, doc.title, doc.path, meta, doc.text)) + "\0").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


_sorted_json = json.JSONEncoder(sort_keys=True, default=str).encode  # json.dumps(..., sort_keys=True, default=str)


def index_fingerprint(index_config: Mapping[str, Any], model: str | None, model_version: str) -> str:
    """What every stored document depends on besides its own content: the index-side
    config and the embedding model actually loaded."""
    h = hashlib.sha256(FORMAT_VERSION.encode())
    h.update(json.dumps(dict(index_config), sort_keys=True, default=str).encode())
    if model is not None:
        h.update(f"{model}\0{model_version}".encode())
    return h.hexdigest()
