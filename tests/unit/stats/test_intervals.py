"""Wilson intervals, mean intervals and the exact McNemar test against known values."""

from __future__ import annotations

import math

import pytest

from interp_toolkit.stats.intervals import binomial_tail, mcnemar_greater, mean_interval, wilson


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        # textbook values (Newcombe 1998, and 81/263 from Wilson's example, to 4 decimals)
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
        (81, 263, 0.2553, 0.3662),
        (200, 200, 0.9812, 1.0),  # n / (n + z^2)
    ],
)
def test_wilson_known_values(k, n, low, high):
    iv = wilson(k, n)
    assert (round(iv.low, 4), round(iv.high, 4)) == (low, high)
    assert iv.estimate == k / n and iv.n == n


def test_wilson_rejects_impossible_counts():
    for k, n in ((1, 0), (-1, 5), (6, 5)):
        with pytest.raises(ValueError):
            wilson(k, n)


def test_mean_interval_is_mean_plus_minus_z_standard_errors():
    iv = mean_interval([1.0, 2.0, 3.0, 4.0])
    se = math.sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3 / 4)
    assert iv.estimate == 2.5 and abs(iv.high - iv.low - 2 * 1.959963984540054 * se) < 1e-12
    assert mean_interval([0.3]).low == mean_interval([0.3]).high == 0.3


def test_mcnemar_counts_only_discordant_prompts():
    a = [True] * 10 + [False] * 2 + [True] * 5
    b = [False] * 10 + [True] * 2 + [True] * 5
    # 10 prompts only a passed, 2 only b: P(X >= 10 | Bin(12, 1/2)) = (66 + 12 + 1) / 4096
    assert abs(mcnemar_greater(a, b) - 79 / 4096) < 1e-15
    assert mcnemar_greater(b, a) > 0.99
    assert mcnemar_greater([True, False], [True, False]) == 1.0
    with pytest.raises(ValueError):
        mcnemar_greater([True], [True, False])


def test_binomial_tail():
    assert binomial_tail(1, 2, 0.5) == pytest.approx(0.75)
    assert binomial_tail(20, 20, 0.5) == pytest.approx(0.5**20)
    assert binomial_tail(3, 4, 0.1) == pytest.approx(4 * 0.1**3 * 0.9 + 0.1**4)
    assert binomial_tail(0, 20, 0.1) == 1.0
    # a base rate a hair outside [0, 1] (float rounding of a share) is clipped, not a p over 1
    assert binomial_tail(1, 3, 1.0 + 1e-12) == 1.0
    assert binomial_tail(1, 3, -1e-12) == 0.0
