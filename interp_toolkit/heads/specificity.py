"""The specificity test: is a head's attention at a score's key special *for this head*?

Every registry score reads one key per query (``A[q, q-1]``, ``A[q, q-Δ+1]``, ``A[q, 0]`` ...).
A head passes the score's specificity test when, on the same probe rows,

- its attention at that key is more than ``RIVAL_RATIO`` (2, :mod:`~interp_toolkit.stats.thresholds`)
  times its own **strongest attention at any other key**, query by query (the rival: every key
  the query can attend to but the score's own, BOS excepted for a relative key; ``RIVAL_WIDTH``
  None. Before issue 30 the rivals were the keys within 2 positions, each compared on its own, so
  a head split 50/50 between q-1 and q-4 was called previous-token), read on the queries that
  have a rival key; and
- for a repeat score (``Score.control``), its score on the probe beats its own score on a
  no-repeat control batch of the same layout (:func:`~.batches.non_repeating_like`), which
  removes whatever the head does by position alone.

Each comparison is a one-sided test over rows of ``δ_r``, the row's summed ``key - ratio x
rival`` (ratio 2 for the rival, 1 for the control):

- the control: a paired **sign flip** (each draw flips the sign of every row's ``δ_r``; the
  statistic ``Σ δ_r``), exact when probe and control rows are exchangeable (no reaction to the
  repeat);
- the rival: a **studentized row bootstrap** (bootstrap-t: ``t = mean / se`` against ``t* =
  (mean* - mean) / se*`` over resamples of the rows, :func:`bootstrap_t_p`). At the boundary of
  "twice the rival" nothing makes ``δ_r`` symmetric, and the sign flip, which assumes it, rejected
  too often there (experiments/null_calibration.py ``--only boundary``, docs/statistics.md §1).

p = ``(1 + #{draw ≥ observed}) / (1 + N)`` for both. The head passes when **every** comparison
rejects: an intersection-union test, whose p-value is the largest of the comparisons' (valid at
level α without a multiplicity correction); the comparison that gives it is the one that
*decided*. τ, in score units, is the mean at the score's key that comparison needed (``ratio x``
the rival's mean plus the 95th percentile of its null): a score above τ is one whose deciding
comparison rejects at 0.05.

The number of draws ``N`` is chosen so that the smallest attainable p, ``1 / (N + 1)``, is at most
``α / m`` for the ``m`` tests of a report (:func:`draws_for`): Benjamini-Hochberg over every test
can then reject a single true effect. :func:`bh_reach` says when a given ``N`` cannot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.heads.nulls import NullTests
from interp_toolkit.heads.registry import SCORES
from interp_toolkit.heads.repeats import RepeatedTokens, non_repeating_like
from interp_toolkit.heads.scorer import RowPair, RowScores, row_pairs, row_scores
from interp_toolkit.runtime.seeds import derive, rng
from interp_toolkit.stats.significance import expected_false_positives, significant_by_kind
from interp_toolkit.stats.thresholds import (
    ALPHA,
    MIN_DRAWS,
    QUANTILE,
    RIVAL_RATIO,
    RIVAL_WIDTH,
    SE_FLOOR,
)

CONTROL = "no-repeat control"
#: Draws per chunk of the tests' matmuls, and comparisons per block (memory: CHUNK x COLUMNS
#: float64, a few of them at once).
CHUNK = 1024
COLUMNS = 4096


def draws_for(n_tests: int, alpha: float = ALPHA) -> int:
    """Sign-flip draws whose smallest attainable p, ``1 / (N + 1)``, is at most ``alpha /
    n_tests``: what Benjamini-Hochberg over ``n_tests`` tests needs to reject a lone effect."""
    return max(MIN_DRAWS, math.ceil(n_tests / alpha) - 1)


def bh_reach(n_draws: int, n_tests: int, alpha: float) -> int | None:
    """How many tests must reach the smallest attainable p before Benjamini-Hochberg over
    ``n_tests`` at ``alpha`` can reject any (1 when ``1/(N+1) <= alpha/m``); None when none can
    (``1/(N+1) > alpha``)."""
    smallest = 1.0 / (n_draws + 1)
    if smallest > alpha:
        return None
    return max(1, math.ceil(smallest * n_tests / alpha - 1e-12))


#: The two tests a comparison can be: the paired sign flip (exact when the two sides are
#: exchangeable within each row: the no-repeat control) and the studentized row bootstrap (a
#: rival key at a ratio: its null, "key = ratio x rival", gives no exchangeability to flip).
SIGN_FLIP, BOOTSTRAP_T = "sign flip", "studentized bootstrap"


@dataclass(frozen=True)
class Pair:
    """One comparison of every head: per-row sums at the score's key (``target``) and at the
    rival (``rival``: another key on the same queries, or the same key on the control batch)."""

    target: Float[Tensor, "row layer head"]
    rival: Float[Tensor, "row layer head"]
    counts: Float[Tensor, " row"]
    ratio: float = 1.0  # the score's key must beat ``ratio`` x the rival
    test: str = SIGN_FLIP

    @classmethod
    def of(cls, pair: RowPair, ratio: float = RIVAL_RATIO) -> Pair:
        """A rival key: the score's key must hold more than ``ratio`` (RIVAL_RATIO) times its
        attention; tested by the studentized row bootstrap (:func:`bootstrap_t_p`)."""
        return cls(pair.target, pair.rival, pair.counts, ratio, BOOTSTRAP_T)

    @classmethod
    def control(cls, probe: RowScores, control: RowScores) -> Pair:
        """The no-repeat control: the score must beat the head's own score without repeats."""
        if not torch.equal(probe.counts, control.counts):
            raise ValueError("the control batch must be laid out like the probe, row by row")
        return cls(probe.sums, control.sums, probe.counts)

    def delta(self) -> Float[Tensor, "row layer head"]:
        """Per-row differences the test acts on: ``target - ratio * rival``."""
        return self.target - self.ratio * self.rival

    def scale(self) -> Float[Tensor, "layer head"]:
        """``Σ |target| + ratio Σ |rival|``: what "equal within float rounding" is relative to."""
        return (self.target.abs() + self.ratio * self.rival.abs()).sum(0)


