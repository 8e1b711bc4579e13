"""MLP neurons: their top contexts (circuitsvis ``text_neuron_activations``), a table of what each
fires on and promotes, and the spread of polysemanticity (data in, HTML/figures out)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import plotly.graph_objects as go
from circuitsvis.activations import text_neuron_activations
from circuitsvis.utils.render import RenderedHTML
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.analysis.neurons import LayerNeurons
from interp_toolkit.views.page import table


def context_view(
    contexts: Sequence[Sequence[str]],
    activations: Sequence[Float[Tensor, "_pos neuron"]],
    *,
    layer: int,
    neurons: Sequence[int],
) -> RenderedHTML:
    """One circuitsvis ``text_neuron_activations`` view: each context (token labels) coloured by
    the activation of each of ``neurons`` (pick the neuron in the view's drop-down). It renders
    inline in Jupyter; a page puts it through :mod:`.cv` (offline, the bundle inlined once)."""
    return text_neuron_activations(
        tokens=[list(c) for c in contexts],
        activations=[a.detach().float().cpu()[:, None, :] for a in activations],
        first_dimension_name="Layer",
        second_dimension_name="Neuron",
        first_dimension_labels=[str(layer)],
        second_dimension_labels=[f"{layer}.{n}" for n in neurons],
    )


def neuron_rows(
    info: LayerNeurons, label: dict[int, str], neurons: Sequence[int]
) -> list[list[object]]:
    """Per neuron: max activation, groups, entropy, the tokens it fires on (with counts among its
    top-k) and the tokens it promotes; token ids are shown through ``label``."""
    rows: list[list[object]] = []
    for n in neurons:
        counts = Counter(int(t) for t in info.top_tokens[n].tolist())
        fires = ", ".join(
            f"{label[t]}×{c}" if c > 1 else label[t] for t, c in counts.most_common(6)
        )
        promotes = ", ".join(label[int(t)] for t in info.promoted[n, :6].tolist())
        rows.append(
            [
                f"{info.layer}.{n}",
                round(float(info.top.values[n, 0]), 3),
                int(info.groups[n]),
                round(float(info.entropy[n]), 2),
                fires,
                promotes,
            ]
        )
    return rows


NEURON_HEADER = ["neuron", "max act", "groups", "entropy (bits)", "fires on (top-k)", "promotes"]


def neuron_table(info: LayerNeurons, label: dict[int, str], neurons: Sequence[int]) -> str:
    return table(NEURON_HEADER, neuron_rows(info, label, neurons))


def polysemanticity_histogram(
    layers: Sequence[LayerNeurons], names: Sequence[str], *, title: str | None = None
) -> go.Figure:
    """Share of each layer's neurons by number of unrelated token groups (0 = dead)."""
    fig = go.Figure()
    top = max((int(la.groups.max()) for la in layers), default=1)
    for info, name in zip(layers, names, strict=True):
        counts = [int((info.groups == g).sum()) for g in range(top + 1)]
        fig.add_trace(
            go.Bar(
                x=list(range(top + 1)),
                y=[c / max(1, info.n_neurons) for c in counts],
                name=name,
                customdata=counts,
                hovertemplate="%{x} groups: %{customdata} neurons (%{y:.1%})<extra></extra>",
            )
        )
    fig.update_layout(
        title=title or "Neurons by number of unrelated token groups in their top contexts",
        barmode="group",
        height=380,
        xaxis={"title": "token groups (0 = dead)", "dtick": 1},
        yaxis={"title": "share of neurons", "tickformat": ".0%"},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig
