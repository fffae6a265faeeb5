"""What the SQL stores (`sqlite`, `postgres`) do alike, written once: index order, the guard
around their public methods, a batch of vectors checked, the corpus version read from
`meta`, the vector problems `plm index check` reports and the numbers `stats` gives.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from plm import CorpusVersion, StoreProblem

# Index order: documents where they were first stored (an update keeps its place), then
# chunks in document order (`d` the documents, `c` the chunks). Every reader of "all
# chunks" uses it, so rows line up.
ORDER = "ORDER BY d.row, c.row"
# A chunk's place in index order as one int64 (sorting by it is ORDER BY d.row, c.row).
ORDER_KEY = "d.row * 4294967296 + c.row"
VERSION_KEYS = "('store_uid', 'version_nonce', 'corpus_version')"


def guard_public_methods(
    guard: Callable[[Callable[..., Any]], Callable[..., Any]], keep: tuple[str, ...] = ("open", "snapshot")
) -> Callable[[type], type]:
    """A class decorator: every public method defined in the class, but those in `keep`, is
    wrapped in `guard` (which turns a database error into one StoreError line)."""

    def wrap(cls: type) -> type:
        for name, value in list(vars(cls).items()):
            if inspect.isfunction(value) and not name.startswith("_") and name not in keep:
                setattr(cls, name, guard(value))
        return cls

    return wrap


def vector_matrix(matrix: Any, count: int, model: str | None) -> Any:
    """`matrix` as a C-ordered float32 array of `count` rows; ValueError when its shape does
    not match the chunks or no model is named."""
    import numpy as np

    mat = np.ascontiguousarray(matrix, dtype=np.float32)
    if mat.ndim != 2 or mat.shape[0] != count:
        raise ValueError(f"vectors shape {mat.shape} does not match {count} chunk ids")
    if not model:
        raise ValueError("vectors need the name of the model that made them")
    return mat


def corpus_version(meta: Mapping[str, Any]) -> CorpusVersion:
    """The version from the `VERSION_KEYS` rows of `meta` (missing ones: a new store)."""
    return CorpusVersion(
        str(meta.get("store_uid", "")), int(meta.get("corpus_version") or 0), str(meta.get("version_nonce", ""))
    )


def half_re_embedded(others: set[Any], model: Any) -> str:
    """Why vectors of several models cannot be read together, and what to do."""
    return (
        f"vectors from {sorted(others)} beside the store's {model!r} (half re-embedded): "
        "run `plm ingest` on the same sources to finish, or `plm index rebuild`"
    )


def vector_problems(vectors: int, without_vector: Callable[[], int], models: int) -> list[StoreProblem]:
    """Chunks without a vector beside chunks with one (`without_vector` counts them, asked
    only when there are vectors), and vectors from more than one model."""
    problems = []
    if vectors and (n := without_vector()):
        problems.append(StoreProblem(StoreProblem.MISSING_VECTORS, n, f"{n} chunks have no vector (and {vectors} do)"))
    if models > 1:
        problems.append(StoreProblem(StoreProblem.MIXED_MODELS, models, f"vectors from {models} different models"))
    return problems


def store_stats(
    documents: int, chunks: int, vectors: int, get_meta: Callable[[str], str | None], size: int
) -> dict[str, Any]:
    """The numbers `plm index stats` shows, in its order."""
    return {
        "documents": documents,
        "chunks": chunks,
        "vectors": vectors,
        "model": get_meta("model"),
        "dimension": int(get_meta("dimension") or 0),
        "corpus_version": int(get_meta("corpus_version") or 0),
        "bytes": size,
    }
