"""Multiple-testing corrections and the paired bootstrap interval of a delta."""

from __future__ import annotations

import numpy as np
import pytest

from plm_eval.evaluators.significance import adjust_p_values, bootstrap_ci, bootstrap_cis


def test_holm_hand_computed_with_monotonicity() -> None:
    # Sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04). The last
    # would drop below the one before it, so the running maximum lifts it to 0.06.
    got = adjust_p_values([0.01, 0.04, 0.03, 0.005], "holm")
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Order given is kept; a larger raw p never gets a smaller corrected one.
    raw = [0.2, 0.001, 0.04, 0.039, 0.5]
    corrected = adjust_p_values(raw, "holm")
    for r1, c1 in zip(raw, corrected, strict=True):
        for r2, c2 in zip(raw, corrected, strict=True):
            if r1 <= r2:
                assert c1 <= c2
    assert all(c >= r for r, c in zip(raw, corrected, strict=True))


def test_holm_ties_and_capping() -> None:
    # Equal p-values: the first gets x2, the second x1, then the maximum makes them equal.
    assert adjust_p_values([0.03, 0.03], "holm") == pytest.approx([0.06, 0.06])
    # 0.6 x 2 = 1.2 is capped at 1, and the running maximum carries the 1 to 0.9 (x1).
    assert adjust_p_values([0.6, 0.9], "holm") == [1.0, 1.0]


def test_bonferroni_multiplies_and_caps_at_one() -> None:
    assert adjust_p_values([0.01, 0.04, 0.03, 0.005], "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust_p_values([0.3, 0.5, 0.001], "bonferroni") == pytest.approx([0.9, 1.0, 0.003])


def test_one_comparison_or_none_leaves_p_unchanged() -> None:
    for method in ("holm", "bonferroni", "none"):
        assert adjust_p_values([0.042], method) == [0.042]
        assert adjust_p_values([], method) == []
    assert adjust_p_values([0.01, 0.04], "none") == [0.01, 0.04]
    with pytest.raises(ValueError, match="holm, bonferroni, none"):
        adjust_p_values([0.1], "fdr")


def test_constant_shift_gives_a_degenerate_interval_exactly_at_the_shift() -> None:
    base = [i / 8 for i in range(8)] * 5
    assert bootstrap_ci([b + 0.125 for b in base], base, 2000) == (0.125, 0.125)
    # 0.1 is not exact in binary: each difference is 0.1 give or take an ulp, so is the interval.
    low, high = bootstrap_ci([0.1 + 0.01 * i for i in range(40)], [0.01 * i for i in range(40)], 2000)
    assert low == pytest.approx(0.1, abs=1e-12) and high == pytest.approx(0.1, abs=1e-12)
    # A zero difference: [0, 0].
    assert bootstrap_ci(base, base, 500) == (0.0, 0.0)


def test_symmetric_noise_interval_contains_zero() -> None:
    a, b = [0.0, 1.0] * 25, [1.0, 0.0] * 25  # as many queries lose 1 as gain 1: mean 0
    low, high = bootstrap_ci(a, b, 5000, seed=1)
    assert low < 0 < high
    # Differences of +-1 over 50 queries: standard error 1/sqrt(50) ~ 0.141, so the 95%
    # interval is about +-0.28 (+-1.96 SE), and symmetric around 0.
    assert low == pytest.approx(-0.28, abs=0.04) and high == pytest.approx(0.28, abs=0.04)


def test_interval_covers_a_known_delta_about_95_percent_of_the_time() -> None:
    """400 synthetic query sets (60 queries, true mean difference 0.05): the percentile
    interval should hold 0.05 in about 95% of them (a little under for n = 60)."""
    rng = np.random.default_rng(7)
    diffs = 0.05 + rng.normal(0.0, 0.3, size=(60, 400))
    bounds = bootstrap_cis(diffs, 2000, seed=3)
    covered = np.mean((bounds[:, 0] <= 0.05) & (0.05 <= bounds[:, 1]))
    assert 0.90 <= covered <= 0.98
    # The intervals are centred on each set's observed mean, not on the true one.
    assert np.allclose(bounds.mean(axis=1), diffs.mean(axis=0), atol=0.03)


def test_bootstrap_is_deterministic_with_a_seed_and_columns_do_not_interact() -> None:
    rng = np.random.default_rng(0)
    diffs = rng.normal(0.02, 0.3, size=(300, 6))
    first = bootstrap_cis(diffs, 10000, seed=5)
    assert np.array_equal(first, bootstrap_cis(diffs, 10000, seed=5))
    assert not np.array_equal(first, bootstrap_cis(diffs, 10000, seed=6))
    # Same draws for every column: dropping columns (a config, a metric) changes no other
    # interval (up to the last bit, which the matrix product's summation order may move).
    assert np.allclose(first[:2], bootstrap_cis(diffs[:, :2], 10000, seed=5), rtol=0, atol=1e-12)
    low, high = bootstrap_ci(diffs[:, 3], np.zeros(300), 10000, seed=5)
    assert (low, high) == pytest.approx((first[3, 0], first[3, 1]), rel=0, abs=1e-12)


def test_large_sets_are_resampled_in_blocks() -> None:
    # 20,000 queries x 1,000 resamples does not fit one block; the result is still seeded
    # and still centred on the mean.
    rng = np.random.default_rng(1)
    d = rng.normal(0.0, 1.0, size=(20000, 1))
    bounds = bootstrap_cis(d, 1000, seed=2)
    assert np.array_equal(bounds, bootstrap_cis(d, 1000, seed=2))
    se = d.std() / np.sqrt(len(d))
    assert bounds[0, 0] < d.mean() < bounds[0, 1]
    assert bounds[0, 1] - bounds[0, 0] == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_bootstrap_rejects_unpaired_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_ci([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="queries, comparisons"):
        bootstrap_cis(np.zeros(5))
