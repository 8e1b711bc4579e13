"""``interp-toolkit sweep``: the same preset at several values of one setting, and how long
induction heads take to form in each (steps, tokens, minutes)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import write_json, write_text
from interp_toolkit.heads.dynamics import trajectory
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.runs.folder import read_metrics
from interp_toolkit.study.folder import (
    INDEX,
    STUDY_MARKER,
    check_study_dir,
    planned_runs,
    study_folder,
    train_or_reuse,
)
from interp_toolkit.training.presets import Preset, get_preset, with_overrides
from interp_toolkit.views.page import Section, render_report, table

#: settings ``sweep`` can vary -> whether their values are integers
SWEEPABLE = {
    "n_ctx": True,
    "vocab_size": True,
    "d_model": True,
    "repeat_fraction": False,
    "lr": False,
}


@dataclass(frozen=True)
class SweepConfig:
    """Train the same preset at several values of one setting and time induction in each."""

    out: Path
    param: str
    values: tuple[float, ...]
    preset: str = "cpu"
    layers: int = 2
    steps: int | None = None
    seed: int = 0
    threshold: float = SCORE["induction"].floor
    device: str = "auto"


def sweep(cfg: SweepConfig) -> list[dict[str, Any]]:
    """For each value: train (stopping once a layer-1+ head stays above ``threshold``), then record
    the step, tokens and minutes to induction and the final loss. Writes ``OUT/sweep.json`` and
    ``OUT/index.html``; finished runs recorded with the same settings are reused (every run is
    checked before any work)."""
    if cfg.param not in SWEEPABLE:
        raise UserError(f"cannot sweep {cfg.param!r}: choose one of {', '.join(SWEEPABLE)}.")
    values = tuple(dict.fromkeys(cfg.values))
    if not values:
        raise UserError("--values is empty: give e.g. 16,32,64.")
    for v in values:
        if not math.isfinite(v) or (SWEEPABLE[cfg.param] and v != int(v)):
            kind = "whole numbers" if SWEEPABLE[cfg.param] else "finite numbers"
            raise UserError(f"--values {v:g} cannot work: {cfg.param} takes {kind}.")
    out = Path(cfg.out)
    base = get_preset(cfg.preset, cfg.layers)
    presets = {f"{cfg.param}-{value:g}": _preset(base, cfg, value) for value in values}
    if len(presets) < len(values):  # 0.0010000001 and 0.0010000002 are both lr-0.001
        names = [f"{cfg.param}-{value:g}" for value in values]
        same = [f"{v!r}" for v, n in zip(values, names, strict=True) if names.count(n) > 1]
        raise UserError(
            f"--values {', '.join(same)} would share one run folder "
            f"({next(n for n in names if names.count(n) > 1)}): give values that differ in "
            "their first 6 significant digits."
        )
    for preset in presets.values():  # bad values are refused before the folder is made
        preset.validate()
    check_study_dir(out)
    planned_runs(out, presets)
    marker = {"sweep": cfg.param, "values": list(values)}
    with study_folder(out, marker):
        rows = []
        for (name, preset), value in zip(presets.items(), values, strict=True):
            train_or_reuse(out / name, preset, cfg.device)
            rows.append(_row(out / name, cfg, _typed(cfg, value)))
        kept = {k: getattr(cfg, k) for k in ("param", "preset", "layers", "threshold")}
        write_json(out / "sweep.json", {**kept, "rows": rows})
        write_text(out / INDEX, _page(rows, cfg))
        write_json(out / STUDY_MARKER, {**marker, "status": "done"})
    return rows


def _typed(cfg: SweepConfig, value: float) -> int | float:
    return int(value) if SWEEPABLE[cfg.param] else value


def _preset(base: Preset, cfg: SweepConfig, value: float) -> Preset:
    """The preset of one sweep value (stopping once induction stays above the threshold)."""
    v = _typed(cfg, value)
    changes: dict[str, Any] = {
        cfg.param: v,
        "steps": cfg.steps,
        "seed": cfg.seed,
        "stop_score": cfg.threshold,
    }
    if cfg.param == "d_model":
        changes["d_head"] = int(v) // base.model.n_heads
    return with_overrides(base, **changes)


def _row(path: Path, cfg: SweepConfig, value: int | float) -> dict[str, Any]:
    tr = trajectory(path)
    pc = tr.phase_change(cfg.threshold)
    metrics = read_metrics(path)
    hit = next((r for r in metrics if r["step"] == pc["step"]), None)
    return {
        cfg.param: value,
        "steps_trained": metrics[-1]["step"],
        "step_to_induction": pc["step"],
        "tokens_to_induction": pc.get("tokens"),
        "minutes_to_induction": round(hit["elapsed_s"] / 60, 2) if hit else None,
        "best_induction": round(tr.best_induction(), 3),
        "final_loss": metrics[-1]["loss"],
    }


def _page(rows: list[dict[str, Any]], cfg: SweepConfig) -> str:
    fig = go.Figure(
        go.Scatter(
            x=[r[cfg.param] for r in rows],
            y=[r["step_to_induction"] for r in rows],
            mode="lines+markers",
            name="steps to induction",
        )
    )
    fig.update_layout(
        title=f"Steps until a layer-1+ head's induction score > {cfg.threshold}",
        xaxis_title=cfg.param,
        yaxis_title="steps (none = never)",
        height=380,
    )
    cols = list(rows[0])
    return render_report(
        [Section("Sweep", [fig, table(cols, [[r[c] for c in cols] for r in rows])])],
        title=f"Sweep over {cfg.param}",
        subtitle=f"preset {cfg.preset}, {cfg.layers} layers, seed {cfg.seed}",
    )
