"""Columns an index build keeps beside its own files, memory-mapped when opened so that
opening reads nothing proportional to the corpus: the row -> chunk id column and a dense
float32 vector matrix. Not a registered stage; used by `bm25s`, `dense` and `faiss`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

IDS_FILE = "chunk_ids.npy"  # row -> chunk id, so opening an index reads no id from the store
VECTORS_FILE = "vectors.npy"


def save_ids(path: Path, ids: Sequence[str]) -> None:
    """Chunk ids as one fixed-width UTF-8 byte array (np.save), row i for chunk i."""
    import numpy as np

    np.save(path, np.array([i.encode("utf-8", "surrogatepass") for i in ids], dtype=bytes), allow_pickle=False)


class IdColumn(Sequence[str]):
    """Chunk ids read from a memory-mapped `save_ids` file: opening costs nothing, each id
    is decoded when a hit needs it."""

    def __init__(self, array: Any) -> None:
        import numpy as np

        # A plain array view of the map: indexing an np.memmap costs a microsecond more per id.
        self._array = array.view(np.ndarray)

    def __len__(self) -> int:
        return len(self._array)

    def __eq__(self, other: object) -> bool:  # equal to any sequence of the same ids, as a list is
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [bytes(v).decode("utf-8", "surrogatepass") for v in self._array[row]]
        return self._array[row].decode("utf-8", "surrogatepass")  # an np.bytes_, a bytes

    def take(self, rows: Any) -> list[str]:
        """The ids of `rows` (an integer array), in that order: one gather, not a lookup each."""
        return [v.decode("utf-8", "surrogatepass") for v in self._array[rows].tolist()]


def take_ids(ids: Sequence[str], rows: Any) -> list[str]:
    """`[ids[r] for r in rows]` (rows an integer array), gathered at once where the sequence
    can (`take`: an id column, a version's row ids)."""
    take = getattr(ids, "take", None)
    return take(rows) if take is not None else [ids[r] for r in rows.tolist()]


def load_ids(path: Path, n_rows: int, mmap: bool = True) -> IdColumn:
    """The ids of a `save_ids` file, memory-mapped, or with `mmap` false read into memory
    (`load_npy`: no page of it can go missing under a reader)."""
    from plm_index.builds import load_npy

    array = load_npy(path, mmap)
    if array.ndim != 1 or len(array) != n_rows or array.dtype.kind != "S":
        raise ValueError(f"{path.name} holds {array.shape} {array.dtype}, not {n_rows} ids")
    return IdColumn(array)


def save_vectors(path: Path, matrix: Any) -> None:
    import numpy as np

    np.save(path, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)


def load_vectors(path: Path, n_rows: int) -> Any:
    """The float32 (n_rows, dim) matrix of a `save_vectors` file, memory-mapped read-only:
    pages are read when a query first scans them, never copied row by row."""
    import numpy as np

    from plm_index.builds import load_npy

    matrix = load_npy(path)
    if matrix.ndim != 2 or matrix.shape[0] != n_rows or matrix.dtype != np.float32:
        raise ValueError(f"{path.name} holds {matrix.shape} {matrix.dtype}, not {n_rows} float32 vectors")
    return matrix
