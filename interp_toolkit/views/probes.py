"""Probe curves: held-out accuracy of a linear probe at every layer boundary (data in, figure out)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative

from interp_toolkit.probing.probes import ProbeResult, beyond_untrained
from interp_toolkit.views.page import Section, table, text

HEIGHT = 400


def _ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def probe_curves(
    results: Sequence[ProbeResult],
    names: Sequence[str] | None = None,
) -> go.Figure:
    """Balanced accuracy (solid, with its 95% interval), the control task's (dashed) and an
    untrained model's (dotted) against depth in layers (embed 0; after layer l's attention l + 1,
    or l + ½ when an MLP follows; after its MLP l + 1), so attention-only and MLP models line up
    by layer; chance is a thin line. ``names`` label the results (default: the feature, and the
    ablated heads if any)."""
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, res in enumerate(results):
        name = names[i] if names is not None else _name(res)
        colour = palette[i % len(palette)]
        x = [r.depth for r in res.rows]
        series = [
            ("balanced", "balanced_ci", None, ""),
            ("control", "control_ci", "dash", " control"),
            ("untrained", "untrained_ci", "dot", " untrained"),
        ]
        for key, ci_key, dash, label in series:
            ys = [getattr(r, key) for r in res.rows]
            if all(y is None for y in ys):
                continue
            cis = [getattr(r, ci_key) or (y, y) for r, y in zip(res.rows, ys, strict=True)]
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=ys,
                    text=[r.boundary for r in res.rows],
                    mode="lines+markers",
                    name=name + label,
                    legendgroup=name,
                    line={"color": colour, "dash": dash},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [hi - y for (_, hi), y in zip(cis, ys, strict=True)],
                        "arrayminus": [y - lo for (lo, _), y in zip(cis, ys, strict=True)],
                        "thickness": 1,
                    },
                    hovertemplate=f"%{{text}}: %{{y:.3f}}<extra>{name}{label}</extra>",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=[min(x), max(x)],
                y=[res.rows[0].chance] * 2,
                mode="lines",
                name=f"{name} chance",
                legendgroup=name,
                line={"color": colour, "dash": "dot", "width": 1},
                hoverinfo="skip",
            )
        )
    features = sorted({r.feature for r in results})
    depth = max((r.depth for res in results for r in res.rows), default=1.0)
    fig.update_layout(
        title=f"Linear probe balanced accuracy by layer: {', '.join(features)} (held-out rows, 95%)",
        height=HEIGHT,
        xaxis={"title": "layer boundary (0 = embedding)", "dtick": 0.5 if depth < 6 else 1},
        yaxis={"title": "balanced accuracy", "range": [0, 1.02]},
        margin={"t": 60, "l": 60, "r": 20, "b": 50},
    )
    return fig


def _name(res: ProbeResult) -> str:
    return res.feature + (f" (ablated {', '.join(res.ablated)})" if res.ablated else "")


PROBE_HEADER = [
    "boundary",
    "balanced accuracy [95%]",
    "control [95%]",
    "selectivity [95%]",
    "untrained [95%]",
    "chance",
    "decodable beyond untrained",
    "n test",
]


def probe_table(res: ProbeResult) -> str:
    """The per-boundary table of one result (HTML)."""
    rows = [
        [
            r.boundary,
            _ci(r.balanced, r.balanced_ci),
            _ci(r.control, r.control_ci),
            _ci(r.selectivity, r.selectivity_ci),
            _ci(r.untrained, r.untrained_ci),
            f"{r.chance:.3g}",
            "yes" if beyond_untrained(r) else "no",
            r.n_test,
        ]
        for r in res.rows
    ]
    return table(PROBE_HEADER, rows)


def probe_section(results: Sequence[ProbeResult], names: Sequence[str] | None = None) -> Section:
    """A page section: the curves of every result, then each result's table with its definition."""
    items: list = [probe_curves(results, names)]
    for i, res in enumerate(results):
        name = names[i] if names is not None else _name(res)
        where = res.data.corpus or "random tokens with one repeated segment"
        items.append(
            text(
                f"{name}: {res.definition}; its input: {res.input} ({res.data.source}: {where}).",
                "p",
                "note",
            )
        )
        items.append(probe_table(res))
    return Section(
        "Linear probes by layer",
        items,
        intro="A linear probe (LDA) per layer boundary, fit on 80% of the rows and scored on the "
        "rest by balanced accuracy (the mean over labels of each label's share predicted right; "
        "chance = 1 / the number of labels), with a 95% interval from resampling the held-out "
        "rows. Control (Hewitt & Liang 2019): every value of the feature's input (for the "
        "previous token: the token at p-1) gets a random label, so a probe can score on it only "
        "by memorising that input; selectivity = balanced accuracy - the control's. Untrained: "
        "the same probe on an untrained model of the same architecture.",
    )
