"""The specificity test: is a head's attention at a score's key special *for this head*?

Every registry score reads one key per query (``A[q, q-1]``, ``A[q, q-Δ+1]``, ``A[q, 0]`` ...).
A head passes the score's specificity test when, on the same probe rows,

- its attention at that key is more than :data:`~.heads.RIVAL_RATIO` (2) times its own attention
  at **each** key within :data:`~.heads.RIVAL_WIDTH` (2) positions of it (``Score.rivals``: for
  the previous-token score ``q``, ``q-2``, ``q-3``; for induction ``q-Δ-1``, ``q-Δ``, ``q-Δ+2``,
  ``q-Δ+3``), each pair read on the queries where both keys exist (position-matched); and
- for a repeat score (``Score.control``), its score on the probe beats its own score on a
  no-repeat control batch of the same layout (:func:`~.batches.non_repeating_like`), which
  removes whatever the head does by position alone.

Each comparison is a one-sided paired **sign-flip test** over rows: with ``δ_r`` the row's
summed ``key - ratio x rival`` (ratio 2 for a rival key, 1 for the control), the statistic is
``Σ δ_r`` and each null draw flips the sign of every row's ``δ_r`` at random. For the control,
and for a rival at ratio 1, it is exact when the two sides are exchangeable within each row (rows
are independent draws of random tokens); at the boundary of "twice the rival" it rests on the
symmetry of ``δ_r`` (the central limit theorem over rows). p = ``(1 + #{draw ≥ observed}) /
(1 + N)``. The head passes when **every** comparison rejects: an intersection-union test, whose
p-value is the largest of the comparisons' (valid at level α without a multiplicity
correction); the comparison that gives it is the one that *decided*. τ, in score units, is the
mean at the score's key that comparison needed (``ratio x`` the rival's mean plus the 95th
percentile of the draws): a score above τ is one whose deciding comparison rejects at 0.05.

The number of draws ``N`` is chosen so that the smallest attainable p, ``1 / (N + 1)``, is at most
``α / m`` for the ``m`` tests of a report (:func:`draws_for`): Benjamini-Hochberg over every test
can then reject a single true effect. :func:`bh_reach` says when a given ``N`` cannot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.heads.registry import RIVAL_RATIO, SCORES
from interp_toolkit.heads.repeats import RepeatedTokens, non_repeating_like
from interp_toolkit.heads.scorer import RowPair, RowScores, row_pairs, row_scores
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.significance import significant_by_kind
from interp_toolkit.stats.thresholds import ALPHA, QUANTILE

#: The fewest sign-flip draws (smallest p 1e-4); more when a report has more tests (draws_for).
MIN_DRAWS = 9999
CONTROL = "no-repeat control"
#: Draws per chunk of the sign-flip matmul (memory: CHUNK x comparisons float64).
CHUNK = 2048


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


@dataclass(frozen=True)
class Pair:
    """One comparison of every head: per-row sums at the score's key (``target``) and at the
    rival (``rival``: another key on the same queries, or the same key on the control batch)."""

    target: Float[Tensor, "row layer head"]
    rival: Float[Tensor, "row layer head"]
    counts: Float[Tensor, " row"]
    ratio: float = 1.0  # the score's key must beat ``ratio`` x the rival

    @classmethod
    def of(cls, pair: RowPair) -> Pair:
        """A rival key: the score's key must hold more than RIVAL_RATIO times its attention."""
        return cls(pair.target, pair.rival, pair.counts, RIVAL_RATIO)

    @classmethod
    def control(cls, probe: RowScores, control: RowScores) -> Pair:
        """The no-repeat control: the score must beat the head's own score without repeats."""
        if not torch.equal(probe.counts, control.counts):
            raise ValueError("the control batch must be laid out like the probe, row by row")
        return cls(probe.sums, control.sums, probe.counts)

    def delta(self) -> Float[Tensor, "row layer head"]:
        """Per-row differences the sign flips act on: ``target - ratio * rival``."""
        return self.target - self.ratio * self.rival


def _signs(n_draws: int, n_rows: int, seed: int) -> Float[Tensor, "draw row"]:
    """The random signs of every sign-flip draw (seeded; shared by every comparison)."""
    gen = rng(seed, "sign_flips")
    return torch.randint(0, 2, (n_draws, n_rows), generator=gen, dtype=torch.float64) * 2 - 1


