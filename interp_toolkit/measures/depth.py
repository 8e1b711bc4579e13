"""What a study measured on one model (one depth): :class:`DepthMeasurement`, read off a trained
run and its analyses by :func:`measure_depth`. The registry of measures (:mod:`.registry`) and the
claims (:mod:`.claims`) read it; reports render it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from interp_toolkit.causal.routes import ModelRoute
from interp_toolkit.causal.summary import CircuitSummary
from interp_toolkit.exams.periods import PeriodExam, with_chance
from interp_toolkit.exams.role_checks import RoleChecks
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.dynamics import PhaseLoss, phase_loss
from interp_toolkit.heads.induction import first_induction_step
from interp_toolkit.measures.layers import ProbeMeasurement
from interp_toolkit.measures.run import ExamRow, RunSummary
from interp_toolkit.runs.folder import Run
from interp_toolkit.stats.intervals import Interval
from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.text.stream import setting_name


@dataclass(frozen=True)
class DepthMeasurement(Jsonable):
    """What a study measured on one model (one depth)."""

    name: str
    n_layers: int
    induction_heads: tuple[str, ...]  # heads with the induction role
    top_head: str  # the strongest induction head (layer >= 1), role or not
    top_score: float
    induction_step: int | None  # first scoring with a head past Thresholds.induction
    induction_tokens: int | None
    induction_minutes: float | None
    steps: int
    tokens: int
    train_minutes: float
    final_loss: float | None
    val_loss: float | None
    period_exams: tuple[PeriodExam, ...]  # the two-repeat exams at every period and kind
    route: ModelRoute
    circuit: CircuitSummary | None = None
    setting: str = ""  # the training setting (natural text | curriculum), from the run's data
    role_checks: RoleChecks | None = None  # the causal check of each role
    previous_token_heads: tuple[str, ...] = ()  # heads with the previous-token role
    prompt_exams: tuple[ExamRow, ...] = ()  # the original post's exams in the model's tokens
    passage_order: Interval | None = None  # the passage order effect (docs/study.md section 0)
    phase: PhaseLoss | None = None  # the phase change and the training loss around it
    # the previous-token probe (1 and 2 layers); study.json keeps the probes in their own list
    probe: ProbeMeasurement | None = dataclasses.field(default=None, metadata=json_field(skip=True))

    json_extra = ("heads_per_layer",)

    def heads_per_layer(self) -> list[int]:
        layers = [int(h.split(".")[0]) for h in self.induction_heads]
        return [layers.count(la) for la in range(self.n_layers)]

    def prompt_exam(self, name: str) -> ExamRow | None:
        """The original post's exam ``name`` as this model sat it (None: not sat)."""
        return next((e for e in self.prompt_exams if e.name == name), None)


def measure_depth(
    run: Run,
    summary: RunSummary,
    period_exams: Sequence[PeriodExam],
    route: ModelRoute,
    circuit: CircuitSummary | None = None,
    role_checks: RoleChecks | None = None,
    passage_order: Interval | None = None,
    probe: ProbeMeasurement | None = None,
) -> DepthMeasurement:
    """What the study page compares about one trained depth (from its metrics and analyses)."""
    rows = run.metrics()
    step = first_induction_step(rows, THRESHOLDS.induction)
    hit = next((r for r in rows if r["step"] == step), None)
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    data = run.settings.get("data") or {}  # the training setting: "" when not recorded
    return DepthMeasurement(
        name=run.name,
        n_layers=run.model_cfg.n_layers,
        induction_heads=tuple(summary.heads["induction"]),
        top_head=summary.top_induction.head,
        top_score=summary.top_induction.score,
        induction_step=step,
        induction_tokens=None if hit is None else int(hit["tokens"]),
        induction_minutes=None if hit is None else round(hit["elapsed_s"] / 60, 2),
        steps=int(rows[-1]["step"]) if rows else 0,
        tokens=int(rows[-1]["tokens"]) if rows else 0,
        train_minutes=round(rows[-1]["elapsed_s"] / 60, 2) if rows else 0.0,
        final_loss=summary.final_loss,
        val_loss=val[-1] if val else None,
        period_exams=tuple(period_exams),
        route=route,
        circuit=circuit,
        setting=setting_name(data["repeat_fraction"]) if "repeat_fraction" in data else "",
        role_checks=role_checks,
        previous_token_heads=tuple(summary.heads.get("previous-token", ())),
        prompt_exams=tuple(summary.prompt_exams.results),
        passage_order=passage_order,
        phase=phase_loss(rows, THRESHOLDS.induction),
        probe=probe,
    )


def one_layer_chance(ms: Sequence[DepthMeasurement]) -> list[DepthMeasurement]:
    """The measurements with the 1-layer model's exams added as a chance level to every deeper
    model's, where they sat the same prompts (:func:`~.periods.with_chance`)."""
    one = next((m for m in ms if m.n_layers == 1), None)
    if one is None:
        return list(ms)
    name = f"1-layer model {one.name}"
    return [
        m
        if m.n_layers == 1
        else dataclasses.replace(
            m, period_exams=tuple(with_chance(m.period_exams, one.period_exams, name))
        )
        for m in ms
    ]
