"""MLP neurons: their top contexts (circuitsvis ``text_neuron_activations``), a table of what each
fires on and promotes, and the monosemantic share beside its baselines (data in, HTML/figures
out)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import plotly.graph_objects as go
from circuitsvis.activations import text_neuron_activations
from circuitsvis.utils.render import RenderedHTML
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.units.neurons import BASELINES, LayerNeurons
from interp_toolkit.units.reading import concept_phrase
from interp_toolkit.views.page import table

#: How each reading of a statistic is named on pages.
READING = {"model": "model", "untrained": "untrained twin", "shuffled": "shuffled activations"}


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
    """Per neuron: max activation, its concept (share of the top-k; base rate; verdict), the
    tokens it fires on (with counts among its top-k) and the tokens it promotes."""
    rows: list[list[object]] = []
    for n in neurons:
        c = info.model.concepts[n]
        counts = Counter(int(t) for t in info.top_tokens[n].tolist())
        fires = ", ".join(
            f"{label[t]}×{c}" if c > 1 else label[t] for t, c in counts.most_common(6)
        )
        promotes = ", ".join(label[int(t)] for t in info.promoted[n, :6].tolist())
        concept = "dead" if c.dead else concept_phrase(c, lambda t: label.get(t, str(t)))
        rows.append(
            [
                f"{info.layer}.{n}",
                round(float(info.top.values[n, 0]), 3),
                concept,
                f"{c.share:.0%} (base {c.base:.1%})",
                "yes" if c.monosemantic else "no",
                fires,
                promotes,
            ]
        )
    return rows


NEURON_HEADER = [
    "neuron",
    "max act",
    "best concept",
    "share of top-k",
    "monosemantic",
    "fires on (top-k)",
    "promotes",
]


def neuron_table(info: LayerNeurons, label: dict[int, str], neurons: Sequence[int]) -> str:
    return table(NEURON_HEADER, neuron_rows(info, label, neurons))


def baseline_chart(layers: Sequence[LayerNeurons], names: Sequence[str]) -> go.Figure:
    """Share of live neurons that are monosemantic, on the model beside the untrained twin and
    the shuffled-activation control, per layer."""
    fig = go.Figure()
    for reading in BASELINES:
        pairs = zip(layers, names, strict=True)
        rules = [(name, i.stats[reading].rule) for i, name in pairs if reading in i.stats]
        fig.add_trace(
            go.Bar(
                x=[name for name, _ in rules],
                y=[rule.share for _, rule in rules],
                name=READING[reading],
                customdata=[f"{rule.monosemantic} of {rule.live}" for _, rule in rules],
                hovertemplate="%{x}: %{customdata} live (%{y:.1%})<extra></extra>",
            )
        )
    fig.update_layout(
        title="Monosemantic neurons: the model against its baselines",
        barmode="group",
        height=380,
        yaxis={"title": "share of live neurons", "tickformat": ".0%"},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig


BASELINE_HEADER = [
    "layer",
    "reading",
    "monosemantic (live)",
    "dead",
    "2+ token groups (withdrawn)",
    "mean groups",
    "mean entropy (bits)",
    "mean top-token share",
]


def baseline_table(layers: Sequence[LayerNeurons], names: Sequence[str]) -> str:
    """Per layer and reading: the rule's count, the withdrawn group count, entropy, top-token
    share (every statistic beside its baselines)."""
    summaries = [
        (name, READING[reading], info.stats[reading].summary())
        for info, name in zip(layers, names, strict=True)
        for reading in BASELINES
        if reading in info.stats
    ]
    rows = [
        [
            name,
            reading,
            f"{s.rule.monosemantic} of {s.rule.live}",
            s.rule.dead,
            s.token_groups.two_or_more,
            s.token_groups.mean,
            s.entropy_bits_mean,
            s.top_token_share_mean,
        ]
        for name, reading, s in summaries
    ]
    return table(BASELINE_HEADER, rows)
