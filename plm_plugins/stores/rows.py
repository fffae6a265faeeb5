"""A chunk as a table row and back, one mapping for every SQL store: the columns in order,
the JSON ones given to the store's own encoder (text for SQLite, jsonb for Postgres)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from plm import Chunk

CHUNK_COLS = "id, doc_id, text, enriched, heading_path, start_char, end_char, stable_id, keywords, entities, metadata"
C_CHUNK_COLS = ", ".join(f"c.{col.strip()}" for col in CHUNK_COLS.split(","))


def chunk_row(c: Chunk, as_json: Callable[[Any], Any]) -> tuple[Any, ...]:
    """The CHUNK_COLS values of a chunk; `as_json` encodes the list and table columns."""
    return (
        c.id,
        c.doc_id,
        c.text,
        c.enriched,
        as_json(list(c.heading_path)),
        c.start_char,
        c.end_char,
        c.stable_id,
        as_json(list(c.keywords)),
        as_json({k: list(v) for k, v in c.entities.items()}),
        as_json(dict(c.metadata)),
    )


def chunk_from_row(r: Sequence[Any], from_json: Callable[[Any], Any]) -> Chunk:
    """A chunk from a row of CHUNK_COLS; `from_json` decodes the list and table columns."""
    return Chunk(
        id=r[0],
        doc_id=r[1],
        text=r[2],
        enriched=r[3],
        heading_path=tuple(from_json(r[4])),
        start_char=r[5],
        end_char=r[6],
        stable_id=r[7] or "",
        keywords=tuple(from_json(r[8])),
        entities={k: tuple(v) for k, v in from_json(r[9]).items()},
        metadata=from_json(r[10]),
    )
