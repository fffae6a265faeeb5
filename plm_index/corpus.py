"""What index builders see of a store: one committed state, read lazily.

`CorpusSnapshot` gives a `CorpusVersion`'s chunk ids, chunks, metadata and vectors, each
read on first use, checked, and kept. It is the runtime's implementation of the kernel's
`plm_core.interfaces.Snapshot` protocol, which is all an `Index` sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plm_core.errors import StoreError
from plm_core.records import CorpusVersion

if TYPE_CHECKING:
    from plm_core.interfaces import Store
    from plm_core.records import Chunk


class CorpusSnapshot:
    """One committed state of a store, read lazily: use it inside the `store.snapshot()`
    context it was taken in. `model` is the embedding model the job loads: vectors of any
    other model are refused, never ranked against that model's query vectors."""

    def __init__(self, store: Store, location: Path | str, model: str | None = None) -> None:
        self.store = store
        self.location = location
        self.model = model
        self.version: CorpusVersion = store.version()

    @classmethod
    def of(cls, chunks: Sequence[Chunk], vectors: Any = None, version: CorpusVersion | None = None) -> CorpusSnapshot:
        """A snapshot of chunks (and vectors, row i for chunks[i]) held in memory: for
        building an index outside a job, e.g. in tests and benchmarks."""
        snap = cls.__new__(cls)
        snap.store, snap.location, snap.model = None, "(memory)", None  # type: ignore[assignment]
        snap.version = version or CorpusVersion("memory", 0)
        snap.__dict__.update(
            chunks=list(chunks), chunk_ids=[c.id for c in chunks], metadata=[dict(c.metadata) for c in chunks]
        )
        snap.__dict__["vectors"] = vectors
        snap.__dict__["position"] = len(chunks)  # chunk i has seq i + 1 and order key i
        return snap

    # The change feed (what segmented indexes read): each chunk's seq, order key and text
    # or vector, for the chunks added after a feed position, and the seqs removed since.
    @cached_property
    def position(self) -> int:
        """The feed position of this state (see `Store.feed_position`)."""
        position = self.store.feed_position() if self.store is not None else None
        return self.n_chunks if position is None else int(position)

    @cached_property
    def _no_feed(self) -> bool:
        """A snapshot in memory, or of a store that keeps no change feed: chunk i (index
        order) is seq i + 1 with order key i, and nothing is known about removals."""
        return self.store is None or self.store.feed_position() is None

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        """(seqs, chunk ids, order keys, index texts) of the chunks with seq > position, by seq."""
        if self._no_feed:
            n = len(self.chunk_ids)
            keep = range(max(0, position), n)
            return (
                [i + 1 for i in keep],
                [self.chunk_ids[i] for i in keep],
                list(keep),
                [self.index_texts[i] for i in keep],
            )
        return self.store.rows_since(position)

    def removed_since(self, position: int) -> list[int] | None:
        """Seqs <= position removed after it; None when the feed does not reach back."""
        if self._no_feed:
            return [] if position == 0 or (self.store is None and position == self.position) else None
        return self.store.removed_since(position)

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        """(seqs, float32 matrix, model) of the chunks with seq > position, by seq; checked as
        `vectors` is: StoreError when half re-embedded or from another model than the job's.
        From position 0 the whole store is checked; past it only the rows read (the store
        refuses a row of another model, `SegmentedIndex._rows` a chunk without its vector, and
        the saved rows were checked when they were read), so a write costs its rows, not the
        corpus (3 s at a million before)."""
        if self._no_feed:
            keep = range(max(0, position), len(self.chunk_ids))
            matrix = None if self.vectors is None else self.vectors[position:]
            return [i + 1 for i in keep], matrix, self.__dict__.get("vectors_model")
        if position <= 0:
            self._check_vectors()
        seqs, matrix, model = self.store.vectors_since(position)
        if len(seqs) and self.model is not None and model != self.model:
            raise StoreError(
                f"the index at {self.location} was embedded with {model!r} but the config now loads "
                f"{self.model!r}: run `plm ingest --force` (or `plm run`)"
            )
        return seqs, matrix, model

    def _check_vectors(self) -> None:
        problems = [p for p in self.store.consistency_problems() if p.about_vectors]
        if problems:
            raise StoreError(
                f"the index at {self.location} is half re-embedded ({'; '.join(map(str, problems))}): "
                "run `plm ingest` on the same sources to finish, or `plm index rebuild` to re-embed what is missing"
            )

    @cached_property
    def chunk_ids(self) -> list[str]:
        return self.store.chunk_ids()

    @cached_property
    def chunks(self) -> list[Chunk]:
        return self.store.chunks()

    @cached_property
    def index_texts(self) -> list[str]:
        """Each chunk's `index_text`, row i for chunk_ids[i], read without the rest of the chunks."""
        if "chunks" in self.__dict__:
            return [c.index_text for c in self.chunks]
        ids, texts = self.store.index_texts()
        self.__dict__.setdefault("chunk_ids", ids)
        return texts

    @cached_property
    def metadata(self) -> list[dict[str, Any]]:
        return self.store.chunk_metadata()

    @cached_property
    def n_chunks(self) -> int:
        """How many chunks, counted without reading their ids unless they are read already."""
        if "chunk_ids" in self.__dict__:
            return len(self.chunk_ids)
        return self.store.chunk_count()

    @cached_property
    def vectors_model(self) -> str | None:
        """The model the store records for its vectors, read without reading any vector."""
        return self.store.get_meta("model") if self.store is not None else None

    @property
    def empty(self) -> bool:
        return not self.n_chunks

    @cached_property
    def vectors(self) -> Any:
        """The float32 matrix, row i for chunk_ids[i]; StoreError when vectors are missing,
        half re-embedded, from another model or out of line with the chunks."""
        import numpy as np

        self._check_vectors()
        ids, matrix, stored_model = self.store.vectors()
        if matrix is None:
            if not self.chunk_ids:  # an empty index (every document deleted)
                return np.zeros((0, 0), dtype=np.float32)
            raise StoreError(
                f"the index at {self.location} has no chunk vectors: add an [embedder] table to the config "
                "and run `plm ingest --force`"
            )
        if self.model is not None and stored_model != self.model:
            # Same dimension or not, another model's query vectors would rank silently wrong.
            raise StoreError(
                f"the index at {self.location} was embedded with {stored_model!r} but the config now loads "
                f"{self.model!r}: run `plm ingest --force` (or `plm run`)"
            )
        if list(ids) != self.chunk_ids:
            raise StoreError(f"the vectors in {self.location} do not line up with its chunks: run `plm ingest --force`")
        return matrix