def sign_flip_p(
    delta: Float[Tensor, "row column"], signs: Float[Tensor, "draw row"]
) -> Float[Tensor, " column"]:
    """One-sided sign-flip p-value of every column of per-row differences: ``(1 + #{draws >=
    observed}) / (1 + N)``, the draws ``signs @ delta`` and the observed value ``delta.sum(0)``
    (a tie within float rounding counts against the column)."""
    delta = delta.double()
    observed = delta.sum(0)
    tol = 1e-9 * delta.abs().sum(0)
    ge = torch.zeros_like(observed)
    for lo in range(0, signs.shape[0], CHUNK):
        ge += (signs[lo : lo + CHUNK] @ delta >= observed - tol).sum(0)
    return (1.0 + ge) / (1.0 + signs.shape[0])


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
    its comparisons'), τ and the observed mean at the score's key for the comparison that gave
    it (``decided_by``), every comparison's p-value (``comparisons[kind][name]``) and its mean
    difference per query (``differences[kind][name]``: score's key minus rival)."""

    p_value: dict[str, Float[Tensor, "layer head"]]
    tau: dict[str, Float[Tensor, "layer head"]]
    observed: dict[str, Float[Tensor, "layer head"]]
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
    """Every score's intersection-union test over its comparisons (``kind -> name -> Pair``)."""
    first = next(iter(next(iter(comparisons.values())).values()))
    n_rows, shape = first.target.shape[0], first.target.shape[1:]
    signs = _signs(n_draws, n_rows, seed)
    out = SpecificityTests({}, {}, {}, {}, {}, n_draws, quantile, {})
    for kind, named in comparisons.items():
        names = list(named)
        pairs = [named[n] for n in names]
        delta = torch.cat([p.delta().flatten(1) for p in pairs], 1)
        ps = sign_flip_p(delta, signs).view(len(pairs), *shape)
        worst = ps.argmax(0)  # the first comparison with the largest p decides
        out.p_value[kind] = ps.gather(0, worst[None])[0]
        out.decided_by[kind] = [[names[int(c)] for c in row] for row in worst.tolist()]
        out.comparisons[kind] = {name: ps[j] for j, name in enumerate(names)}
        out.differences[kind] = {
            name: (p.target - p.rival).sum(0) / p.counts.sum().clamp_min(1.0)
            for name, p in zip(names, pairs, strict=True)
        }
        # τ and the observed mean for the deciding comparison of each head
        pick = worst.flatten()
        heads = torch.arange(pick.numel())
        target = torch.stack([p.target.flatten(1) for p in pairs], 1)[:, pick, heads]
        deltas = torch.stack([p.delta().flatten(1) for p in pairs], 1)[:, pick, heads]
        baseline = (target - deltas).double().sum(0)  # ratio x rival, summed over rows
        counts = torch.stack([p.counts.sum() for p in pairs]).double()[pick]
        out.tau[kind] = sign_flip_tau(deltas, baseline, counts, signs, quantile).view(shape)
        out.observed[kind] = (target.double().sum(0) / counts.clamp_min(1.0)).view(shape)
    return out


def comparisons_of(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    seed: int = 0,
    batch_size: int | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> tuple[dict[str, RowScores], dict[str, dict[str, Pair]]]:
    """The model's per-row scores on ``batch`` and every score's comparisons: ``vs <key>`` for
    each rival key, and ``vs no-repeat control`` (the scores with ``Score.control``; the control
    is :func:`~.batches.non_repeating_like` of ``batch``, seeded ``seed + 1``)."""
    observed, pairs = row_pairs(model, batch, batch_size=batch_size)
    control = None
    if any(s.control for s in SCORES):
        progress("no-repeat control batch")
        control = row_scores(model, non_repeating_like(batch, seed=seed + 1), batch_size=batch_size)
    out = {}
    for s in SCORES:
        named = {f"vs {key}": Pair.of(pair) for key, pair in pairs[s.name].items()}
        if s.control and control is not None:
            named[f"vs {CONTROL}"] = Pair.control(observed[s.name], control[s.name])
        out[s.name] = named
    return observed, out
