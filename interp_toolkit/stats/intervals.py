"""Intervals and paired tests for the exams and the text measures: one place for each formula.

- :func:`wilson`: the Wilson score interval of a pass rate (k passes in n trials), the interval
  the exams' pass rule reads (:func:`~interp_toolkit.exams.verdict.passes_rule`).
- :func:`mean_interval`: a normal interval of a mean over independent units (held-out windows).
- :func:`mcnemar_greater`: the exact one-sided McNemar test that one model passes more prompts
  than another on the same prompts (a paired test: the prompts are shared).
- :func:`paired_difference`: the difference of two pass rates on the same prompts, with its
  95% interval (the paired Wald interval).
- :func:`cluster_interval`: a mean over units that come in groups (held-out windows from
  documents), its interval resampling whole groups (a cluster bootstrap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from interp_toolkit.files.serialize import Jsonable

#: The two-sided 95% normal quantile.
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval(Jsonable):
    """An estimate and its 95% interval ``[low, high]`` over ``n`` units; ``method`` names it."""

    estimate: float
    low: float
    high: float
    n: int
    method: str

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


def wilson(k: int, n: int, z: float = Z95) -> Interval:
    """The Wilson score interval of ``k`` successes in ``n`` trials (95% by default).

    Unlike the normal interval it stays inside [0, 1] and is not degenerate at 0/n or n/n:
    200/200 gives [0.981, 1]."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"wilson needs 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at k = 0 or k = n the bound is exactly 0 or 1 (rounding would leave 1e-17)
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, low, high, n, "Wilson 95%")


def mean_interval(values: Sequence[float], z: float = Z95) -> Interval:
    """The mean of ``values`` (one per independent unit) and its normal 95% interval,
    mean ± z·sd/√n (sd with n − 1); a single value has an interval of zero width."""
    n = len(values)
    if n < 1:
        raise ValueError("mean_interval needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1, "normal 95% over 1 unit")
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half, n, f"normal 95% over {n} units")


def binomial_tail(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Binomial(n, p) (``p`` clipped to [0, 1], the sum to at most 1); past
    1,000 trials summed in log space (the pooled exams compare thousands of prompts, where
    ``comb(n, i)`` overflows a float)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    p = min(max(p, 0.0), 1.0)
    if n <= 1000:
        return min(
            1.0, math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
        )
    if p <= 0.0 or p >= 1.0:
        return float(p >= 1.0)
    lp, lq = math.log(p), math.log1p(-p)
    logs = [
        math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
        for i in range(k, n + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(x - top) for x in logs))


def mcnemar_greater(a: Sequence[bool], b: Sequence[bool]) -> float:
    """One-sided exact McNemar p-value that ``a`` passes more often than ``b`` on the same
    prompts (``a[i]``, ``b[i]``: prompt ``i`` passed). Only the discordant prompts count: with
    ``x`` prompts only ``a`` passed and ``y`` only ``b`` passed, p = P(X >= x), X ~ Bin(x + y, 1/2);
    1.0 when none is discordant."""
    x, y = _discordant(a, b)
    return binomial_tail(x, x + y) if x + y else 1.0


def _discordant(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int]:
    """How many prompts only ``a`` passed, and only ``b``."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need the same prompts: {len(a)} vs {len(b)}")
    pairs = list(zip(a, b, strict=True))
    return sum(1 for u, v in pairs if u and not v), sum(1 for u, v in pairs if v and not u)


def paired_difference(a: Sequence[bool], b: Sequence[bool], z: float = Z95) -> Interval:
    """The pass rate of ``a`` minus that of ``b`` on the same prompts, with the paired Wald 95%
    interval: with ``x`` prompts only ``a`` passed and ``y`` only ``b`` passed of ``n``, the
    difference is (x - y)/n and its standard error sqrt(x + y - (x - y)^2/n)/n."""
    x, y = _discordant(a, b)
    n = len(a)
    if n < 1:
        raise ValueError("paired_difference needs at least one prompt")
    d = (x - y) / n
    half = z * math.sqrt(max(0.0, x + y - (x - y) ** 2 / n)) / n
    return Interval(d, d - half, d + half, n, f"paired Wald 95% over {n} prompts")


#: Resamples of a cluster bootstrap.
CLUSTER_RESAMPLES = 2000


def cluster_interval(values: Sequence[float], groups: Sequence[int], *, seed: int = 0) -> Interval:
    """The mean of ``values`` and its 95% percentile interval from resampling whole groups
    (``groups[i]``: the group of value ``i``, e.g. the document a held-out window comes from)
    with replacement, :data:`CLUSTER_RESAMPLES` times: windows of one document are not
    independent, so the interval counts documents, not windows. One group: zero width."""
    import numpy as np

    from interp_toolkit.runtime.seeds import np_rng

    if len(values) != len(groups) or not len(values):
        raise ValueError("cluster_interval needs one group per value, and a value")
    v = np.asarray(values, dtype=np.float64)
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    sums, counts = np.bincount(g, weights=v), np.bincount(g)
    k = len(sums)
    mean = float(v.mean())
    if k == 1:
        return Interval(mean, mean, mean, 1, "cluster bootstrap over 1 group")
    pick = np_rng(seed, "cluster_bootstrap").integers(0, k, size=(CLUSTER_RESAMPLES, k))
    means = sums[pick].sum(1) / counts[pick].sum(1)
    low, high = np.quantile(means, [0.025, 0.975])
    return Interval(mean, float(low), float(high), k, f"cluster bootstrap 95% over {k} documents")
