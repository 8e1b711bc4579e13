"""The LLC over training: :func:`llc_curve` estimates it at every kept checkpoint of a run
(``RUN/snapshots/``) on the run's own training batches; :func:`stages` adds the boundaries and
what each stage changed (:mod:`.stages`). ``interp-toolkit stages RUN`` prints it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from interp_toolkit.development.data import LLCBatches, llc_batches, next_token_loss
from interp_toolkit.development.llc import (
    LLCEstimate,
    SGLDSettings,
    calibrated_settings,
    estimate_llc,
)
from interp_toolkit.development.stages import (
    NOT_READ,
    Boundary,
    PhaseChange,
    Stage,
    StageRule,
    describe_stages,
    phase_change_in_boundary,
    read_by_rule,
    stage_boundaries,
    steepest_rise,
)
from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, from_json, json_field
from interp_toolkit.heads.induction import first_induction_step
from interp_toolkit.runs.folder import (
    RunPaths,
    apply_weights,
    load_run,
    read_config,
    read_metrics,
    read_weights,
)
from interp_toolkit.stats.thresholds import BANDWIDTH, MIN_SWING
from interp_toolkit.training.settings import recorded_preset_name


@dataclass
class LLCCurve(Jsonable):
    """The LLC at each checkpoint ``steps[i]`` (``estimates[i]``), on ``batches``, with the
    settings ``settings_source`` names; its JSON is the curve's part of a ``stages.json``."""

    run: str
    steps: list[int] = field(metadata=json_field(skip=True))
    estimates: list[LLCEstimate] = field(metadata=json_field(skip=True))
    batches: dict[str, Any]
    seconds: float = field(metadata=json_field(digits=2))
    settings_source: str = "given"

    json_extra = ("checkpoints", "settings")
    json_order = ("run", "checkpoints", "batches", "settings", "settings_source", "seconds")

    def checkpoints(self) -> list[dict[str, Any]]:
        return [{"step": s, **e.to_dict()} for s, e in zip(self.steps, self.estimates, strict=True)]

    @property
    def settings(self) -> SGLDSettings | None:
        """The estimates' settings (one for all: :func:`llc_curve`)."""
        return self.estimates[0].settings if self.estimates else None

    @property
    def llc(self) -> list[float]:
        return [e.llc for e in self.estimates]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLCCurve:
        """The curve kept in a ``stages.json`` (:meth:`Stages.to_dict`): its estimates as they
        were measured, for the rule to read again without SGLD."""
        points = data["checkpoints"]
        return from_json(cls, {**data, "steps": [c["step"] for c in points], "estimates": points})

    @property
    def read(self) -> list[float]:
        """The values the stage rule reads (:func:`~.stages.read_by_rule`)."""
        return read_by_rule(self.llc, [e.high for e in self.estimates])


@dataclass
class Stages(Jsonable):
    """An LLC curve, its stage boundaries (the rule of :mod:`.stages`) and the stages."""

    curve: LLCCurve = field(metadata=json_field(inline=True))
    boundaries: list[Boundary]
    stages: list[Stage]
    phase_change: PhaseChange
    rule: StageRule

    json_order = (
        *LLCCurve.json_order[:-1],
        "rule",
        "boundaries",
        "stages",
        "phase_change",
        "seconds",
    )


def llc_curve(
    run_path: str | Path,
    settings: SGLDSettings | None = None,
    *,
    n_batches: int = 4,
    rows: int | None = 16,
    steps: list[int] | None = None,
    device: str = "cpu",
    progress: Callable[[int, int, int], None] | None = None,
    settings_source: str = "given",
) -> LLCCurve:
    """The LLC at every kept checkpoint of ``run_path`` (or the kept ``steps``), each estimate
    on the same batches: ``n_batches`` of the run's first training batches, ``rows`` rows each
    (:func:`~.data.llc_batches`); ``settings`` default to those calibrated for the run's preset
    (:func:`~.llc.calibrated_settings`; ``settings_source`` says where given ones come from).
    ``progress(i, n, step)`` before checkpoint ``i`` of ``n``."""
    source = settings_source
    if settings is None:
        settings, source = calibrated_settings(recorded_preset_name(read_config(run_path)))
    settings.validate()
    paths = RunPaths(Path(run_path))
    kept = paths.snapshot_steps()
    if steps is not None:
        missing = sorted(set(steps) - set(kept))
        if missing:
            raise UserError(
                f"{run_path} kept no weights at step {', '.join(map(str, missing))}: kept "
                f"{', '.join(map(str, kept)) or 'none'}."
            )
        kept = sorted(set(steps))
    if len(kept) < 3:
        raise UserError(
            f"{run_path} kept {len(kept)} checkpoint(s) ({', '.join(map(str, kept)) or 'none'}): "
            "stages need 3 or more; train it again with the default snapshot schedule."
        )
    t0 = time.perf_counter()
    run = load_run(paths.root, device=device, weights=paths.snapshot(kept[0]))
    data: LLCBatches = llc_batches(run, n_batches=n_batches, rows=rows)
    estimates = []
    for i, step in enumerate(kept):
        if progress is not None:
            progress(i, len(kept), step)
        path = paths.snapshot(step)
        apply_weights(run.model, read_weights(path), path)
        estimates.append(estimate_llc(run.model, data.batches, next_token_loss, settings))
    return LLCCurve(
        run=run.name,
        steps=kept,
        estimates=estimates,
        batches=data.to_dict(),
        seconds=time.perf_counter() - t0,
        settings_source=source,
    )


