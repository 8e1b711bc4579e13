"""The second, named test of a head score: against untrained models of the same architecture.

The deciding test of a head's role is the specificity test of
:mod:`~interp_toolkit.heads.specificity` (the head against itself). This module holds the
statistics both tests share and the optional second test, ``vs_untrained``
(:func:`untrained_tests`), which answers a different question: *did training raise this stripe
above what untrained heads of the same layer give?* It decides no role. Its null kinds
(:data:`NULLS`, named by each registry entry's ``Score.untrained_null``):

- ``untrained``: the probe through ``K`` freshly initialised models of the same architecture
  (:mod:`~interp_toolkit.heads.untrained`). At initialisation the heads of one layer are
  exchangeable, so a head's null is its layer's ``K x n_heads`` untrained values
  (:func:`pooled_by_layer`; layers are not pooled together, their habits differ).
- ``repeats_vs_untrained``: the head's own score on a control batch with the probe's exact layout
  but no token repeated in a row (:func:`~.batches.non_repeating_like`), plus the repeat effects
  (score on the probe - score on the control) of the untrained heads of its layer.

The untrained models run on the probe's first ``UntrainedModels.rows`` rows (all by default; GPT-2:
16, the cost knob) and the head is compared on the same rows.

Statistics: τ = each head's null's 95th percentile (:func:`tau`), the empirical p-value
``(1 + #{null >= observed}) / (1 + N)`` (:func:`p_values`), Benjamini-Hochberg over heads x
scores (:func:`benjamini_hochberg`), the expected number of false positives
(:func:`expected_false_positives`) and the smallest reachable p (:func:`smallest_p`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import json_field
from interp_toolkit.heads.repeats import RepeatedTokens, non_repeating_like
from interp_toolkit.heads.scorer import RowScores, row_scores
from interp_toolkit.heads.untrained import UntrainedModels
from interp_toolkit.runtime.seeds import derive
from interp_toolkit.stats.significance import (
    p_values,
    pooled_by_layer,
    significant_by_kind,
    smallest_p,
    tau,
)
from interp_toolkit.stats.thresholds import ALPHA, QUANTILE


@dataclass(frozen=True)
class NullSample:
    """What one null compares: each head's statistic (its score on the rows the null used) and
    the null's draws of it."""

    observed: Float[Tensor, "layer head"]
    draws: Float[Tensor, "sample layer head"]


@dataclass
class NullContext:
    """What the null kinds may use: the model, its probe and scores, and its untrained models
    (None: the untrained nulls are unavailable). ``progress(message)`` hears of each extra
    forward pass."""

    model: TransformerBridge
    batch: RepeatedTokens
    observed: Mapping[str, RowScores]
    untrained: UntrainedModels | None = None
    seed: int = 0
    batch_size: int | None = None
    progress: Callable[[str], None] = field(default=lambda _msg: None)

    def control(self, batch: RepeatedTokens) -> RepeatedTokens:
        """The no-repeat control of ``batch``: its layout, fresh ids, no token twice in a row."""
        return non_repeating_like(batch, seed=derive(self.seed, "no_repeat_batch"))

    def n_rows(self) -> int:
        rows = self.untrained.rows if self.untrained is not None else None
        return self.batch.n_seqs if rows is None else max(1, min(self.batch.n_seqs, rows))

    def sub_batch(self) -> RepeatedTokens:
        """The probe's rows the untrained models run on."""
        m = self.n_rows()
        return dataclasses.replace(
            self.batch, tokens=self.batch.tokens[:m], starts=self.batch.starts[:m]
        )

    def fresh(self, with_control: bool) -> list[list[dict[str, RowScores]]]:
        """``[model][probe, control?]``: the untrained models' scores on the sub batch (and its
        control)."""
        if self.untrained is None:
            raise UserError(
                "the untrained null needs freshly initialised models of this architecture, and "
                "this model cannot be rebuilt: load it through interp-toolkit (a run or GPT-2)."
            )
        sub = self.sub_batch()
        batches = [sub, self.control(sub)] if with_control else [sub]
        return self.untrained.scores(batches, batch_size=self.batch_size, progress=self.progress)


NullSamples = dict[str, NullSample]


def _untrained(ctx: NullContext, kinds: Sequence[str]) -> NullSamples:
    fresh = ctx.fresh(with_control=False)
    m = ctx.n_rows()
    return {
        k: NullSample(
            ctx.observed[k].first(m).mean(),
            pooled_by_layer(torch.stack([f[0][k].mean() for f in fresh])),
        )
        for k in kinds
    }


