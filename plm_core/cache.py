"""A content-hash cache for expensive per-chunk work (keywords, entities, embeddings).

Keys are sha256(stage identity + input text), so any job, config or re-ingest that asks
the same stage with the same settings for the same text gets the stored answer. One
SQLite file under PLM_DATA_DIR is shared by every job: `plm eval` over several configs
computes shared work once, and re-ingesting a changed file recomputes only new texts.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from plm_core.component import BaseComponent
from plm_core.records import Chunk


def stage_identity(use: str, config: Any) -> str:
    """A stable string for a stage and its settings (what makes its outputs reusable)."""
    dumped = config.model_dump(mode="json") if hasattr(config, "model_dump") else config
    return f"{use}:{json.dumps(dumped, sort_keys=True, default=str)}"


def content_key(identity: str, text: str) -> str:
    return hashlib.sha256(identity.encode() + b"\0" + text.encode()).hexdigest()


class ContentCache:
    """Key -> bytes in one SQLite file (WAL, safe for several processes)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            marks = ",".join("?" * len(part))
            for key, value in self.db.execute(f"SELECT key, value FROM cache WHERE key IN ({marks})", part):
                found[key] = value
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        self.db.execute("BEGIN")
        try:
            self.db.executemany("INSERT OR REPLACE INTO cache(key, value) VALUES(?, ?)", items)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


def _encode_fields(chunk: Chunk, fields: Sequence[str]) -> bytes:
    out: dict[str, Any] = {}
    for name in fields:
        value = getattr(chunk, name)
        out[name] = {k: list(v) for k, v in value.items()} if isinstance(value, Mapping) else value
    return json.dumps(out).encode()


def _decode_fields(chunk: Chunk, raw: bytes) -> Chunk:
    values: dict[str, Any] = {}
    for name, value in json.loads(raw).items():
        if isinstance(value, dict):
            values[name] = {k: tuple(v) for k, v in value.items()}
        elif isinstance(value, list):
            values[name] = tuple(value)
        else:
            values[name] = value
    return replace(chunk, **values)


class CachedStage(BaseComponent[list[Chunk], list[Chunk]]):
    """Wraps a chunk stage that declares `cache_fields`: only uncached texts reach it."""

    input_type = list[Chunk]
    output_type = list[Chunk]

    def __init__(self, stage: Any, use: str, cache: ContentCache) -> None:
        super().__init__(stage.config)
        self.stage = stage
        self.label = getattr(stage, "label", use)
        self.fields: tuple[str, ...] = tuple(stage.cache_fields)
        self.identity = stage_identity(use, stage.config)
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self.read = True  # False: recompute everything (ingest --force), still store results

    def warm_up(self) -> None:
        """The wrapped stage warms up lazily, only when some text is not cached."""

    def run(self, data: list[Chunk]) -> list[Chunk]:
        keys = [content_key(self.identity, c.text) for c in data]
        found = self.cache.get_many(keys) if self.read else {}
        out: list[Chunk | None] = [
            _decode_fields(c, found[k]) if k in found else None for c, k in zip(data, keys, strict=True)
        ]
        todo = [i for i, c in enumerate(out) if c is None]
        self.hits += len(data) - len(todo)
        self.misses += len(todo)
        if todo:
            self.stage.ensure_warm()
            computed = self.stage.run([data[i] for i in todo])
            for i, chunk in zip(todo, computed, strict=True):
                out[i] = chunk
            self.cache.put_many((keys[i], _encode_fields(c, self.fields)) for i, c in zip(todo, computed, strict=True))
        return [c for c in out if c is not None]
