"""Statistics of a `plm eval` comparison: paired tests, multiple-testing corrections and
paired bootstrap confidence intervals of a delta, all over the queries of one set.

Kept apart from the reporter so each can be checked alone. numpy only, except the paired
tests, which import scipy when they run (numpy too is imported when a function runs: `plm`
loads this module with every plugin).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from plm_core.errors import MissingDependencyError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

Correction = Literal["holm", "bonferroni", "none"]
CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "none")
CONFIDENCE = 0.95
# At most this many resample x query counts are held at once (8 bytes each): 10,000
# resamples of 300 queries fit in one block; a 20,000-query set is done in a few.
_BLOCK_CELLS = 4_000_000


def paired_p_value(
    a: Sequence[float], b: Sequence[float], test: str = "permutation", n_resamples: int = 10000, seed: int = 0
) -> float:
    """Two-sided p-value that the mean of the paired differences a - b is zero."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    # Identical scores: no evidence of a difference. Both tests would otherwise return NaN
    # (t-test: zero variance) or spend resamples to say the same.
    if len(diffs) < 2 or all(abs(d) < 1e-12 for d in diffs):
        return 1.0
    try:
        from scipy import stats
    except ImportError:
        raise MissingDependencyError("scipy", "eval") from None
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if test == "ttest":
        p = float(stats.ttest_rel(x, y).pvalue)
    else:
        # permutation_type="samples" swaps the two values within each query: the paired
        # randomisation test IR papers use (Smucker et al. 2007).
        res = stats.permutation_test(
            (x, y),
            lambda u, v, axis: np.mean(u - v, axis=axis),
            permutation_type="samples",
            vectorized=True,
            n_resamples=n_resamples,
            alternative="two-sided",
            random_state=seed,
        )
        p = float(res.pvalue)
    # A constant non-zero difference has zero variance: the t statistic is infinite.
    return 0.0 if math.isnan(p) else min(1.0, p)


def adjust_p_values(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """Family-wise corrected p-values, in the order given (statsmodels' `multipletests`
    semantics, which PyTerrier's `Experiment(correction=...)` uses).

    bonferroni: p * m, capped at 1. holm (step-down): sort ascending, multiply the i-th
    smallest (0-based) by m - i, then take the running maximum so a larger raw p never gets
    a smaller corrected one, capped at 1. none: the p-values unchanged. A corrected p below
    alpha rejects exactly the hypotheses the procedure rejects at level alpha.
    """
    ps = [float(p) for p in p_values]
    m = len(ps)
    if method == "none" or m == 0:
        return ps
    if method == "bonferroni":
        return [min(1.0, p * m) for p in ps]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}; choose one of {', '.join(CORRECTIONS)}")
    corrected = [0.0] * m
    running = 0.0
    for i, idx in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - i) * ps[idx]))
        corrected[idx] = running
    return corrected


def bootstrap_cis(
    diffs: ArrayLike, n_resamples: int = 10000, seed: int = 0, confidence: float = CONFIDENCE
) -> np.ndarray:
    """Percentile confidence intervals of the mean of paired differences, by a paired bootstrap.

    diffs: (queries, k), one column per comparison (config x metric), each the per-query
    differences of a config and the baseline. Each resample draws the queries with
    replacement and averages every column over the same draw, so all comparisons of one
    query set share their resamples (the draw depends only on the number of queries,
    `n_resamples` and `seed`: adding a config or a metric leaves the others' intervals
    as they were). Returns (k, 2): the (1 - confidence)/2 and (1 + confidence)/2 quantiles
    of the resampled means. A constant difference gives a zero-width interval at it.
    """
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    if d.ndim != 2:
        raise ValueError(f"diffs must be (queries, comparisons), got shape {d.shape}")
    n, k = d.shape
    if n == 0:
        return np.zeros((k, 2))
    rng = np.random.default_rng(seed)
    # A resample's mean is mean + counts @ (d - mean) / n, as a resample's counts add up to
    # n. A constant column is centred to exact zeros and put back at its value, so its
    # interval is exactly [c, c] rather than c give or take the rounding of a mean.
    mean = d.mean(axis=0)
    constant = np.all(d == d[:1], axis=0)
    centred = np.where(constant, 0.0, d - mean)
    means = np.empty((n_resamples, k))
    block = max(1, _BLOCK_CELLS // n)
    offsets = np.arange(block)[:, None] * n
    for start in range(0, n_resamples, block):
        size = min(block, n_resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        # How often each query was drawn in each resample: a (size, n) count matrix, so
        # every column's resampled mean is one matrix product.
        counts = np.bincount((idx + offsets[:size]).ravel(), minlength=size * n).reshape(size, n)
        means[start : start + size] = counts @ centred / n
    tail = (1.0 - confidence) / 2
    bounds = np.quantile(means, [tail, 1.0 - tail], axis=0).T
    centre = np.where(constant, d[0], mean)
    return bounds + centre[:, None]


def bootstrap_ci(
    a: ArrayLike,
    b: ArrayLike,
    n_resamples: int = 10000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The paired bootstrap interval of mean(a - b) for one pair of per-query scores."""
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples differ in length or are not 1-D: {x.shape} vs {y.shape}")
    d = x - y
    low, high = bootstrap_cis(d[:, None], n_resamples, seed, confidence)[0]
    return float(low), float(high)
