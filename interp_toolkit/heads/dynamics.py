"""Training dynamics: how head scores and loss move over training (the phase change).

Two sources: ``metrics.jsonl`` (every ``score_every`` steps training logs each head's induction and
previous-token score on repeated random tokens, and the held-out loss) and the weight snapshots in
``RUN/snapshots/``, which can be re-scored with any analysis function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float

from interp_toolkit.heads.induction import (
    best_induction_score,
    first_induction_step,
    induction_layer_min,
    logged_induction_key,
)
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.runs.folder import Run, RunPaths, load_run, read_metrics


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

    @property
    def layer_min(self) -> int:
        return induction_layer_min(int(self.induction.shape[1]))

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


def snapshot_steps(run_path: str | Path) -> list[int]:
    return RunPaths(Path(run_path)).snapshot_steps()


def over_snapshots(run_path: str | Path, fn: Callable[[Run], Any]) -> dict[int, Any]:
    """Apply ``fn(run)`` to the run loaded at every snapshot (e.g. ``lambda r: discover_heads(r.model, r.codec)``)."""
    paths = RunPaths(Path(run_path))
    out = {}
    for step in paths.snapshot_steps():
        run = load_run(paths.root, weights=paths.snapshot(step))
        with torch.no_grad():
            out[step] = fn(run)
    return out