def _signs(n_draws: int, n_rows: int, seed: int) -> Float[Tensor, "draw row"]:
    """The random signs of every sign-flip draw (seeded; shared by every comparison)."""
    gen = rng(seed, "sign_flips")
    return torch.randint(0, 2, (n_draws, n_rows), generator=gen, dtype=torch.float64) * 2 - 1


def _resamples(n_draws: int, n_rows: int, seed: int) -> Float[Tensor, "draw row"]:
    """How often each row is drawn in each bootstrap resample of the rows (seeded; shared by
    every comparison)."""
    gen = rng(seed, "row_bootstrap")
    idx = torch.randint(0, n_rows, (n_draws, n_rows), generator=gen)
    ones = torch.ones(n_draws, n_rows, dtype=torch.float64)
    return torch.zeros(n_draws, n_rows, dtype=torch.float64).scatter_add_(1, idx, ones)


def sign_flip_p(
    delta: Float[Tensor, "row column"], signs: Float[Tensor, "draw row"]
) -> Float[Tensor, " column"]:
    """One-sided sign-flip p-value of every column of per-row differences: ``(1 + #{draws >=
    observed}) / (1 + N)``, the draws ``signs @ delta`` and the observed value ``delta.sum(0)``
    (a tie within float rounding counts against the column)."""
    delta = delta.double()
    observed = delta.sum(0)
    tol = 1e-9 * delta.abs().sum(0)
    ge = _draws_reaching(delta, signs, lambda d, s: s @ d, observed - tol)
    return (1.0 + ge) / (1.0 + signs.shape[0])


