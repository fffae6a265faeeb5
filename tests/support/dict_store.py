"""DictStore: a store in a few dicts, change feed included, written from the store contract
alone (docs/contracts/stores.md): what a third party might write first. Its "disk" is a dict
by location, written on close(), so a store opened again where it was finds what it held."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import plm
from plm import StoreProblem

# What a DictStore keeps at each location between close() and open(): its "disk".
DISKS: dict[str, dict[str, Any]] = {}
KEPT = ("docs", "rows", "meta", "places", "counter", "position", "removed")
LOCATIONS = itertools.count()


class DictStore(plm.Store):
    """A store in a few dicts, change feed included: what a third party might write first."""

    name = "dict_store"

    def open(self, location: str, create: bool = True) -> None:
        self.location = location
        if location in DISKS:
            self.__dict__.update(DISKS[location])
            return
        self.docs: dict[str, tuple[plm.Document, str]] = {}  # insertion order: index order
        self.rows: dict[str, list[list[Any]]] = {}  # doc id -> [seq, chunk, vector, model] per chunk
        self.meta: dict[str, str] = {}
        self.places: dict[str, None] = {}  # every document ever stored, in the order first stored
        self.counter, self.position = 0, 0
        self.removed: list[tuple[int, int]] = []  # (position removed at, seq)

    def close(self) -> None:
        DISKS[self.location] = {key: getattr(self, key) for key in KEPT}

    def get_meta(self, key: str) -> str | None:
        return self.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self.meta[key] = value

    def version(self) -> plm.CorpusVersion:
        return plm.CorpusVersion("dict", self.counter, str(self.counter))

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        yield

    def _all(self) -> list[list[Any]]:
        return [row for doc_id in self.docs for row in self.rows[doc_id]]

    def _seq(self) -> int:
        self.position += 1
        return self.position

    def doc_fingerprints(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        return {k: fp for k, (_, fp) in self.docs.items() if ids is None or k in ids}

    def doc_paths(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        return {k: d.path or "" for k, (d, _) in self.docs.items() if paths is None or d.path in paths}

    def get_document(self, doc_id: str) -> plm.Document | None:
        return self.docs[doc_id][0] if doc_id in self.docs else None

    def replace_documents(self, documents, chunks, matrix=None, model=None, fingerprints=None) -> None:  # type: ignore[no-untyped-def]
        for i, doc in enumerate(documents):
            self._drop(doc.id)
            self.docs[doc.id] = (doc, fingerprints[i] if fingerprints else "")
            self.places.setdefault(doc.id, None)
            self.rows.setdefault(doc.id, [])
        for i, chunk in enumerate(chunks):
            vector = None if matrix is None else np.asarray(matrix[i], np.float32)
            self.rows[chunk.doc_id].append([self._seq(), chunk, vector, model])
        if matrix is not None and len(chunks):
            self.meta["model"] = model  # the store's model: the last one written
        self.counter += bool(documents)

    def _drop(self, doc_id: str) -> None:
        for row in self.rows.get(doc_id, []):
            self.removed.append((self._seq(), row[0]))
        self.rows[doc_id] = []

    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        gone = [d for d in dict.fromkeys(doc_ids) if d in self.docs]
        for doc_id in gone:
            self._drop(doc_id)
            del self.docs[doc_id], self.rows[doc_id]
        self.counter += bool(gone)
        return gone

    def chunk_ids(self) -> list[str]:
        return [row[1].id for row in self._all()]

    def chunks(self) -> list[plm.Chunk]:
        return [row[1] for row in self._all()]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, plm.Chunk]:
        return {row[1].id: row[1] for row in self._all() if row[1].id in chunk_ids}

    def chunk_metadata(self) -> list[dict[str, Any]]:
        return [dict(row[1].metadata) for row in self._all()]

    def filter_mask(self, filters: Mapping[str, Any]) -> Any:
        keep = plm.compile_filters(filters)  # None: no condition
        return np.array([keep is None or keep(m) for m in self.chunk_metadata()], dtype=bool)

    def write_vectors(self, chunk_ids, matrix, model, texts=None) -> int:  # type: ignore[no-untyped-def]
        by_id = {row[1].id: row for row in self._all()}
        written = 0
        for i, chunk_id in enumerate(chunk_ids):
            row = by_id.get(chunk_id)
            if row is None or (texts is not None and row[1].index_text != texts[i]):
                continue
            self.removed.append((self._seq(), row[0]))
            row[:] = [self._seq(), row[1], np.asarray(matrix[i], np.float32), model]
            self.meta["model"] = model
            written += 1
        self.counter += bool(written)
        return written

    def chunks_needing_vectors(self, model: str) -> list[plm.Chunk]:
        return [row[1] for row in self._all() if row[2] is None or row[3] != model]

    def vectors(self) -> tuple[list[str], Any, str | None]:
        rows = [row for row in self._all() if row[2] is not None]
        if not rows:
            return [], None, None
        return [r[1].id for r in rows], np.stack([r[2] for r in rows]), rows[0][3]

    def vector_count(self) -> int:
        return sum(row[2] is not None for row in self._all())

    def stats(self) -> dict[str, Any]:
        ids, matrix, model = self.vectors()
        return {
            "documents": len(self.docs),
            "chunks": len(self._all()),
            "vectors": len(ids),
            "model": model,
            "dimension": None if matrix is None else matrix.shape[1],
            "corpus_version": self.counter,
            "bytes": 0,
        }

    def consistency_problems(self) -> list[StoreProblem]:
        problems = []
        n = sum(row[2] is None for row in self._all())
        if n and self.vector_count():
            problems.append(StoreProblem(StoreProblem.MISSING_VECTORS, n, f"{n} chunks have no vector"))
        if (n := len({row[3] for row in self._all() if row[2] is not None})) > 1:
            problems.append(StoreProblem(StoreProblem.MIXED_MODELS, n, f"vectors from {n} models"))
        return problems

    # the change feed
    def feed_position(self) -> int | None:
        return self.position

    def _order(self) -> dict[str, int]:
        # A chunk's key never changes while its seq lives: the document's first place, then its position.
        places = {doc_id: n for n, doc_id in enumerate(self.places)}
        return {row[1].id: places[d] * 10_000 + j for d in self.docs for j, row in enumerate(self.rows[d])}

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        order = self._order()
        rows = sorted((r for r in self._all() if r[0] > position), key=lambda r: r[0])
        return (
            [r[0] for r in rows],
            [r[1].id for r in rows],
            [order[r[1].id] for r in rows],
            [r[1].index_text for r in rows],
        )

    def removed_since(self, position: int) -> list[int] | None:
        return sorted(seq for at, seq in self.removed if at > position and seq <= position)

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        rows = sorted((r for r in self._all() if r[0] > position and r[2] is not None), key=lambda r: r[0])
        if {r[3] for r in rows} - {self.meta.get("model")}:
            raise plm.StoreError("vectors of another model than the store's: half re-embedded")
        return [r[0] for r in rows], np.stack([r[2] for r in rows]) if rows else None, rows[0][3] if rows else None


def _make(cls: type[DictStore]) -> Any:
    location = f"(memory {next(LOCATIONS)})"

    def make() -> DictStore:
        store = cls()
        store.open(location)
        return store

    return make
