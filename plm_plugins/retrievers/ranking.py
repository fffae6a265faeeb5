"""Turning a full score vector into ranked candidates, the POC's way (shared by retrievers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plm_core.records import ScoredChunk


def top_n(
    scores: Any, n: int, chunk_ids: Sequence[str], source: str, allowed: Any = None, drop_zero: bool = False
) -> list[ScoredChunk]:
    """The n best rows of `scores`, best first, 0-based ranks; `allowed` masks rows out.

    A full `argsort(scores)[::-1]`, as the POC ranked: among exactly equal scores (duplicate
    chunks, BM25 zeros) it puts the LAST row first, which argpartition or bm25s's own top-k
    would not reproduce. Masked rows are removed before the cut, so they never appear and
    n hits come back whenever n allowed rows exist.
    """
    import numpy as np

    order = np.argsort(scores)[::-1]
    if allowed is not None:
        order = order[np.asarray(allowed, dtype=bool)[order]]
    if drop_zero:
        order = order[scores[order] > 0]
    order = order[: max(0, n)]
    return [
        ScoredChunk(chunk_id=chunk_ids[i], score=float(scores[i]), source=source, rank=r)
        for r, i in enumerate(order.tolist())
    ]
