"""Neurons of one MLP layer, model in, page out (every statistic beside its untrained twin's and
a shuffled-activation control's): which are shown (:func:`shown_neurons`) and the offline page of
``interp-toolkit neurons`` (:func:`neuron_page`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge

from interp_toolkit.measures.layers import RULE_TEXT
from interp_toolkit.reports.layer_findings import neuron_sentence
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.labels import token_labels
from interp_toolkit.units.neurons import LayerNeurons, neuron_activations
from interp_toolkit.units.reading import TopActivations
from interp_toolkit.views.neurons import baseline_chart, baseline_table, context_view, neuron_table
from interp_toolkit.views.page import Section, render_report, text

#: Tokens shown before and after the top position in a context.
BEFORE, AFTER = 12, 3


def context_windows(
    codec: Codec,
    tokens: Int[torch.Tensor, "row pos"],
    top: TopActivations,
    units: Sequence[int],
    contexts: int,
    activations: Callable[[list[int]], torch.Tensor],
) -> tuple[list[list[str]], list[torch.Tensor]]:
    """The window (:data:`BEFORE` tokens before it, :data:`AFTER` after) of each of the top
    ``contexts`` (row, position)s of every unit in ``units``, as token labels, and the units'
    activations there (``activations(rows)``: theirs on those rows of ``tokens``)."""
    top_rows, top_at = top.rows[:, :contexts].tolist(), top.positions[:, :contexts].tolist()
    picks = sorted({(r, p) for u in units for r, p in zip(top_rows[u], top_at[u], strict=True)})
    rows = sorted({r for r, _ in picks})
    acts = activations(rows) if rows else None
    at = {r: i for i, r in enumerate(rows)}
    ctx_tokens, ctx_acts = [], []
    for r, p in picks:
        lo, hi = max(0, p - BEFORE), min(tokens.shape[1], p + AFTER + 1)
        ctx_tokens.append(token_labels(codec, tokens[r, lo:hi]))
        ctx_acts.append(acts[at[r], lo:hi])
    return ctx_tokens, ctx_acts


def neuron_labels(codec: Codec, info: LayerNeurons) -> dict[int, str]:
    """Visible labels (spaces as ·) of every token the layer's neurons name: their top tokens,
    promoted tokens and token concepts."""
    ids = info.top_tokens.reshape(-1).tolist() + info.promoted.reshape(-1).tolist()
    uniq = sorted(set(ids + [c.value for c in info.model.concepts if c.value >= 0]))
    return dict(zip(uniq, token_labels(codec, uniq), strict=True))


def shown_neurons(info: LayerNeurons, neurons: Sequence[int] | None, show: int) -> list[int]:
    """The given neurons, else the ``show`` with the highest top activation."""
    if neurons:
        return list(neurons)
    return info.top.values[:, 0].argsort(descending=True)[:show].tolist()


def neuron_page(
    model: TransformerBridge,
    codec: Codec,
    tokens: Int[torch.Tensor, "n pos"],
    info: LayerNeurons,
    neurons: Sequence[int],
    labels: Mapping[int, str],
    *,
    title: str,
    name: str = "",
    contexts: int = 4,
) -> str:
    """An offline page: the table of ``neurons`` (token ids shown as ``labels``,
    :func:`neuron_labels`) and a circuitsvis view of each one's top ``contexts`` contexts,
    coloured by every shown neuron's activation."""

    def acts(rows: list[int]) -> torch.Tensor:
        return neuron_activations(model, tokens[rows], info.layer, neurons)

    ctx_tokens, ctx_acts = context_windows(codec, tokens, info.top, neurons, contexts, acts)
    view = context_view(ctx_tokens, ctx_acts, layer=info.layer, neurons=neurons)
    names = [f"layer {info.layer}"]
    return render_report(
        [
            Section(
                "Neurons against their baselines",
                [
                    text(neuron_sentence(name or "this model", info), "p", "finding"),
                    baseline_chart([info], names),
                    baseline_table([info], names),
                    text(f"Monosemantic: {RULE_TEXT}.", "p", "note"),
                ],
            ),
            Section("Neurons", [neuron_table(info, labels, neurons)]),
            Section(
                "Top contexts",
                [view],
                intro="The top contexts of every neuron shown, coloured by the activation of the "
                "neuron picked in the drop-down.",
            ),
        ],
        title=title,
    )
