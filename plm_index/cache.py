"""A content-hash cache for expensive per-chunk work (keywords, entities, embeddings).

Keys are sha256(stage identity + input text), so any job, config or re-ingest that asks
the same stage with the same settings for the same text gets the stored answer. One
SQLite file under PLM_DATA_DIR is shared by every job: `plm eval` over several configs
computes shared work once, and re-ingesting a changed file recomputes only new texts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from plm_core.component import BaseComponent
from plm_core.interfaces import Embedder
from plm_core.pipeline import check_output
from plm_core.records import Chunk
from plm_index.progress import bar_as_lines, on_terminal

log = logging.getLogger(__name__)


def stage_identity(use: str, config: Any) -> str:
    """A stable string for a stage and its settings (what makes its outputs reusable)."""
    dumped = config.model_dump(mode="json") if hasattr(config, "model_dump") else config
    return f"{use}:{json.dumps(dumped, sort_keys=True, default=str)}"


def content_key(identity: str, text: str) -> str:
    return hashlib.sha256(identity.encode() + b"\0" + text.encode()).hexdigest()


class ContentCache(ABC):
    """Key -> bytes, shared by every job that uses it (the interface a backend implements)."""

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored values of the keys that are present."""

    @abstractmethod
    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Store values (replacing any under the same keys)."""

    def close(self) -> None:  # noqa: B027 - optional: most backends hold nothing to release
        """Release the backend."""


class SQLiteContentCache(ContentCache):
    """One SQLite file (WAL, safe for several processes)."""

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


class FailSafeCache(ContentCache):
    """A cache that can never stop a job: the first error (read-only folder, corrupt file,
    a lock held too long) logs one warning and turns it into "no cache" from then on."""

    def __init__(self, open_inner: Callable[[], ContentCache], where: str) -> None:
        self._open, self.where = open_inner, where
        self._inner: ContentCache | None = None
        self.broken = False

    def _fail(self, err: BaseException) -> None:
        log.warning("content cache %s unusable (%s): continuing without it", self.where, err)
        self.broken = True

    def _cache(self) -> ContentCache | None:
        if self._inner is None and not self.broken:
            try:
                self._inner = self._open()
            except (OSError, sqlite3.Error) as err:
                self._fail(err)
        return self._inner

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        cache = self._cache()
        try:
            return cache.get_many(keys) if cache is not None else {}
        except (OSError, sqlite3.Error) as err:
            self._fail(err)
            return {}

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        cache = self._cache()
        try:
            if cache is not None:
                cache.put_many(items)
        except (OSError, sqlite3.Error) as err:
            self._fail(err)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()


def open_cache(data_dir: str | Path) -> ContentCache:
    """The shared content cache under the data folder, opened on first use, never fatal."""
    path = Path(data_dir) / "cache.sqlite"
    return FailSafeCache(lambda: SQLiteContentCache(path), str(path))


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
        super().__init__(stage.config, label=stage.label)
        self.stage = stage
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
            check_output(self.stage, computed)
            for i, chunk in zip(todo, computed, strict=True):
                out[i] = chunk
            self.cache.put_many((keys[i], _encode_fields(c, self.fields)) for i, c in zip(todo, computed, strict=True))
        return [c for c in out if c is not None]


def warm_to_embed(embedder: Any) -> None:
    """Load what embedding needs: an embedder that embeds without its full model
    (`warm_to_embed`, e.g. an exported ONNX model: no torch) loads only that; any other
    loads its model. A server and a one-file ingest are then ready seconds sooner."""
    if embedder is not None:
        getattr(embedder, "warm_to_embed", embedder.ensure_warm)()


def _size_key(identity: str) -> str:
    """Where the cache keeps the byte size of the vectors filed under `identity`."""
    return content_key(identity, "\0row bytes")


class CachedEmbedder:
    """Chunk vectors through the cache, keyed by the model actually loaded (not the
    preference list that chose it) and its settings: only texts the cache lacks are embedded.
    Cached entries of the wrong size (damaged, or written by something else) are recomputed,
    never returned as vectors."""

    def __init__(self, embedder: Embedder, cache: ContentCache | None) -> None:
        self.embedder, self.cache = embedder, cache
        self.computed = self.cached = 0
        self.load_seconds = 0.0  # loading the model, when a call had to (the sync reports it apart)
        self._row_bytes: dict[str, int] = {}

    def model_name(self) -> str:
        """The model the vectors come from: the loaded one, or, before any text needed the
        model, the one it will load (`expected_model_name`: no weights read)."""
        e = self.embedder
        return e.model_name if e.is_warm else e.expected_model_name

    def _warm(self) -> None:
        if not self.embedder.is_warm:
            t0 = time.perf_counter()
            warm_to_embed(self.embedder)
            self.load_seconds += time.perf_counter() - t0

    def _loaded_other(self, name: str, version: str) -> bool:
        """Whether the model now loaded is not the one these keys were made for (a fallback
        from the config's preference list, when the first failed to load)."""
        e = self.embedder
        return e.is_warm and (e.model_name, e.model_version) != (name, version)

    def _expected_bytes(self, identity: str, name: str, version: str) -> int | None:
        """A vector's size in bytes: written beside the vectors when they are computed, so a
        sync whose texts are all cached reads it and loads no model; else one tiny embedding
        (None: that loaded another model than `name`, whose keys these are not)."""
        if identity not in self._row_bytes:
            assert self.cache is not None
            size_key = _size_key(identity)
            known = self.cache.get_many([size_key]).get(size_key, b"")
            size = int(known) if known.isdigit() and len(known) < 10 else 0  # damaged: asked again
            if size <= 0 or size % 4:
                self._warm()
                if self._loaded_other(name, version):
                    return None
                size = int(self.embedder.embed(["size probe"], progress=False).shape[1]) * 4
                self.cache.put_many([(size_key, str(size).encode())])
            self._row_bytes[identity] = size
        return self._row_bytes[identity]

    def embed(self, texts: Sequence[str], read: bool = True, progress: bool = False) -> Any:
        """Vectors of `texts`, those in the cache read from it. The others go to the model in
        one call, in their order, repeats included: a model that batches by length (as
        sentence-transformers does) gives each the vector that call over all of them would.
        The model is loaded only when a text is not in the cache; keys name the model that
        gives the vectors, found without loading it (`expected_model_name`) until it loads."""
        import numpy as np

        embedder = self.embedder
        if self.cache is None:
            self._warm()
            self.computed += len(texts)
            return embedder.embed(list(texts), progress=progress)
        settings = embedder.config.model_dump(mode="json", exclude={"model"})
        for _ in range(3):  # twice at most: once for the model expected, once for the one that loaded
            name, version = self.model_name(), embedder.model_version
            identity = stage_identity(f"embed:{name}:{version}", settings)
            keys = [content_key(identity, t) for t in texts]
            found = self.cache.get_many(keys) if read else {}
            size = self._expected_bytes(identity, name, version) if found else 0
            if size is None:
                continue  # sizing loaded another model than expected: its own keys
            found = {k: v for k, v in found.items() if len(v) == size}
            missing = [i for i, k in enumerate(keys) if k not in found]
            if not missing or embedder.is_warm:
                break
            self._warm()  # only now: texts the cache lacks need the model
            if not self._loaded_other(name, version):
                break
        else:
            raise RuntimeError(f"embedder {embedder.label!r} names another model each time it is asked")
        rows: dict[int, Any] = {}
        if missing:
            bar = progress and on_terminal()
            if progress and not bar:  # a log or a pipe: a line says what the silence that follows is
                print(
                    f"embed: {len(missing):,} chunks in one call, {len(keys) - len(missing):,} from the cache",
                    file=sys.stderr,
                    flush=True,
                )
            with bar_as_lines("embed") if progress and not bar else contextlib.nullcontext():
                new = embedder.embed([texts[i] for i in missing], progress=progress)
            new = np.asarray(new, dtype=np.float32)
            rows = {i: new[j] for j, i in enumerate(missing)}
            entries = {keys[i]: row.tobytes() for i, row in rows.items()}
            if self._row_bytes.get(identity) != int(new.shape[1]) * 4:  # for a sync that needs no model
                self._row_bytes[identity] = int(new.shape[1]) * 4  # (a wrong entry is put right)
                entries[_size_key(identity)] = str(self._row_bytes[identity]).encode()
            self.cache.put_many(entries.items())
        self.computed += len(missing)
        self.cached += len(keys) - len(missing)
        return np.stack(
            [rows[i] if i in rows else np.frombuffer(found[k], dtype=np.float32) for i, k in enumerate(keys)]
        )
