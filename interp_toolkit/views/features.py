"""SAE feature views: the metrics, the density histogram, a table of latents with their computed
descriptions, and circuitsvis token colours of their top contexts (data in, HTML/figures out)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go
from circuitsvis.activations import text_neuron_activations
from circuitsvis.utils.render import RenderedHTML
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.saes.evaluate import SAEEvals
from interp_toolkit.saes.features import LatentRecord
from interp_toolkit.views.page import table

#: The metrics a page lists first (SAELens's names).
HEADLINE: tuple[tuple[str, Callable[[SAEEvals], float]], ...] = (
    ("L0", lambda e: e.l0),
    ("explained variance", lambda e: e.explained_variance),
    ("CE loss recovered (ce_loss_score)", lambda e: e.ce_loss_score),
    ("CE loss clean", lambda e: e.ce_loss_without_sae),
    ("CE loss with the SAE", lambda e: e.ce_loss_with_sae),
    ("CE loss, hook zero-ablated", lambda e: e.ce_loss_with_ablation),
    ("KL to clean, SAE spliced in", lambda e: e.kl_div_with_sae),
    ("KL to clean, hook zero-ablated", lambda e: e.kl_div_with_ablation),
    ("dead latents", lambda e: e.dead),
    ("dense latents", lambda e: e.dense),
    ("evaluation tokens", lambda e: e.total_tokens_eval),
)


def headline(metrics: SAEEvals) -> list[tuple[str, Any]]:
    """(label, value) of the headline metrics of an SAE's evals."""
    values = ((label, read(metrics)) for label, read in HEADLINE)
    return [(label, round(v, 4) if isinstance(v, float) else v) for label, v in values]


def family_columns(metrics: SAEEvals) -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of the headline metrics: pooled, then one column per row family
    (``by_family``: text, synthetic) when the evaluation rows were split."""
    families = metrics.by_family
    each = [dict(headline(families[f])) for f in families]
    header = ["metric", "all rows" if families else "value", *(f"{f} rows" for f in families)]
    rows = [[label, value] + [c[label] for c in each] for label, value in headline(metrics)]
    return header, rows


def density_histogram(labels: Sequence[str], counts: Sequence[int]) -> go.Figure:
    """Latents by log10 feature density (share of evaluation tokens they fire on)."""
    fig = go.Figure(
        go.Bar(x=list(labels), y=list(counts), hovertemplate="%{x}: %{y}<extra></extra>")
    )
    fig.update_layout(
        title="Feature density: latents by log10(share of tokens they fire on)",
        height=340,
        xaxis={"title": "log10 density", "type": "category"},
        yaxis={"title": "latents"},
        margin={"t": 60, "l": 60, "r": 20, "b": 60},
    )
    return fig


def latent_table(latents: Sequence[LatentRecord], heads: Sequence[str] | None = None) -> str:
    """A row per latent; with ``heads`` (an attention SAE) its largest head shares."""
    rows = []
    for d in latents:
        row = [d.latent, d.density, d.max_activation, d.description, ", ".join(d.promoted[:5])]
        if heads is not None and d.head_share is not None:
            pairs = sorted(zip(heads, d.head_share, strict=True), key=lambda p: -p[1])
            row.append(", ".join(f"{h} {s:.0%}" for h, s in pairs[:3] if s >= 0.05))
        rows.append(row)
    header = ["latent", "density", "max act", "description", "promotes"]
    return table(header + (["decoder share by head"] if heads is not None else []), rows)


def context_view(
    contexts: Sequence[Sequence[str]],
    activations: Sequence[Float[Tensor, "_pos latent"]],
    latents: Sequence[int],
) -> RenderedHTML:
    """One circuitsvis ``text_neuron_activations`` view: each context (token labels) coloured by
    the activation of each of ``latents`` (picked in the view's drop-down). A page puts it through
    :mod:`.cv` (offline, the bundle inlined once)."""
    return text_neuron_activations(
        tokens=[list(c) for c in contexts],
        activations=[a.detach().float().cpu()[:, None, :] for a in activations],
        first_dimension_name="SAE",
        second_dimension_name="Latent",
        first_dimension_labels=["sae"],
        second_dimension_labels=[str(i) for i in latents],
    )
