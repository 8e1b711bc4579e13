"""Figures of induction measured as behaviour: the period exams (pass rate with Wilson intervals
and measured chance levels) and the text measures logged during training (the in-context-learning
score, the repeated-passage drop, the best induction score on natural text). Plain data in, a
plotly Figure out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from interp_toolkit.exams.periods import PeriodExam

HEIGHT = 380
_DASH = {"letters": "solid", "random": "dash"}


def period_exam_plot(
    series: Mapping[str, Sequence[PeriodExam]], *, lower_bound: float, title: str = "Period exams"
) -> go.Figure:
    """Pass rate by period, one line per model (``series``: name -> its exams) and token kind,
    with Wilson 95% error bars and the pass bar (the lower bound a period exam needs); dotted,
    hidden until clicked in the legend: each chance level measured on the same prompts."""
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, (name, exams) in enumerate(series.items()):
        colour = palette[i % len(palette)]
        for kind in dict.fromkeys(e.kind for e in exams):
            es = [e for e in exams if e.kind == kind]
            ivs = [e.interval for e in es]
            fig.add_trace(
                go.Scatter(
                    x=[e.period for e in es],
                    y=[e.pass_rate for e in es],
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [iv.high - iv.estimate for iv in ivs],
                        "arrayminus": [iv.estimate - iv.low for iv in ivs],
                        "thickness": 1,
                    },
                    mode="lines+markers",
                    name=f"{name} · {kind}",
                    line={"color": colour, "dash": _DASH.get(kind, "solid")},
                    customdata=[
                        [e.median_rank, e.n_prompts, iv.low, iv.high]
                        for e, iv in zip(es, ivs, strict=True)
                    ],
                    hovertemplate="period %{x}: %{y:.1%} pass [%{customdata[2]:.1%}, "
                    "%{customdata[3]:.1%}], median rank %{customdata[0]} (%{customdata[1]} "
                    f"prompts)<extra>{name} · {kind}</extra>",
                )
            )
            for ref in dict.fromkeys(c.model for e in es for c in e.chance):
                pts = [(e.period, c.pass_rate) for e in es for c in e.chance if c.model == ref]
                fig.add_trace(
                    go.Scatter(
                        x=[p for p, _ in pts],
                        y=[r for _, r in pts],
                        mode="lines",
                        name=f"chance for {name} · {kind}: {ref}",
                        line={"color": colour, "dash": "dot", "width": 1},
                        visible="legendonly",
                    )
                )
    fig.add_hline(
        y=lower_bound,
        line_dash="dash",
        line_color="green",
        annotation_text="pass bar (lower bound)",
    )
    fig.update_layout(
        title=title,
        height=HEIGHT + 40,
        xaxis={"title": "period (tokens between the two copies)", **period_axis(series)},
        yaxis={"title": "pass rate (target ranked first)", "range": [-0.02, 1.02]},
    )
    return fig


def period_axis(series: Mapping[str, Sequence[PeriodExam]]) -> dict[str, Any]:
    """An x axis for periods: every period measured when there are at most 16 of them; else a
    log axis ticked at powers of two and the longest period measured."""
    periods = sorted({e.period for exams in series.values() for e in exams})
    if len(periods) <= 16:
        return {"tickvals": periods}
    ticks = [p for p in (2, 4, 8, 16, 32, 64, 128, 256) if periods[0] <= p < periods[-1]]
    return {"type": "log", "tickvals": [*ticks, periods[-1]]}


#: Line colours of the models in :func:`copier_figure`, by depth.
DEPTH_COLOURS = {1: "#8c8c8c", 2: "#1f77b4", 3: "#2ca02c", 8: "#d62728"}


def copier_figure(
    panels: Mapping[str, Mapping[str, tuple[int, Sequence[PeriodExam]]]],
    post: Sequence[tuple[int, float, str]],
    *,
    title: str = "How good a copier: top-1 by period (x axis)",
    width: int = 480,
) -> go.Figure:
    """Top-1 rate by period and token kind, one panel per setting (``panels``: title -> {model
    name: (its depth, its exams)}), models coloured by depth and kinds by dash; the post's
    numbers (``post``: period, probability, label) drawn as stars in every panel."""
    fig = make_subplots(
        rows=len(panels), cols=1, subplot_titles=list(panels), vertical_spacing=0.17
    )
    for i, models in enumerate(panels.values(), start=1):
        for name, (depth, exams) in models.items():
            for kind in dict.fromkeys(e.kind for e in exams):
                es = [e for e in exams if e.kind == kind]
                fig.add_trace(
                    go.Scatter(
                        x=[e.period for e in es],
                        y=[e.pass_rate for e in es],
                        mode="lines",
                        name=f"{depth} layer{'s' * (depth > 1)} · {kind}",
                        legendgroup=f"{depth}{kind}",
                        showlegend=i == 1,
                        line={"color": DEPTH_COLOURS.get(depth), "dash": _DASH.get(kind)},
                        hovertemplate=f"{name} · {kind}: period %{{x}}, top-1 %{{y:.1%}}<extra></extra>",
                    ),
                    row=i,
                    col=1,
                )
        fig.add_trace(
            go.Scatter(
                x=[p for p, _, _ in post],
                y=[v for _, v, _ in post],
                mode="markers",
                marker={"symbol": "star", "size": 11, "color": "black"},
                name="the post (p of target, one prompt)",
                showlegend=i == 1,
                hovertext=[label for _, _, label in post],
                hoverinfo="text",
            ),
            row=i,
            col=1,
        )
        fig.update_xaxes(**period_axis({n: ex for n, (_, ex) in models.items()}), row=i, col=1)
        fig.update_yaxes(range=[-0.02, 1.02], tickformat=".0%", row=i, col=1)
    fig.update_layout(
        title=title,
        width=width,
        height=250 * len(panels) + 120,
        legend={"orientation": "h", "y": -0.08, "yanchor": "top", "font": {"size": 10}},
        margin={"l": 50, "r": 10, "b": 30},
    )
    return fig


#: The text measures training logs (metrics.jsonl keys): value key, interval key, axis title.
TEXT_CURVES = (
    ("icl_score", "icl_ci", "in-context score (late − early loss, nats)"),
    ("passage_drop", "passage_ci", "repeated-passage drop (nats)"),
    ("text_induction_best", None, "best induction score on text"),
)


def text_curves(rows: Sequence[dict[str, Any]]) -> go.Figure:
    """The text measures over training by step (metrics.jsonl rows that carry them), each with
    its 95% interval as a band where logged."""
    present = [c for c in TEXT_CURVES if any(c[0] in r for r in rows)]
    n = max(1, len(present))
    fig = make_subplots(
        rows=n,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=[c[2] for c in present],
    )
    for i, (key, ci, _) in enumerate(present, start=1):
        rs = [r for r in rows if key in r and "step" in r and r[key] is not None]
        xs = [r["step"] for r in rs]
        if ci is not None and all(ci in r for r in rs):
            fig.add_trace(
                go.Scatter(
                    x=xs + xs[::-1],
                    y=[r[ci][1] for r in rs] + [r[ci][0] for r in rs][::-1],
                    fill="toself",
                    line={"width": 0},
                    fillcolor="rgba(31,119,180,0.2)",
                    hoverinfo="skip",
                    showlegend=False,
                ),
                row=i,
                col=1,
            )
        fig.add_trace(
            go.Scatter(x=xs, y=[r[key] for r in rs], mode="lines+markers", name=key),
            row=i,
            col=1,
        )
    fig.update_layout(title="Induction on text", height=220 * n + 80, showlegend=False)
    fig.update_xaxes(title_text="step", row=n, col=1)
    return fig