def _repeats_vs_untrained(ctx: NullContext, kinds: Sequence[str]) -> NullSamples:
    fresh = ctx.fresh(with_control=True)
    ctx.progress("no-repeat control batch")  # the model's scores on the control of the sub batch
    control = row_scores(ctx.model, ctx.control(ctx.sub_batch()), batch_size=ctx.batch_size)
    m = ctx.n_rows()
    out = {}
    for k in kinds:
        effects = torch.stack([f[0][k].mean() - f[1][k].mean() for f in fresh])
        out[k] = NullSample(
            ctx.observed[k].first(m).mean(), control[k].mean()[None] + pooled_by_layer(effects)
        )
    return out


#: Null kinds by name: what a registry entry's ``Score.null`` names.
NULLS: dict[str, Callable[[NullContext, Sequence[str]], NullSamples]] = {
    "untrained": _untrained,
    "repeats_vs_untrained": _repeats_vs_untrained,
}


def draw_nulls(ctx: NullContext, null_of: Mapping[str, str]) -> NullSamples:
    """``{kind: sample}`` for ``null_of`` (score kind -> null name), running each null kind once
    for all the scores that use it (the untrained models run once for every untrained kind)."""
    unknown = sorted(set(null_of.values()) - set(NULLS))
    if unknown:
        raise UserError(f"unknown null {unknown[0]!r}: use one of {', '.join(NULLS)}.")
    out: NullSamples = {}
    for name in sorted(set(null_of.values()), key=lambda n: n != "repeats_vs_untrained"):
        # repeats_vs_untrained first: it scores the untrained models on probe and control at once
        out.update(NULLS[name](ctx, [k for k, n in null_of.items() if n == name]))
    return {k: out[k] for k in null_of}


# --------------------------------------------------------------------------- tests per head


_SKIP = json_field(skip=True)


@dataclass
class NullTests:
    """Per score kind and head ``[layer, head]``: τ, the p-value, the null's name and size; for the
    second test, the untrained models' number, the rows they ran on and their seeds. Its JSON
    (heads.json's ``test.untrained``): the nulls, their sizes and smallest p, and the models."""

    tau: dict[str, Float[Tensor, "layer head"]] = field(metadata=_SKIP)
    p_value: dict[str, Float[Tensor, "layer head"]] = field(metadata=_SKIP)
    null: dict[str, str]
    n_null: dict[str, int]
    n_models: int = 0
    rows: int = 0
    seeds: list[int] = field(default_factory=list)

    decides: ClassVar[str] = (
        "nothing: did training raise this stripe above untrained heads of its layer?"
    )
    json_extra = ("smallest_p", "decides")
    json_order = ("null", "n_null", "smallest_p", "n_models", "rows", "seeds", "decides")

    @property
    def smallest_p(self) -> dict[str, float]:
        """Per score, the smallest p its null can give."""
        return {k: smallest_p(n) for k, n in self.n_null.items()}

    def significant(self, alpha: float = ALPHA, fdr: bool = False) -> dict[str, Tensor]:
        """:func:`~interp_toolkit.stats.significance.significant_by_kind` of these p-values
        (the experiments and benchmarks read it)."""
        return significant_by_kind(self.p_value, alpha, fdr)


def run_tests(
    samples: Mapping[str, NullSample], null_of: Mapping[str, str], quantile: float = QUANTILE
) -> NullTests:
    """τ and the p-value of every head for every kind in ``samples``."""
    return NullTests(
        tau={k: tau(s.draws, quantile) for k, s in samples.items()},
        p_value={k: p_values(s.observed, s.draws) for k, s in samples.items()},
        null={k: null_of[k] for k in samples},
        n_null={k: int(s.draws.shape[0]) for k, s in samples.items()},
    )


def untrained_tests(
    model: TransformerBridge,
    batch: RepeatedTokens,
    observed: Mapping[str, RowScores],
    untrained: UntrainedModels | None,
    *,
    seed: int = 0,
    batch_size: int | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
) -> NullTests:
    """The second, named test (``vs_untrained``): every registry score against the heads of its
    layer in ``untrained`` models (``Score.untrained_null``); it decides no role."""
    from interp_toolkit.heads.registry import SCORES

    ctx = NullContext(model, batch, observed, untrained, seed, batch_size, progress)
    null_of = {s.name: s.untrained_null for s in SCORES}
    tests = run_tests(draw_nulls(ctx, null_of), null_of)
    assert untrained is not None  # draw_nulls raised otherwise
    n_models, rows, seeds = len(untrained.seeds), ctx.n_rows(), list(untrained.seeds)
    return dataclasses.replace(tests, n_models=n_models, rows=rows, seeds=seeds)