def _draws_reaching(
    delta: Float[Tensor, "row column"],
    law: Float[Tensor, "draw row"],
    draw: Callable[[Tensor, Tensor], Tensor],
    bar: Float[Tensor, " column"],
) -> Float[Tensor, " column"]:
    """Per column, how many draws ``draw(delta, law)`` reach ``bar``, computed in blocks of
    :data:`COLUMNS` columns and :data:`CHUNK` draws."""
    ge = torch.zeros_like(bar)
    for first in range(0, delta.shape[1], COLUMNS):
        cols = slice(first, first + COLUMNS)
        for lo in range(0, law.shape[0], CHUNK):
            ge[cols] += (draw(delta[:, cols], law[lo : lo + CHUNK]) >= bar[cols]).sum(0)
    return ge


def _studentized(
    delta: Float[Tensor, "row column"], weights: Float[Tensor, "draw row"]
) -> Float[Tensor, "draw column"]:
    """The bootstrap's studentized means ``t* = (mean* - mean) / se*`` of every column, ``se*``
    at least :data:`SE_FLOOR` x the sample's standard error: a resample of a few distinct rows
    (a hand-built head's rows take a handful of values) can have almost no spread, and dividing
    by it would make ``t*`` exceed any observed ``t``."""
    n = delta.shape[0]
    mean = delta.mean(0)
    se = (delta.std(0) if n > 1 else torch.zeros_like(mean)) / math.sqrt(n)
    m1 = weights @ delta / n
    m2 = weights @ (delta * delta) / n
    var = ((m2 - m1 * m1) * n / max(1, n - 1)).clamp_min(0.0)
    se_star = torch.maximum((var / n).sqrt(), SE_FLOOR * se)
    t = (m1 - mean) / se_star
    return torch.nan_to_num(t, nan=math.inf, posinf=math.inf, neginf=-math.inf)


def _t_observed(
    delta: Float[Tensor, "row column"], scale: Float[Tensor, " column"]
) -> tuple[Float[Tensor, " column"], Float[Tensor, " column"], Bool[Tensor, " column"]]:
    """Every column's studentized mean ``t = mean / (sd / sqrt(n))``, its sd, and where the rows
    do not spread beyond float rounding (``flat``: t is then +inf above 0 and -inf at or below)."""
    n = delta.shape[0]
    mean = delta.mean(0)
    sd = delta.std(0) if n > 1 else torch.zeros_like(mean)
    tol = 1e-9 * scale
    flat = sd * n <= tol
    t = mean / (sd / math.sqrt(n)).clamp_min(1e-300)
    t = torch.where(flat, torch.where(mean * n > tol, math.inf, -math.inf), t)
    return t, sd, flat


def bootstrap_t_p(
    delta: Float[Tensor, "row column"],
    weights: Float[Tensor, "draw row"],
    scale: Float[Tensor, " column"] | None = None,
) -> Float[Tensor, " column"]:
    """One-sided studentized (bootstrap-t) p-value of every column's mean being > 0, rows as
    independent units: ``(1 + #{t* >= t}) / (1 + N)`` over the ``N`` resamples ``weights``.

    Unlike the sign flip it does not need the rows' differences to be symmetric about 0, only
    independent (one-sided error O(1/n), against O(1/sqrt(n)) for a symmetric null applied to a
    skewed difference: with rows 1 - Exp(1), the sign flip rejects 8.4% of 2,000 nulls at nominal
    5%, this test 5.5%; at the boundary of planted and trained heads 5.24% of 10,010,
    docs/statistics.md §1). Rows that do not spread (every row the same difference within float
    rounding of ``scale``): p = 1 / (N + 1) above 0, 1 at or below (a tie counts
    against the head)."""
    delta = delta.double()
    scale = delta.abs().sum(0) if scale is None else scale.double()
    t, _, flat = _t_observed(delta, scale)
    ge = _draws_reaching(delta, weights, _studentized, t)
    n_draws = weights.shape[0]
    ge = torch.where(flat, torch.where(t > 0, 0.0, float(n_draws)), ge)
    return (1.0 + ge) / (1.0 + n_draws)


