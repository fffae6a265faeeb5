"""`top_n` on large score vectors selects in linear time; it must return exactly what the
full sort returns: best first, equal scores last row first, masked and zero rows left out."""

from __future__ import annotations

import numpy as np
import pytest

from plm_index import ranking


def full_sort(scores: np.ndarray, n: int, allowed: np.ndarray | None, drop_zero: bool) -> list[int]:
    order = np.argsort(scores, kind="stable")[::-1]  # equal scores: the last row first
    if allowed is not None:
        order = order[allowed[order]]
    if drop_zero:
        order = order[scores[order] > 0]
    return order[: max(0, n)].tolist()


@pytest.mark.parametrize("seed", range(40))
def test_linear_selection_equals_the_full_sort(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 2000))
    # Many exact ties (small integers, BM25 zeros) or none, positive or negative.
    scores = rng.integers(0, 4, rows).astype(np.float32) if seed % 2 else rng.random(rows)
    scores = -scores if seed % 5 == 0 else scores
    allowed = rng.random(rows) > 0.4 if seed % 3 == 0 else None
    drop_zero = seed % 4 == 0
    ids = [f"c{i}" for i in range(rows)]
    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", 0)
    for n in (0, 1, 10, rows // 2, rows, rows + 3):
        want = full_sort(scores, n, allowed, drop_zero)
        got = ranking.top_n(scores, n, ids, "bm25", allowed, drop_zero)
        assert [h.chunk_id for h in got] == [ids[i] for i in want]
        assert [h.rank for h in got] == list(range(len(want)))
        assert [h.score for h in got] == [float(scores[i]) for i in want]


@pytest.mark.parametrize("full_sort_up_to", [0, 10**9])
@pytest.mark.parametrize("seed", range(40))
def test_ranking_the_non_zero_rows_alone_equals_top_n(
    seed: int, full_sort_up_to: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """top_n_sparse sees only the rows that may be non-zero: its hits are top_n's over the full
    vector, or None where they could differ (zeros needed, ties left to the full sort)."""
    monkeypatch.setattr(ranking, "FULL_SORT_UP_TO", full_sort_up_to)
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 3000))
    positions = np.sort(rng.choice(rows, size=int(rng.integers(0, rows + 1)), replace=False))
    values = rng.integers(-1, 6, len(positions)).astype(np.float32) if seed % 2 else rng.random(len(positions))
    scores = np.zeros(rows, dtype=values.dtype)
    scores[positions] = values
    allowed = rng.random(rows) > 0.4 if seed % 3 == 0 else None
    drop_zero = seed % 4 < 2
    ids = [f"c{i}" for i in range(rows)]
    answered = 0
    for n in (0, 1, 10, rows // 2, rows, rows + 3):
        got = ranking.top_n_sparse(positions, values, rows, n, ids, "bm25", allowed, drop_zero)
        if got is not None:
            assert got == ranking.top_n(scores, n, ids, "bm25", allowed, drop_zero)
            answered += 1
    if drop_zero and (full_sort_up_to == 0 or seed % 2 == 0):  # no ties to leave to the full sort
        assert answered == 6
