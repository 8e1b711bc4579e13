"""Neurons of one MLP layer, model in, data and page out (every statistic beside its untrained
twin's and a shuffled-activation control's): :func:`neuron_report` (what
``interp-toolkit neurons`` prints and writes) and :func:`neuron_page` (its offline HTML view)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge

from interp_toolkit.measures.layers import RULE_TEXT
from interp_toolkit.reports.layer_findings import neuron_sentence
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.labels import token_labels
from interp_toolkit.units.neurons import LayerNeurons, neuron_activations
from interp_toolkit.views.neurons import baseline_chart, baseline_table, context_view, neuron_table
from interp_toolkit.views.page import Section, render_report, text

#: Tokens shown before and after the top position in a context.
BEFORE, AFTER = 12, 3


def context_windows(
    codec: Codec,
    tokens: Int[torch.Tensor, "row pos"],
    picks: Sequence[tuple[int, int]],
    rows: Sequence[int],
    acts: torch.Tensor,
) -> tuple[list[list[str]], list[torch.Tensor]]:
    """Each picked (row, position)'s window (:data:`BEFORE` tokens before it, :data:`AFTER`
    after) as token labels, and the units' activations there; ``acts[i]`` holds ``rows[i]``'s."""
    at = {r: i for i, r in enumerate(rows)}
    ctx_tokens, ctx_acts = [], []
    for r, p in picks:
        lo, hi = max(0, p - BEFORE), min(tokens.shape[1], p + AFTER + 1)
        ctx_tokens.append(token_labels(codec, tokens[r, lo:hi]))
        ctx_acts.append(acts[at[r], lo:hi])
    return ctx_tokens, ctx_acts


def labels_for(codec: Codec, ids: Sequence[int]) -> dict[int, str]:
    """Visible labels (spaces as ·) of the given token ids."""
    uniq = sorted(set(int(i) for i in ids))
    return dict(zip(uniq, token_labels(codec, uniq), strict=True))


def neuron_report(info: LayerNeurons, codec: Codec) -> dict[str, Any]:
    """JSON-safe: the layer's statistics three ways (model, untrained twin, shuffled control),
    the definitions, and every neuron's concept, top contexts (row, position, activation, token)
    and promoted tokens (with logit)."""
    ids = info.top_tokens.reshape(-1).tolist() + info.promoted.reshape(-1).tolist()
    ids += [c.value for c in info.model.concepts if c.value >= 0]
    label = labels_for(codec, ids)
    neurons = []
    for n in range(info.n_neurons):
        top = zip(
            info.top.rows[n].tolist(),
            info.top.positions[n].tolist(),
            info.top.values[n].tolist(),
            info.top_tokens[n].tolist(),
            strict=True,
        )
        concept = info.model.concepts[n].to_dict()
        if concept["concept"] in ("token", "previous") and int(concept["value"]) >= 0:
            concept["value"] = label[int(concept["value"])]
        neurons.append(
            {
                "neuron": n,
                "max_activation": round(float(info.top.values[n, 0]), 4),
                **concept,
                "top": [
                    {"row": r, "pos": p, "activation": round(v, 4), "token": label[t]}
                    for r, p, v, t in top
                ],
                "promoted": [
                    {"token": label[int(t)], "logit": round(float(v), 4)}
                    for t, v in zip(info.promoted[n].tolist(), info.promoted_logits[n], strict=True)
                ],
            }
        )
    return {
        "summary": info.summary(),
        "definition": {
            "monosemantic": RULE_TEXT,
            "readings": "model: the model; untrained: its untrained twin (same config and seed, "
            "before training) on the same rows; shuffled: each neuron's activations permuted "
            "over the positions (its top values on random positions)",
            "token_groups": "withdrawn polysemanticity count: unrelated token groups among the "
            "top-k tokens (related: centred-embedding cosine >= sim_threshold, the 99th "
            "percentile over random pairs); the untrained twin scores higher than trained models",
            "promoted": "top entries of W_out[n] @ W_U, LayerNorm folded (final LN scale ignored)",
            "k": int(info.top.values.shape[1]),
        },
        "neurons": neurons,
    }


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
    *,
    title: str,
    name: str = "",
    contexts: int = 4,
) -> str:
    """An offline page: the table of ``neurons`` and a circuitsvis view of each one's top
    ``contexts`` contexts, coloured by every shown neuron's activation."""
    picks = sorted({(int(r), int(p)) for n in neurons for r, p in _tops(info, n, contexts)})
    rows = sorted({r for r, _ in picks})
    acts = neuron_activations(model, tokens[rows], info.layer, neurons)
    ctx_tokens, ctx_acts = context_windows(codec, tokens, picks, rows, acts)
    ids = (
        info.top_tokens[neurons].reshape(-1).tolist() + info.promoted[neurons].reshape(-1).tolist()
    )
    ids += [info.model.concepts[n].value for n in neurons if info.model.concepts[n].value >= 0]
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
            Section("Neurons", [neuron_table(info, labels_for(codec, ids), neurons)]),
            Section(
                "Top contexts",
                [view],
                intro="The top contexts of every neuron shown, coloured by the activation of the "
                "neuron picked in the drop-down.",
            ),
        ],
        title=title,
    )


def _tops(info: LayerNeurons, neuron: int, n: int) -> list[tuple[int, int]]:
    return list(
        zip(
            info.top.rows[neuron, :n].tolist(), info.top.positions[neuron, :n].tolist(), strict=True
        )
    )
