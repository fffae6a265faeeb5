"""The store contract: the base a store plugin subclasses (`plm.Store`), in four small parts
a store writes together: documents with their versions, chunk reads (with the change feed),
vectors, and diagnostics. Re-exported by `plm_core.interfaces`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from plm_core.component import BaseComponent
from plm_core.errors import PlmUserError
from plm_core.records import Chunk, CorpusVersion, Document, StoreProblem


class DocumentStore(ABC):
    """Documents with their fingerprints, and the corpus version every change moves."""

    @abstractmethod
    def version(self) -> CorpusVersion:
        """Changes whenever documents, chunks or vectors change."""

    @abstractmethod
    def snapshot(self) -> AbstractContextManager[None]:
        """A context in which every read sees one committed state, even while another process writes."""

    @abstractmethod
    def doc_fingerprints(self, ids: Sequence[str] | None = None) -> dict[str, str]:
        """Stored document id -> its stored fingerprint ("" if none); of these ids only, if given."""

    @abstractmethod
    def doc_paths(self, paths: Sequence[str] | None = None) -> dict[str, str]:
        """Stored document id -> the path it was loaded from ("" for records); of these paths only, if given."""

    @abstractmethod
    def replace_documents(
        self,
        documents: Sequence[Document],
        chunks: Sequence[Chunk],
        matrix: Any = None,
        model: str | None = None,
        fingerprints: Sequence[str] | None = None,
    ) -> None:
        """Store documents with exactly these chunks and vectors (row i for chunks[i]),
        replacing what their ids held, in one transaction: a crash leaves each document
        wholly old or wholly new."""

    @abstractmethod
    def delete_documents(self, doc_ids: Sequence[str]) -> list[str]:
        """Remove documents with their chunks and vectors in one transaction; returns the ids that were there."""

    def write_batch(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> None:
        """Insert documents and their chunks (no vectors) in one transaction."""
        self.replace_documents(documents, chunks)

    def paths_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Stored document id -> its path ("" for records), of these ids only (absent ones
        left out): one query where the store can. The default reads every document's path."""
        every = self.doc_paths()
        return {i: every[i] for i in dict.fromkeys(ids) if i in every}

    def get_document(self, doc_id: str) -> Document | None:
        """The stored document with this id (its whole text, title, path, metadata), or None.
        Not abstract, so a third-party store written before it still loads; it then says what
        it lacks when asked (e.g. by `plm serve`'s document view)."""
        raise PlmUserError(f"the {type(self).__name__} store cannot read a document back: it has no get_document()")


class ChunkReader(ABC):
    """Chunks in index order: documents in the order first stored, chunks in document order."""

    @abstractmethod
    def chunk_ids(self) -> list[str]:
        """All chunk ids in index order."""

    def chunk_count(self) -> int:
        """How many chunks `chunk_ids()` would return; a store overrides it to count
        without reading every id (opening a large index must not read them all)."""
        return len(self.chunk_ids())

    @abstractmethod
    def chunks(self) -> list[Chunk]:
        """All chunks in index order."""

    def index_texts(self) -> tuple[list[str], list[str]]:
        """(chunk ids, each chunk's `index_text`) in index order: what a lexical index
        reads, without building every chunk record; a store overrides it to read two columns."""
        chunks = self.chunks()
        return [c.id for c in chunks], [c.index_text for c in chunks]

    @abstractmethod
    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The chunks with these ids (absent ids are left out)."""

    @abstractmethod
    def chunk_metadata(self) -> list[dict[str, Any]]:
        """Each chunk's metadata, in index order."""

    @abstractmethod
    def filter_mask(self, filters: Mapping[str, Any]) -> Any:
        """A boolean numpy array over chunk rows (index order): which pass `filters` (the
        spec of `plm_index.filters`). A SQL store compiles the spec to a WHERE clause; an
        embedded one evaluates `plm_index.filters.compile_filters(filters)` over `chunk_metadata()`."""

    # The change feed: each stored chunk has a `seq` (never reused; a rewritten vector gets a
    # new one), each write moves the position. These defaults: the store keeps no feed.
    def feed_position(self) -> int | None:
        """The position of the current state (0 for a new store); None: no feed."""
        return None

    def rows_since(self, position: int) -> tuple[list[int], list[str], list[int], list[str]]:
        """(seqs, chunk ids, order keys (sorted: index order), index texts) with seq > position, by seq."""
        raise NotImplementedError(f"{type(self).__name__} keeps no change feed")

    def removed_since(self, position: int) -> list[int] | None:
        """Seqs <= position removed (or re-sequenced) since, sorted; None: not known (rebuild)."""
        return None

    def vectors_since(self, position: int) -> tuple[list[int], Any, str | None]:
        """(seqs, float32 matrix, model) of chunks with seq > position that have vectors;
        StoreError when one of them comes from another model than the store's (a refresh
        reads only these rows, so they carry the check)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no change feed")


class VectorStore(ABC):
    """Chunk vectors, with the model that made them."""

    @abstractmethod
    def write_vectors(
        self, chunk_ids: Sequence[str], matrix: Any, model: str, texts: Sequence[str] | None = None
    ) -> int:
        """Vectors for stored chunks (one transaction); with `texts`, rows whose chunk no
        longer holds that text are skipped. Returns the rows written."""

    @abstractmethod
    def chunks_needing_vectors(self, model: str) -> list[Chunk]:
        """Chunks whose vector is missing, damaged or from another model."""

    @abstractmethod
    def vectors(self) -> tuple[list[str], Any, str | None]:
        """(chunk ids, float32 matrix in index order, model name); matrix None if none."""

    @abstractmethod
    def vector_count(self) -> int:
        """How many vectors are stored."""


class StoreDiagnostics(ABC):
    """What `plm index stats` shows and what the core checks before building indexes."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """At least documents, chunks, vectors, model, dimension, corpus_version, bytes."""

    @abstractmethod
    def consistency_problems(self) -> list[StoreProblem]:
        """Broken invariants (chunks without a document or a vector, mixed models); [] if none."""

    def integrity_problems(self) -> list[str]:
        """Damage found by the backend's own check (e.g. SQLite's quick_check); [] if none."""
        return []


class Store(BaseComponent[object, object], DocumentStore, ChunkReader, VectorStore, StoreDiagnostics):
    """Persists documents, chunks (with enrichment) and vectors at one location: a folder
    for embedded stores, a DSN for a server."""

    family = "stores"

    @abstractmethod
    def open(self, location: str, create: bool = True) -> None:
        """Open (with `create`, create if missing) the store at `location`. Read commands
        pass create=False and get a StoreError when nothing is there."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection or files; `open` may be called again."""

    @abstractmethod
    def get_meta(self, key: str) -> str | None:
        """The string `set_meta` stored under `key` (also after reopening), or None."""

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Store a small string under `key` (the runtime's own bookkeeping)."""
