"""Training dynamics: how head scores and loss move over training (the phase change).

Two sources: ``metrics.jsonl`` (every ``score_every`` steps training logs each head's induction and
previous-token score on repeated random tokens, and the held-out loss) and the weight snapshots in
``RUN/snapshots/``, which can be re-scored with any analysis function (``load_run(RUN,
weights=RunPaths(RUN).snapshot(step))``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float

from interp_toolkit.heads.induction import (
    best_induction_score,
    first_induction_step,
    logged_induction_key,
)
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.runs.folder import read_metrics


@dataclass
class Trajectory:
    """Logged scores over training: ``induction`` (the score deciding the induction role when
    logged, else the plain one: :func:`~interp_toolkit.heads.induction.logged_induction_key`)
    and ``previous_token`` are [checkpoint, layer, head]; ``rows`` are the scored metrics.jsonl
    lines they come from."""

    steps: list[int]
    tokens: list[int]
    loss: list[float]
    val_loss: list[float | None]
    induction: Float[torch.Tensor, "checkpoint layer head"]
    previous_token: Float[torch.Tensor, "checkpoint layer head"]
    rows: list[dict[str, Any]]

    def first_step_above(self, threshold: float | None = None) -> int | None:
        """First logged step where the strongest induction head (layer >= 1; any layer of a
        1-layer model) scores above ``threshold`` (default: the registry's floor of the
        induction score)."""
        return first_induction_step(self.rows, threshold)

    def best_induction(self) -> float:
        """The highest induction score logged in layer >= 1 (any layer of a 1-layer model)."""
        return max(best_induction_score(grid) for grid in self.induction)

    def phase_change(self, threshold: float | None = None) -> dict[str, Any]:
        """The step induction appears, with the loss just before and after it."""
        threshold = SCORE["induction"].floor if threshold is None else threshold
        step = self.first_step_above(threshold)
        out: dict[str, Any] = {"threshold": threshold, "step": step}
        if step is not None:
            i = self.steps.index(step)
            out["tokens"] = self.tokens[i]
            out["loss_before"] = self.loss[max(0, i - 1)]
            out["loss_at"] = self.loss[i]
            out["best_induction"] = best_induction_score(self.induction[i])
        return out


@dataclass(frozen=True)
class PhaseLoss:
    """The phase change on a run's training curves (docs/study.md section 0): the scoring
    interval (``start``, ``end``] over which the best layer>=1 induction score rises most (by
    ``rise``), up to the first scoring past the floor; and the training loss's fall per 1,000
    steps into it and into the scoring intervals just before and after it (None where the run has
    none). An interval's loss is the mean of the losses logged in it (``mean_loss``, each row's
    mean since the row before, where logged; else the step's ``loss``); a fall is the previous
    interval's loss minus this one's over the steps between their midpoints."""

    start: int
    end: int
    rise: float
    fall_before: float | None
    fall_at: float | None
    fall_after: float | None


def phase_loss(
    rows: Sequence[Mapping[str, Any]], threshold: float | None = None
) -> PhaseLoss | None:
    """:class:`PhaseLoss` from metrics.jsonl ``rows``; None when no head's induction score passed
    ``threshold`` (default: the registry's floor) or it passed at the first scoring."""
    first = first_induction_step(rows, threshold)
    scored = [r for r in rows if logged_induction_key(r) is not None]
    if first is None or not scored:
        return None
    key = logged_induction_key(scored[0])
    steps = [int(r["step"]) for r in scored if key in r]
    best = [best_induction_score(r[key]) for r in scored if key in r]
    ks = [k for k in range(1, len(steps)) if steps[k] <= first]
    if not ks:
        return None
    k = max(ks, key=lambda j: (best[j] - best[j - 1], -j))
    logged = [
        (int(r["step"]), float(r.get("mean_loss", r["loss"])))
        for r in rows
        if isinstance(r.get("mean_loss", r.get("loss")), (int, float))
    ]

    def loss(j: int) -> float | None:  # the mean logged loss in (steps[j-1], steps[j]]
        xs = [x for s, x in logged if steps[j - 1] < s <= steps[j]]
        return sum(xs) / len(xs) if xs else None

    def fall(j: int) -> float | None:  # into interval j from interval j - 1, per 1,000 steps
        if j < 2 or j >= len(steps):
            return None
        a, b = loss(j - 1), loss(j)
        apart = (steps[j] - steps[j - 2]) / 2  # between the two intervals' midpoints
        return None if a is None or b is None else 1000 * (a - b) / apart

    return PhaseLoss(
        steps[k - 1], steps[k], best[k] - best[k - 1], fall(k - 1), fall(k), fall(k + 1)
    )


def trajectory(run_path: str | Path) -> Trajectory:
    """The scored rows of a run's metrics.jsonl as tensors."""
    prev = SCORE["previous_token"].logged_as
    rows = [r for r in read_metrics(run_path) if logged_induction_key(r) is not None]
    if not rows:
        raise ValueError(f"{run_path} has no scored steps in metrics.jsonl")
    ind = logged_induction_key(rows[0])
    rows = [r for r in rows if ind in r]
    return Trajectory(
        steps=[int(r["step"]) for r in rows],
        tokens=[int(r["tokens"]) for r in rows],
        loss=[float(r["loss"]) for r in rows],
        val_loss=[r.get("val_loss") for r in rows],
        induction=torch.tensor([r[ind] for r in rows], dtype=torch.float32),
        previous_token=torch.tensor([r[prev] for r in rows], dtype=torch.float32),
        rows=rows,
    )