def bootstrap_t_tau(
    delta: Float[Tensor, "row column"],
    baseline: Float[Tensor, " column"],
    counts: Float[Tensor, " column"],
    weights: Float[Tensor, "draw row"],
    quantile: float = QUANTILE,
) -> Float[Tensor, " column"]:
    """τ in score units for a bootstrap-t comparison: the mean at the score's key the test needs,
    ``(baseline + sqrt(n) x sd x the quantile of t*) / counts`` (``baseline``: ``ratio x Σ
    rival``), so a score above τ is one whose comparison rejects at ``1 - quantile``."""
    delta = delta.double()
    n = delta.shape[0]
    _, sd, flat = _t_observed(delta, delta.abs().sum(0))
    draws = torch.cat(
        [_studentized(delta, weights[lo : lo + CHUNK]) for lo in range(0, weights.shape[0], CHUNK)]
    )
    q = torch.quantile(draws, quantile, dim=0)
    need = torch.where(flat, 0.0, math.sqrt(n) * sd * q)
    return (baseline.double() + need) / counts.double().clamp_min(1.0)


def sign_flip_tau(
    delta: Float[Tensor, "row column"],
    baseline: Float[Tensor, " column"],
    counts: Float[Tensor, " column"],
    signs: Float[Tensor, "draw row"],
    quantile: float = QUANTILE,
) -> Float[Tensor, " column"]:
    """τ in score units: the mean at the score's key that the test needs, ``(baseline + the
    quantile of the sign-flip draws of Σ delta) / counts`` (``baseline``: ``ratio x Σ rival``),
    so a score above τ is one whose comparison rejects at ``1 - quantile``."""
    half, mid = delta.double(), baseline.double()
    out = torch.empty(delta.shape[1], dtype=torch.float64)
    block = max(1, 8_000_000 // signs.shape[0])  # torch.quantile takes at most 2**24 values
    for lo in range(0, delta.shape[1], block):
        cols = slice(lo, lo + block)
        draws = (mid[cols] + signs @ half[:, cols]) / counts[cols].clamp_min(1.0)
        out[cols] = torch.quantile(draws, quantile, dim=0)
    return out


@dataclass
class SpecificityTests:
    """Per score kind and head ``[layer, head]``: the intersection-union p-value (the largest of
    its comparisons'), τ for the comparison that gave it (``decided_by``), every comparison's
    p-value (``comparisons[kind][name]``) and its mean difference per query
    (``differences[kind][name]``: score's key minus rival)."""

    p_value: dict[str, Float[Tensor, "layer head"]]
    tau: dict[str, Float[Tensor, "layer head"]]
    decided_by: dict[str, list[list[str]]]
    comparisons: dict[str, dict[str, Float[Tensor, "layer head"]]]
    n_draws: int
    quantile: float = QUANTILE
    differences: dict[str, dict[str, Float[Tensor, "layer head"]]] = field(default_factory=dict)

    def repeat_effect(self, kind: str) -> Float[Tensor, "layer head"] | None:
        """The score minus the head's own score on the no-repeat control (None for a score with
        no control): the part of the score the repeat explains."""
        return self.differences.get(kind, {}).get(f"vs {CONTROL}")

    @property
    def n_tests(self) -> int:
        return sum(p.numel() for p in self.p_value.values())

    @property
    def smallest_p(self) -> float:
        return 1.0 / (self.n_draws + 1)

    def significant(self, alpha: float = ALPHA, fdr: bool = False) -> dict[str, Tensor]:
        """:func:`~interp_toolkit.stats.significance.significant_by_kind` of these p-values."""
        return significant_by_kind(self.p_value, alpha, fdr)


def specificity_tests(
    comparisons: Mapping[str, Mapping[str, Pair]],
    n_draws: int,
    *,
    seed: int = 0,
    quantile: float = QUANTILE,
) -> SpecificityTests:
    """Every score's intersection-union test over its comparisons (``kind -> name -> Pair``),
    each comparison by its own test (``Pair.test``: the sign flip or the studentized bootstrap,
    ``n_draws`` draws of each, shared by every comparison)."""
    first = next(iter(next(iter(comparisons.values())).values()))
    n_rows, shape = first.target.shape[0], first.target.shape[1:]
    signs = _signs(n_draws, n_rows, seed)
    weights = _resamples(n_draws, n_rows, seed)
    out = SpecificityTests({}, {}, {}, {}, n_draws, quantile, {})
    for kind, named in comparisons.items():
        names, pairs = list(named), list(named.values())
        ps = torch.empty(len(pairs), int(torch.tensor(shape).prod()), dtype=torch.float64)
        for test in (SIGN_FLIP, BOOTSTRAP_T):
            idx = [j for j, p in enumerate(pairs) if p.test == test]
            if not idx:
                continue
            delta = torch.cat([pairs[j].delta().flatten(1) for j in idx], 1)
            if test == SIGN_FLIP:
                got = sign_flip_p(delta, signs)
            else:
                scale = torch.cat([pairs[j].scale().flatten() for j in idx])
                got = bootstrap_t_p(delta, weights, scale)
            ps[idx] = got.view(len(idx), -1)
        ps = ps.view(len(pairs), *shape)
        worst = ps.argmax(0)  # the first comparison with the largest p decides
        out.p_value[kind] = ps.gather(0, worst[None])[0]
        out.decided_by[kind] = [[names[int(c)] for c in row] for row in worst.tolist()]
        out.comparisons[kind] = {name: ps[j] for j, name in enumerate(names)}
        out.differences[kind] = {
            name: (p.target - p.rival).sum(0) / p.counts.sum().clamp_min(1.0)
            for name, p in zip(names, pairs, strict=True)
        }
        # τ for the deciding comparison of each head
        pick = worst.flatten()
        heads = torch.arange(pick.numel())
        target = torch.stack([p.target.flatten(1) for p in pairs], 1)[:, pick, heads]
        deltas = torch.stack([p.delta().flatten(1) for p in pairs], 1)[:, pick, heads]
        baseline = (target - deltas).double().sum(0)  # ratio x rival, summed over rows
        counts = torch.stack([p.counts.sum() for p in pairs]).double()[pick]
        boot = torch.tensor([pairs[int(c)].test == BOOTSTRAP_T for c in pick], dtype=torch.bool)
        tau = torch.empty(pick.numel(), dtype=torch.float64)
        for mask, fn, law in ((~boot, sign_flip_tau, signs), (boot, bootstrap_t_tau, weights)):
            if bool(mask.any()):
                tau[mask] = fn(deltas[:, mask], baseline[mask], counts[mask], law, quantile)
        out.tau[kind] = tau.view(shape)
    return out


def comparisons_of(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    seed: int = 0,
    batch_size: int | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
    rival_width: int | None = RIVAL_WIDTH,
    rival_ratio: float = RIVAL_RATIO,
) -> tuple[dict[str, RowScores], dict[str, dict[str, Pair]]]:
    """The model's per-row scores on ``batch`` and every score's comparisons: ``vs <key>`` for
    each rival key (every other key of the probe; ``rival_width``/``rival_ratio`` replace the
    registry's window and ratio, for the sensitivity benchmark), and ``vs no-repeat control``
    (the scores with ``Score.control``; the control is :func:`~.batches.non_repeating_like` of
    ``batch``, seeded ``seed + 1``)."""
    observed, pairs = row_pairs(model, batch, batch_size=batch_size, rival_width=rival_width)
    control = None
    if any(s.control for s in SCORES):
        progress("no-repeat control batch")
        control = row_scores(
            model,
            non_repeating_like(batch, seed=derive(seed, "no_repeat_batch")),
            batch_size=batch_size,
        )
    out = {}
    for s in SCORES:
        named = {f"vs {key}": Pair.of(pair, rival_ratio) for key, pair in pairs[s.name].items()}
        if s.control and control is not None:
            named[f"vs {CONTROL}"] = Pair.control(observed[s.name], control[s.name])
        out[s.name] = named
    return observed, out


@dataclass(frozen=True)
class FalsePositives:
    """How many tests pass by chance: of one score over the heads, of all scores."""

    per_score: float
    all_scores: float


@dataclass(frozen=True, kw_only=True)
class SpecificityAccount:
    """How the specificity tests were run (heads.json's ``test``, :func:`describe_tests`);
    ``untrained``: the second test's account (None when not run)."""

    name: str = "specificity"
    comparisons: dict[str, list[str]]
    statistic: str = (
        "per comparison, a one-sided test over rows of the per-row difference: the score's key "
        "minus the ratio times the head's strongest attention at any other key, query by query (a "
        "studentized bootstrap of the rows), or the probe minus a no-repeat control (a paired sign "
        "flip); p = the largest over the comparisons (intersection-union test)"
    )
    rivals: str
    rival_ratio: float = RIVAL_RATIO
    n_draws: int
    smallest_p: float
    quantile: float
    tau: str
    p_value: str = (
        "(1 + #{draw >= observed}) / (1 + N), per comparison (a draw: a sign flip or "
        "a resample's studentized mean); max over comparisons"
    )
    alpha: float
    correction: str
    n_tests: int
    bh_min_rejections: int | None
    warnings: list[str]
    expected_false_positives: FalsePositives
    interval: str = "95%, rows as independent units (ratio estimator, normal approximation)"
    untrained: NullTests | None


def describe_tests(
    tests: SpecificityTests,
    alpha: float,
    fdr: bool,
    n_heads: int,
    untrained: NullTests | None = None,
) -> SpecificityAccount:
    """How the tests were run (:class:`SpecificityAccount`): the comparisons per score, the number
    of draws and the smallest attainable p, α or the FDR, whether Benjamini-Hochberg can reject a
    lone effect (``warnings`` says when it cannot), and the expected number of false positives."""
    m = tests.n_tests
    reach = bh_reach(tests.n_draws, m, alpha)
    warnings = []
    if reach is None:
        warnings.append(
            f"no test can be significant: the smallest attainable p, {tests.smallest_p:.3g}, is "
            f"above alpha {alpha:g}; use more draws (at least {draws_for(m, alpha)})"
        )
    elif fdr and reach > 1:
        warnings.append(
            f"Benjamini-Hochberg over {m} tests cannot reject fewer than {reach} at once: the "
            f"smallest attainable p, {tests.smallest_p:.3g}, is above alpha/m = {alpha / m:.3g}; "
            f"use at least {draws_for(m, alpha)} draws"
        )
    return SpecificityAccount(
        comparisons={k: list(named) for k, named in tests.comparisons.items()},
        rivals="every other key a query can attend to (BOS excepted for a relative key)"
        if RIVAL_WIDTH is None
        else f"the keys within {RIVAL_WIDTH} positions of the score's key",
        n_draws=tests.n_draws,
        smallest_p=tests.smallest_p,
        quantile=tests.quantile,
        tau=f"the {tests.quantile:g} quantile of the deciding comparison's null, in score units",
        alpha=alpha,
        correction="benjamini-hochberg over heads x scores" if fdr else "none (p <= alpha)",
        n_tests=m,
        bh_min_rejections=reach,
        warnings=warnings,
        expected_false_positives=FalsePositives(
            expected_false_positives(n_heads, alpha),
            expected_false_positives(m, alpha),
        ),
        untrained=untrained,
    )
