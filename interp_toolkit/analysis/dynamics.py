"""Training dynamics: how head scores and loss move over training (the phase change).

Two sources: ``metrics.jsonl`` (every ``score_every`` steps training logs each head's induction and
previous-token score on repeated random tokens, and the held-out loss) and the weight snapshots in
``RUN/snapshots/step_N.safetensors``, which can be re-scored with any analysis function.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float

from interp_toolkit.runs import load_run, read_metrics

_SNAPSHOT = re.compile(r"step_(\d+)\.safetensors$")


@dataclass
class Trajectory:
    """Logged scores over training: ``induction``/``prev_token`` are [checkpoint, layer, head]."""

    steps: list[int]
    tokens: list[int]
    loss: list[float]
    val_loss: list[float | None]
    induction: Float[torch.Tensor, "checkpoint layer head"]
    prev_token: Float[torch.Tensor, "checkpoint layer head"]

    def first_step_above(self, threshold: float = 0.4, layer_min: int = 1) -> int | None:
        """First logged step where a head in a layer >= ``layer_min`` scores above ``threshold``."""
        if self.induction.shape[1] <= layer_min:
            layer_min = 0
        best = self.induction[:, layer_min:].flatten(1).max(dim=1).values
        hits = (best > threshold).nonzero()
        return self.steps[int(hits[0])] if len(hits) else None

    def phase_change(self, threshold: float = 0.4) -> dict[str, Any]:
        """The step induction appears, with the loss just before and after it."""
        step = self.first_step_above(threshold)
        out: dict[str, Any] = {"threshold": threshold, "step": step}
        if step is not None:
            i = self.steps.index(step)
            out["tokens"] = self.tokens[i]
            out["loss_before"] = self.loss[max(0, i - 1)]
            out["loss_at"] = self.loss[i]
            out["best_induction"] = float(self.induction[i].max())
        return out


def trajectory(run_path: str | Path) -> Trajectory:
    """The scored rows of a run's metrics.jsonl as tensors."""
    rows = [r for r in read_metrics(run_path) if "induction" in r]
    if not rows:
        raise ValueError(f"{run_path} has no scored steps in metrics.jsonl")
    return Trajectory(
        steps=[int(r["step"]) for r in rows],
        tokens=[int(r["tokens"]) for r in rows],
        loss=[float(r["loss"]) for r in rows],
        val_loss=[r.get("val_loss") for r in rows],
        induction=torch.tensor([r["induction"] for r in rows], dtype=torch.float32),
        prev_token=torch.tensor([r["prev_token"] for r in rows], dtype=torch.float32),
    )


def snapshot_steps(run_path: str | Path) -> list[int]:
    folder = Path(run_path) / "snapshots"
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _SNAPSHOT.search(p.name)))


def over_snapshots(run_path: str | Path, fn: Callable[[Any], Any]) -> dict[int, Any]:
    """Apply ``fn(run)`` to the run loaded at every snapshot (e.g. ``lambda r: discover_heads(r.model, r.codec)``)."""
    out = {}
    for step in snapshot_steps(run_path):
        run = load_run(run_path, weights=Path(run_path) / "snapshots" / f"step_{step}.safetensors")
        with torch.no_grad():
            out[step] = fn(run)
    return out
