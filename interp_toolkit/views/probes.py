"""Probe curves: held-out accuracy of a linear probe at every layer boundary (data in, figure out)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative

from interp_toolkit.analysis.probes import ProbeResult
from interp_toolkit.views.page import Section, table, text

HEIGHT = 400


def probe_curves(
    results: Sequence[ProbeResult],
    names: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> go.Figure:
    """Accuracy (solid) and control accuracy (dashed) of each result against depth in layers
    (embed 0; after layer l's attention l + 1, or l + ½ when an MLP follows; after its MLP l + 1),
    so attention-only and MLP models line up by layer; the majority baseline is dotted. ``names``
    label the results (default: the feature, and the ablated heads if any)."""
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, res in enumerate(results):
        name = names[i] if names is not None else _name(res)
        colour = palette[i % len(palette)]
        x = [r.depth for r in res.rows]
        text = [r.boundary for r in res.rows]
        for key, dash, label in (("accuracy", None, ""), ("control", "dash", " control")):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[getattr(r, key) for r in res.rows],
                    text=text,
                    mode="lines+markers",
                    name=name + label,
                    legendgroup=name,
                    line={"color": colour, "dash": dash},
                    hovertemplate=f"%{{text}}: %{{y:.3f}}<extra>{name}{label}</extra>",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=[min(x), max(x)],
                y=[res.rows[0].majority] * 2,
                mode="lines",
                name=f"{name} majority",
                legendgroup=name,
                line={"color": colour, "dash": "dot", "width": 1},
                hoverinfo="skip",
            )
        )
    features = sorted({r.feature for r in results})
    depth = max((r.depth for res in results for r in res.rows), default=1.0)
    fig.update_layout(
        title=title or f"Linear probe accuracy by layer: {', '.join(features)} (held-out rows)",
        height=HEIGHT,
        xaxis={"title": "layer boundary (0 = embedding)", "dtick": 0.5 if depth < 6 else 1},
        yaxis={"title": "accuracy", "range": [0, 1.02]},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig


def _name(res: ProbeResult) -> str:
    return res.feature + (f" (ablated {', '.join(res.ablated)})" if res.ablated else "")


def probe_table(res: ProbeResult) -> str:
    """The per-boundary table of one result (HTML)."""
    rows = [
        [r.boundary, r.accuracy, r.control, r.selectivity, r.majority, r.n_train, r.n_test]
        for r in res.rows
    ]
    header = ["boundary", "accuracy", "control", "selectivity", "majority", "n train", "n test"]
    return table(header, rows)


def probe_section(
    results: Sequence[ProbeResult],
    names: Sequence[str] | None = None,
    *,
    title: str = "Linear probes by layer",
) -> Section:
    """A page section: the curves of every result, then each result's table with its definition."""
    items: list = [probe_curves(results, names)]
    for i, res in enumerate(results):
        name = names[i] if names is not None else _name(res)
        info = res.data
        where = info.get("corpus", "random tokens with one repeated segment")
        items.append(
            text(f"{name}: {res.definition} ({info.get('source')}: {where}).", "p", "note")
        )
        items.append(probe_table(res))
    return Section(
        title,
        items,
        intro="A linear probe (LDA) per layer boundary, fit on 80% of the rows and scored on the "
        "rest. Control: every token type gets a random label, so a probe can score on it only "
        "by memorising the token at the position (Hewitt & Liang 2019); selectivity = accuracy - "
        "control. Majority: always answering the most frequent training label.",
    )