def route_at(
    run_path: str | Path, step: int, *, seed: int = 0, device: str = "auto"
) -> dict[str, Any]:
    """The route by path of the run's induction heads at its kept checkpoint ``step``
    (:func:`~interp_toolkit.causal.induction_route`, roles from discovery on that checkpoint):
    the model's route, its induction heads, and the strongest routed head's effect, carrying
    inputs, feeder and input shares."""
    from interp_toolkit.causal import induction_route
    from interp_toolkit.causal.routes import RouteName
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.options import DiscoveryOptions

    run = load_run(run_path, device=device, weights=RunPaths(Path(run_path)).snapshot(step))
    report = discover_heads(
        run.model, run.codec, DiscoveryOptions(seed=seed), model_cfg=run.model_cfg
    )
    route = induction_route(run.model, run.codec, report, seed=seed)
    out: dict[str, Any] = {
        "step": step,
        "route": route.name.value,
        "induction_heads": [str(h) for h in report.heads_with_role("induction")],
    }
    heads = [h for h in route.heads if h.inputs]
    if heads and route.name is not RouteName.NO_TASK:  # no task: shares of nothing, not shown
        top = max(heads, key=lambda h: h.effect.value)
        out |= {
            "head": str(top.head),
            "effect": vars(top.effect),
            "carrying": list(top.carrying),
            "feeder": None if top.feeder is None else str(top.feeder),
            "inputs": {c: e.value for c, e in top.inputs.items()},
        }
    return out


def route_words(r: dict[str, Any]) -> str:
    """'route at its end: K-composition (head 1.2 from 0.2; input shares of its effect Q 0.01,
    K 0.97, V 0.02)'."""
    s = f"route at its end: {r['route']}"
    if "head" in r:
        feeder = f" from {r['feeder']}" if r.get("feeder") else ""
        shares = ", ".join(f"{c.upper()} {v:.2f}" for c, v in r["inputs"].items())
        s += f" (head {r['head']}{feeder}; input shares of its effect {shares})"
    return s


def stages(
    run_path: str | Path,
    settings: SGLDSettings | None = None,
    *,
    bandwidth: float = BANDWIDTH,
    min_swing: float = MIN_SWING,
    curve: LLCCurve | None = None,
    routes: bool = True,
    **kwargs: Any,
) -> Stages:
    """The stages of a run: its LLC curve (``curve``, or :func:`llc_curve` with ``kwargs``),
    the boundaries, each stage described from metrics.jsonl and (``routes``) by the route by
    path at its end (:func:`route_at`), and whether the logged induction phase change falls
    inside a boundary's interval."""
    curve = curve or llc_curve(run_path, settings, **kwargs)
    read = curve.read
    bounds = stage_boundaries(curve.steps, read, bandwidth=bandwidth, min_swing=min_swing)
    rows = read_metrics(run_path)
    described = describe_stages(curve.steps, read, bounds, rows)
    if routes:
        described = [
            replace(st, summary=f"{st.summary}; {route_words(r)}", route_at_end=r)
            for st in described
            for r in [route_at(run_path, st.end, device=kwargs.get("device", "cpu"))]
        ]
    return Stages(
        curve=curve,
        boundaries=bounds,
        stages=described,
        phase_change=phase_change_in_boundary(
            bounds, first_induction_step(rows), steepest_rise(curve.steps, read)
        ),
        rule=StageRule(
            smoothing=f"Gaussian kernel in log(step), bandwidth {bandwidth}",
            boundary="a checkpoint where the smoothed LLC's slope changes sign, kept when "
            f"the swing on each side is >= {min_swing} of the smoothed curve's range",
            interval="the checkpoints either side of the boundary",
            not_read=NOT_READ,
            not_read_steps=[
                s for s, e in zip(curve.steps, curve.estimates, strict=True) if e.below_zero
            ],
            bandwidth=bandwidth,
            min_swing=min_swing,
        ),
    )
