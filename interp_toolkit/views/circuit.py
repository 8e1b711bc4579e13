"""A discovered circuit as a plotly graph, and the faithfulness curve (data in, figures out).

Nodes sit in columns by stage (embed, layer 0, layer 1, ..., logits) and rows by head; an edge is
drawn from its source to the Q, K or V port of its target (three short offsets around the head),
its width proportional to |score| and its colour naming the input. Input: the ``circuit`` JSON of
``interp-toolkit circuit`` (edges as ``{"source", "target", "input", "score"}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

INPUT_COLORS = {"q": "#1f77b4", "k": "#d62728", "v": "#2ca02c", "mlp": "#9467bd", "logits": "#555"}
PORT_OFFSET = {"q": 0.22, "k": 0.0, "v": -0.22, "mlp": 0.0, "logits": 0.0}


def _position(label: str, n_layers: int, n_heads: int) -> tuple[float, float]:
    """(x, y) of a node label: ``embed`` left, ``logits`` right, ``L.H`` at column L, row H."""
    middle = (n_heads - 1) / 2
    if label == "embed":
        return 0.0, middle
    if label == "logits":
        return float(n_layers + 1), middle
    if label.startswith("mlp"):
        return int(label[3:]) + 1.45, float(n_heads)
    layer, head = (int(x) for x in label.split("."))
    return float(layer + 1), float(head)


def circuit_figure(
    edges: Sequence[Mapping[str, Any]],
    *,
    n_layers: int,
    n_heads: int,
    title: str = "Circuit",
    roles: Mapping[str, str] | None = None,
    max_edges: int | None = None,
) -> go.Figure:
    """The circuit's nodes and weighted edges (``roles``: head label -> its role, for hover).
    ``max_edges``: draw only that many, the largest by |score|, and say under the graph how many
    more the circuit has (:func:`drawn_note`)."""
    fig = go.Figure()
    n_all = len(edges)
    if max_edges is not None and n_all > max_edges:
        edges = sorted(edges, key=lambda e: -abs(float(e["score"])))[:max_edges]
    biggest = max((abs(float(e["score"])) for e in edges), default=1.0) or 1.0
    nodes: dict[str, tuple[float, float]] = {}
    for e in edges:
        x0, y0 = nodes[str(e["source"])] = _position(str(e["source"]), n_layers, n_heads)
        x1, y1 = nodes[str(e["target"])] = _position(str(e["target"]), n_layers, n_heads)
        width = 1.0 + 7.0 * abs(float(e["score"])) / biggest
        color = INPUT_COLORS.get(str(e["input"]), "#555")
        name = f"{e['source']} -> {e['target']} ({e['input']})"
        fig.add_trace(
            go.Scatter(
                x=[x0 + 0.08, x1 - 0.12],
                y=[y0, y1 + PORT_OFFSET.get(str(e["input"]), 0.0)],
                mode="lines+markers",
                line={"width": width, "color": color},
                marker={"size": [0, 7], "symbol": "triangle-right", "color": color},
                name=name,
                hovertemplate=f"{name}<br>score {float(e['score']):.4g}<extra></extra>",
                showlegend=False,
            )
        )
    labels = sorted(nodes)
    fig.add_trace(
        go.Scatter(
            x=[nodes[n][0] for n in labels],
            y=[nodes[n][1] for n in labels],
            mode="markers+text",
            text=labels,
            textposition="top center",
            marker={"size": 18, "color": "#fff", "line": {"width": 2, "color": "#333"}},
            hovertext=[f"{n}: {(roles or {}).get(n, '')}" for n in labels],
            hoverinfo="text",
            showlegend=False,
        )
    )
    for kind, color in INPUT_COLORS.items():  # legend: what each colour means
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                line={"color": color, "width": 4},
                name=f"into {kind}",
            )
        )
    ticks = ["embed", *[f"layer {i}" for i in range(n_layers)], "logits"]
    if len(edges) < n_all:
        fig.add_annotation(
            text=drawn_note(len(edges), n_all),
            xref="paper",
            yref="paper",
            x=0,
            y=-0.12,
            xanchor="left",
            yanchor="top",
            showarrow=False,
        )
        fig.update_layout(margin={"b": 90})
    fig.update_layout(
        title=title,
        height=max(320, 70 * (n_heads + 1)),
        xaxis={"tickvals": list(range(n_layers + 2)), "ticktext": ticks, "showgrid": False},
        # integer head ticks, and room above the top row and below the bottom one for the
        # labels drawn over each node (they were clipped at the top)
        yaxis={
            "title": "head",
            "showgrid": False,
            "zeroline": False,
            "tickvals": list(range(n_heads)),
            "range": [-0.7, max([n_heads - 1, *(y for _, y in nodes.values())]) + 1.3],
        },
        plot_bgcolor="#fafafa",
    )
    return fig


def drawn_note(drawn: int, total: int) -> str:
    """What a capped graph says under it."""
    return (
        f"the top {drawn} of {total} edges by |score| are drawn; {total - drawn} more are not drawn"
    )


def faithfulness_curve(
    curves: Mapping[str, Sequence[tuple[int, float]]],
    *,
    target: float,
    title: str = "Faithfulness of the top-k edges",
) -> go.Figure:
    """Recovered share of the gap against the number of edges kept, one line per method."""
    fig = go.Figure()
    for name, points in curves.items():
        fig.add_trace(
            go.Scatter(
                x=[k for k, _ in points], y=[f for _, f in points], mode="lines+markers", name=name
            )
        )
    fig.add_hline(y=target, line_dash="dot", annotation_text=f"{target:.0%}")
    fig.update_layout(
        title=title,
        height=340,
        xaxis={"title": "edges kept (top-k by |score|)", "type": "log"},
        # a short axis title: the long one ran into the figure's title
        yaxis={"title": "share of gap recovered", "tickformat": ".0%"},
        margin={"l": 70},
    )
    return fig
