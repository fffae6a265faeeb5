"""How the SQLite store writes values into its columns and reads them back: lists and tables
as JSON text, a document's text zlib-compressed, a sha256 fingerprint as its 32 bytes."""

from __future__ import annotations

import json
import re
import sqlite3
import zlib
from typing import Any

try:
    from isal.isal_zlib import compress as _isal_compress
except ImportError:  # a platform without the isal wheel: the standard library's zlib
    _isal_compress = None  # type: ignore[assignment]

from plm import Chunk
from plm_plugins.stores.rows import chunk_from_row

SHA256_HEX = re.compile("[0-9a-f]{64}")


def json_text(value: list[Any] | dict[str, Any]) -> str:
    """A column's JSON text; empty lists and tables (most keyword, entity and heading
    columns) without the encoder's per-call cost."""
    if not value:
        return "[]" if isinstance(value, list) else "{}"
    return _encode(value)


_encode = json.JSONEncoder(default=str).encode  # json.dumps(value, default=str), its encoder made once


def compressed(text: str) -> bytes:
    """zlib's format at level 1, read back with `zlib.decompress`. Made by ISA-L (the `isal`
    wheel) where it is installed: 8 us for an 800-byte document against the standard
    library's 23-28 us, the same size (20-24 s of a million-document ingest). Otherwise the
    standard library, with memLevel 4: it compresses these texts as well as the default 8,
    and its smaller state is allocated without a system call per document."""
    data = text.encode("utf-8", "surrogatepass")
    if _isal_compress is not None:
        return _isal_compress(data, 1)
    packer = zlib.compressobj(1, zlib.DEFLATED, 15, 4)
    return packer.compress(data) + packer.flush()


def document_text(stored: str | bytes) -> str:
    """A document's text as `compressed` stored it; a store written before that holds plain text."""
    return zlib.decompress(stored).decode("utf-8", "surrogatepass") if isinstance(stored, bytes) else stored


def packed(fingerprint: str) -> str | bytes:
    """A sha256 hex fingerprint as its 32 bytes (half the size: 32 MB per million
    documents); anything else as given. `fingerprint_text` reads both back as text."""
    return bytes.fromhex(fingerprint) if SHA256_HEX.fullmatch(fingerprint) else fingerprint


def fingerprint_text(stored: str | bytes | None) -> str:
    """A fingerprint as `packed` stored it, as text again ("" for none)."""
    return stored.hex() if isinstance(stored, bytes) else stored or ""


def chunk_of_row(r: sqlite3.Row) -> Chunk:
    """A chunk from a row of `rows.CHUNK_COLS`, its JSON columns decoded."""
    return chunk_from_row(r, json.loads)
