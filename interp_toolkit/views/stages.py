"""The stages figure: LLC (with its interval), loss, held-out loss and head scores over training
(log steps), the stage boundaries drawn. Data in (the :class:`~interp_toolkit.development.curve.
Stages` and the run's metrics.jsonl rows), figure or page out."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp_toolkit.heads.induction import best_induction_score, logged_induction_key
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.views.page import Section, render_report, text

if TYPE_CHECKING:
    from interp_toolkit.development.curve import Stages
    from interp_toolkit.development.llc import LLCEstimate


def _measured(stages: Stages) -> list[tuple[int, LLCEstimate]]:
    """The checkpoints with a finite LLC, (step, estimate) each."""
    c = stages.curve
    return [(s, e) for s, e in zip(c.steps, c.estimates, strict=True) if math.isfinite(e.llc)]


def stages_figure(
    stages: Stages, rows: list[dict[str, Any]], control: Stages | None = None
) -> go.Figure:
    """Three panels over log(step): the LLC and its interval; the training and held-out loss;
    the strongest previous-token and induction heads. Boundaries as dashed lines, their
    intervals shaded. ``control``: another run's stages (the 1-layer control), its LLC drawn
    beside in the first panel."""
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=("LLC (mean ± 2 s.e. over chains)", "loss", "strongest head score"),
    )

    def add(row: int, x: list[Any], y: list[Any], name: str, **style: Any) -> None:
        fig.add_trace(go.Scatter(x=x, y=y, name=name, **style), row=row, col=1)

    def llc(pts: list[tuple[int, LLCEstimate]]) -> tuple[list[Any], list[Any]]:
        return [s for s, _ in pts], [e.llc for _, e in pts]

    pts = _measured(stages)
    steps, band = [s for s, _ in pts], [e.high for _, e in pts] + [e.low for _, e in pts][::-1]
    shade = {"fill": "toself", "line": {"width": 0}, "opacity": 0.25, "hoverinfo": "skip"}
    add(1, steps + steps[::-1], band, "LLC interval", **shade)
    add(1, *llc([(s, e) for s, e in pts if not e.below_zero]), "LLC", mode="lines+markers")
    below = [(s, e) for s, e in pts if e.below_zero]
    if below:  # not at a local minimum: shown, not read by the stage rule
        circle, name = {"symbol": "circle-open"}, "LLC below 0 (not read by the rule)"
        add(1, *llc(below), name, mode="markers", marker=circle)
    if control is not None:
        name, dot = f"LLC of {control.curve.run} (control)", {"dash": "dot"}
        add(1, *llc(_measured(control)), name, mode="lines+markers", line=dot)
    logged = [r for r in rows if isinstance(r.get("loss"), (int, float)) and r.get("step", 0) > 0]
    add(2, [r["step"] for r in logged], [r["loss"] for r in logged], "training loss")
    scored = [r for r in rows if logged_induction_key(r) is not None and r.get("step", 0) > 0]
    at = [r["step"] for r in scored]
    val = [r for r in scored if isinstance(r.get("val_loss"), (int, float))]
    if val:
        add(2, [r["step"] for r in val], [r["val_loss"] for r in val], "held-out loss")
    prev = SCORE["previous_token"].logged_as
    add(3, at, [max(max(g) for g in r[prev]) for r in scored], "previous-token (best head)")
    best = [best_induction_score(r[logged_induction_key(r)]) for r in scored]
    add(3, at, best, "induction (best head, layer >= 1)")
    for b in stages.boundaries:
        fig.add_vrect(x0=b.low, x1=b.high, fillcolor="grey", opacity=0.12, line_width=0)
        fig.add_vline(x=b.step, line_dash="dash", line_color="black")
    fig.update_xaxes(type="log", title_text="step (log)", row=3, col=1)
    fig.update_xaxes(type="log")
    fig.update_layout(height=800, title=f"{stages.curve.run}: stages from the LLC")
    return fig


def stages_section(stages: Stages, rows: list[dict[str, Any]], title: str = "Stages") -> Section:
    """The figure and the stages' sentences (a run report's section, or a page alone)."""
    lines = [f"stage {s.stage} (steps {s.start}-{s.end}): {s.summary}" for s in stages.stages]
    items: list[Any] = [stages_figure(stages, rows), *(text(line) for line in lines)]
    rule, curve = stages.rule, stages.curve
    intro = f"Rule: {rule.boundary}. Batches: {curve.batches['source']}."
    if rule.not_read_steps:
        intro += f" Not read: {rule.not_read} (here {len(rule.not_read_steps)} checkpoints)."
    if curve.settings_source:
        intro += f" SGLD settings: {curve.settings_source}."
    return Section(title, items, intro=intro)


def stages_html(stages: Stages, rows: list[dict[str, Any]]) -> str:
    """One offline page: the figure and the stages' sentences (a ``stages --json`` file is read
    back with :meth:`Stages.from_dict`)."""
    return render_report([stages_section(stages, rows)], title=f"{stages.curve.run}: stages")
