"""Plotly figures for notebooks and reports. Every function takes plain data and returns a Figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch
from jaxtyping import Bool, Float
from plotly.colors import qualitative
from plotly.subplots import make_subplots
from torch import Tensor

from interp_toolkit.errors import UserError
from interp_toolkit.exams.single import ExamResult
from interp_toolkit.heads.registry import SCORE, HeadId
from interp_toolkit.text.labels import visible_token
from interp_toolkit.views.attention import escape_label

TARGET_COLOUR = "#d62728"
OTHER_COLOUR = "#7f9fbf"
HEIGHT = 380
#: Per-head values as a notebook holds them: a tensor, a numpy array or nested lists.
ScoreGrid = Tensor | np.ndarray | Sequence[Sequence[float | int]]


def _tick_step(n: int, max_ticks: int = 48) -> int:
    return max(1, -(-n // max_ticks))


def loss_curve(
    rows: Sequence[dict[str, Any]],
    *,
    x: str = "tokens",
    scores: Sequence[str] = ("previous_token", "induction"),
    log_x: bool = False,
    title: str = "Training",
) -> go.Figure:
    """Loss over training (metrics.jsonl rows); below it, one line per head for each score in
    ``scores`` (registry names) that the rows carry (induction: the phase change; previous-token:
    its partner)."""
    rows = [r for r in rows if "loss" in r and x in r]
    present = [SCORE[k] for k in scores if any(SCORE[k].logged_as in r for r in rows)]
    fig = make_subplots(
        rows=1 + len(present),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=[
            "loss: the training batches' (a curriculum's are mostly random tokens) and held-out text's",
            *[f"{s.title} per head" for s in present],
        ],
    )
    key = "mean_loss" if all("mean_loss" in r for r in rows) else "loss"
    fig.add_trace(
        go.Scatter(
            x=[r[x] for r in rows],
            y=[r[key] for r in rows],
            mode="lines",
            name="training loss (its own batches)",
            line={"color": "#1f77b4"},
        ),
        row=1,
        col=1,
    )
    if vr := [r for r in rows if "val_loss" in r]:
        fig.add_trace(
            go.Scatter(
                x=[r[x] for r in vr],
                y=[r["val_loss"] for r in vr],
                mode="lines+markers",
                name="held-out loss (held-out text)",
            ),
            row=1,
            col=1,
        )
    palette = qualitative.Plotly + qualitative.D3
    for i, score in enumerate(present, start=2):
        key = score.logged_as
        sr = [r for r in rows if key in r]
        grid = sr[0][key]
        n_heads = len(grid[0]) if grid else 0
        for layer, per_head in enumerate(grid):
            for head in range(len(per_head)):
                name = str(HeadId(layer, head))
                fig.add_trace(
                    go.Scatter(
                        x=[r[x] for r in sr],
                        y=[r[key][layer][head] for r in sr],
                        mode="lines",
                        name=name,
                        legendgroup=name,
                        showlegend=i == 2,
                        line={"color": palette[(layer * n_heads + head) % len(palette)]},
                        hovertemplate=f"{name}: %{{y:.3f}}<extra>{key}</extra>",
                    ),
                    row=i,
                    col=1,
                )
    fig.update_xaxes(title_text=x, row=1 + len(present), col=1)
    if log_x:
        fig.update_xaxes(type="log")
    fig.update_layout(
        title=title,
        height=300 + 220 * len(present),
        hovermode="x unified",
        margin={"t": 70, "l": 60, "r": 20, "b": 50},
    )
    return fig


def head_score_heatmap(
    scores: ScoreGrid,
    *,
    kind: str = "induction",
    passes: Bool[Tensor, "layer head"] | None = None,
    floor: float | None = None,
    tau: Float[Tensor, "layer head"] | None = None,
    p_value: Float[Tensor, "layer head"] | None = None,
    test: str | None = None,
    title: str | None = None,
) -> go.Figure:
    """Per-head scores (layer x head) on a fixed 0..1 colour scale (runs compare at a glance), with
    the effect-size ``floor`` on the colour bar. Heads that ``passes`` marks (significant in
    their specificity test, ``test`` in words, and >= the floor) are outlined and starred; each
    head's ``tau`` and ``p_value``, when given, show on hover (every head has its own τ).
    ``scores``: a tensor, a numpy array or nested lists."""
    s = score_matrix(scores)
    n_layers, n_heads = s.shape
    label = SCORE[kind].title
    marked = passes.detach().cpu().bool() if passes is not None else None
    stars = marked.tolist() if marked is not None else [[False] * n_heads] * n_layers
    text = [
        [f"{v:.2f}" + " ★" * m for v, m in zip(*rows, strict=True)]
        for rows in zip(s.tolist(), stars, strict=True)
    ]
    grids = [(name, grid) for name, grid in (("τ", tau), ("p", p_value)) if grid is not None]
    hover = [
        [
            f"head {HeadId(i, j)} scores {s[i, j]:.3f}"
            + "".join(f", {name} {float(grid[i, j]):.3g}" for name, grid in grids)
            for j in range(n_heads)
        ]
        for i in range(n_layers)
    ]
    zmin, zmax = min(0.0, float(s.min())), max(1.0, float(s.max()))
    ticks = {} if floor is None else {round(floor, 3): f"floor {floor:.2g}"}
    for end in (zmin, zmax):  # the ends, unless they would collide with the floor
        if all(abs(end - t) > 0.08 * (zmax - zmin) for t in ticks):
            ticks[round(end, 2)] = f"{end:.2g}"
    fig = go.Figure(
        go.Heatmap(
            z=s.tolist(),
            x=list(range(n_heads)),
            y=list(range(n_layers)),
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            zmin=zmin,
            zmax=zmax,
            colorbar={
                "title": {"text": label},
                "tickvals": sorted(ticks),
                "ticktext": [ticks[t] for t in sorted(ticks)],
            },
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
            name=label,
        )
    )
    for layer, head in marked.nonzero().tolist() if marked is not None else []:
        fig.add_shape(
            type="rect",
            x0=head - 0.5,
            x1=head + 0.5,
            y0=layer - 0.5,
            y1=layer + 0.5,
            line={"color": TARGET_COLOUR, "width": 3},
        )
    heading = title or label
    if marked is not None:
        rule = f"significant ({test})" if test else "significant"
        if floor is not None:
            rule += f" and ≥ effect-size floor {floor:.2g}"
        heading += f" (★ = {rule})"
    fig.update_layout(
        title=heading,
        height=max(220, 100 + 60 * n_layers),
        width=max(380, 180 + 70 * n_heads),
        xaxis={"title": "head", "tickmode": "linear", "dtick": 1},
        yaxis={"title": "layer", "tickmode": "linear", "dtick": 1, "autorange": "reversed"},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig


def head_impact_curves(
    impact: Float[Tensor, "layer head pos"],
    *,
    labels: Sequence[str] | None = None,
    top: int | None = None,
    title: str = "Drop in log-prob of the next token when one head is ablated",
    y_title: str = "Δ log p(next token)",
) -> go.Figure:
    """One line per head of ``impact[layer, head, pos]`` (the post's impact curves, e.g. from
    ``analysis.ablation.head_impact``); ``labels`` name the positions (for ``head_impact`` pass the
    tokens without the last one); ``top`` keeps the heads with the largest mean impact."""
    imp = impact.detach().float().cpu()
    n_layers, n_heads, n_pos = imp.shape
    order = [(ly, h) for ly in range(n_layers) for h in range(n_heads)]
    if top is not None and top < len(order):
        mean = imp.mean(dim=-1)
        order = sorted(sorted(order, key=lambda lh: -float(mean[lh]))[:top])
    fig = go.Figure()
    for ly, h in order:
        fig.add_trace(
            go.Scatter(
                x=list(range(n_pos)), y=imp[ly, h].tolist(), mode="lines", name=str(HeadId(ly, h))
            )
        )
    xaxis: dict[str, Any] = {"title": "position"}
    if labels is not None:
        labels = list(labels)[:n_pos]
        step = _tick_step(len(labels))
        xaxis.update(
            tickmode="array",
            tickvals=list(range(0, len(labels), step)),
            ticktext=[escape_label(lb) for lb in labels][::step],
        )
    fig.update_layout(
        title=title,
        height=HEIGHT,
        xaxis=xaxis,
        yaxis={"title": y_title},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig


def exam_topk(result: ExamResult, *, title: str | None = None) -> go.Figure:
    """Bar chart of an exam's top-k next-token probabilities (``result``: an ExamResult, rank 0 = top);
    the target is highlighted, and added as an extra bar when it is not in the top k."""
    target_label = visible_token(result.target)
    names = [f"#{i} {escape_label(visible_token(t))}" for i, (t, _) in enumerate(result.top, 1)]
    probs = [float(p) for _, p in result.top]
    colours = [TARGET_COLOUR if t == result.target else OTHER_COLOUR for t, _ in result.top]
    if TARGET_COLOUR not in colours:
        names.append(f"#{int(result.rank) + 1} {escape_label(target_label)} (target)")
        probs.append(float(result.prob))
        colours.append(TARGET_COLOUR)
    fig = go.Figure(
        go.Bar(
            x=probs,
            y=names,
            orientation="h",
            marker={"color": colours},
            hovertemplate="%{y}: p=%{x:.3f}<extra></extra>",
            name="probability",
        )
    )
    prompt = result.prompt if len(result.prompt) <= 70 else "…" + result.prompt[-69:]
    heading = title or (
        f"{escape_label(prompt)} → {escape_label(target_label)}: rank {result.rank} (0 = top), "
        f"p = {result.prob:.3f}"
    )
    fig.update_layout(
        title={"text": heading, "font": {"size": 13}},
        height=110 + 24 * len(names),
        xaxis={"title": "probability", "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "type": "category"},
        margin={"t": 50, "l": 140, "r": 20, "b": 45},
    )
    return fig


def attention_heatmap(
    pattern: Float[Tensor, "dest src"],
    labels: Sequence[str] | None = None,
    *,
    title: str = "Attention pattern",
    period: int | None = None,
    stripe_from: int | None = None,
) -> go.Figure:
    """One head's attention (rows: destination, columns: source). With ``period`` Δ (tokens repeat
    every Δ positions), the induction stripe k = j - Δ + 1 is overlaid from destination
    ``stripe_from`` (default Δ) on."""
    p = pattern.detach().float().cpu()
    n_dest, n_src = p.shape
    tl = [escape_label(lb) for lb in labels] if labels is not None else None
    hover = tl if tl is not None else list(range(max(n_src, n_dest)))
    custom = [[f"{hover[j]} → {hover[k]}" for k in range(n_src)] for j in range(n_dest)]
    fig = go.Figure(
        go.Heatmap(
            z=p.tolist(),
            x=list(range(n_src)),
            y=list(range(n_dest)),
            colorscale="Blues",
            zmin=0,
            zmax=1,
            customdata=custom,
            hovertemplate="dest %{y} src %{x}<br>%{customdata}: %{z:.3f}<extra></extra>",
            colorbar={"title": {"text": "attention"}},
            name="attention",
        )
    )
    if period is not None:
        start = period if stripe_from is None else stripe_from
        js = [j for j in range(start, n_dest) if 0 <= j - period + 1 < n_src]
        fig.add_trace(
            go.Scatter(
                x=[j - period + 1 for j in js],
                y=js,
                mode="lines",
                line={"color": TARGET_COLOUR, "width": 1.5, "dash": "dot"},
                name=f"induction stripe k = j − {period} + 1",
                hoverinfo="skip",
            )
        )
    axis: dict[str, Any] = {"constrain": "domain"}
    fig.update_layout(
        title=title,
        height=640,
        width=720,
        xaxis={**axis, "title": "source position", "scaleanchor": "y"},
        yaxis={**axis, "title": "destination position", "autorange": "reversed"},
        legend={"orientation": "h", "y": -0.15},
        margin={"t": 60, "l": 70, "r": 20, "b": 70},
    )
    if tl is not None:
        step = _tick_step(len(tl), 32)
        ticks = {
            "tickmode": "array",
            "tickvals": list(range(0, len(tl), step)),
            "ticktext": tl[::step],
        }
        fig.update_xaxes(**ticks, tickangle=-60)
        fig.update_yaxes(**ticks)
    return fig


def score_matrix(values: ScoreGrid) -> Float[Tensor, "layer head"]:
    """A (layer, head) float tensor (CPU) from a tensor, a numpy array or nested lists (e.g. from
    a JSON summary)."""
    if isinstance(values, Tensor):
        grid = values.detach().float().cpu()
    else:
        grid = torch.as_tensor(np.asarray(values, dtype=np.float32))
    if grid.ndim != 2:
        raise UserError(
            f"per-head scores must be a [layer, head] grid, not shape {tuple(grid.shape)}."
        )
    return grid
