"""The study page's sections on what each layer knows (probe curves) and on the MLP twins
(each beside its attention-only twin, and how polysemantic their neurons are). Measurements in,
sections out; every sentence comes from :mod:`interp_toolkit.reports.layer_findings`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from interp_toolkit.analysis.neurons import SIM_QUANTILE
from interp_toolkit.analysis.routes import THRESHOLDS, Thresholds
from interp_toolkit.reports.findings import DepthMeasurement
from interp_toolkit.reports.layer_findings import (
    NeuronMeasurement,
    ProbeMeasurement,
    groups_histogram,
    mlp_findings,
    probe_sentence,
)
from interp_toolkit.reports.study_report import depth_section
from interp_toolkit.views.neurons import polysemanticity_histogram
from interp_toolkit.views.page import Section, table, text
from interp_toolkit.views.probes import probe_section

#: The neuron table's columns: dead, 1, 2, ..., GROUP_COLUMNS - 1 groups, then GROUP_COLUMNS+.
GROUP_COLUMNS = 4


def _findings(lines: Sequence[str]) -> str:
    return "".join(text(x, "p", "finding") for x in lines)


def probes_section(probes: Sequence[ProbeMeasurement], t: Thresholds = THRESHOLDS) -> Section:
    """The previous-token probe of every probed model (and with its heads ablated): sentences,
    the curves on one plot, and each result's table."""
    results, names = [], []
    for m in probes:
        results.append(m.result)
        names.append(m.name)
        if m.ablated is not None:
            results.append(m.ablated)
            names.append(f"{m.name}, {', '.join(m.ablated.ablated)} ablated")
    inner = probe_section(results, names)
    return Section(
        "What each layer knows: linear probes",
        [_findings([probe_sentence(m, t) for m in probes]), *inner.items],
        intro=inner.intro
        + " A feature is decodable at a boundary when the lower end of its balanced accuracy's"
        f" 95% interval is at least chance + {t.decodable:g} × (1 − chance), and the page claims"
        " it only beyond the untrained model: above that model's upper bound.",
    )


def mlp_section(
    pairs: Sequence[tuple[DepthMeasurement, DepthMeasurement | None]],
    neurons: Sequence[NeuronMeasurement],
    *,
    curves: Mapping[str, Sequence[dict[str, Any]]],
    block: str,
    t: Thresholds = THRESHOLDS,
) -> Section:
    """Each MLP model beside its attention-only twin (``pairs``: (MLP, twin or None)), with the
    MLP models' curves (``curves``: run name -> metrics.jsonl rows; the twins' are in the depths
    section), then the spread of its neurons' polysemanticity. ``block``: what the MLP models
    add to every block (:func:`~.layer_findings.block_phrase`)."""
    depths = [d for mlp, twin in pairs for d in (twin, mlp) if d is not None]
    own = {mlp.name: curves[mlp.name] for mlp, _ in pairs if mlp.name in curves}
    compare = depth_section(depths, curves=own, t=t)
    layers = [info for n in neurons for info in n.layers]
    names = [f"{n.name} layer {info.layer}" for n in neurons for info in n.layers]
    rows = []
    for name, info in zip(names, layers, strict=True):
        hist = groups_histogram(info) + [0] * GROUP_COLUMNS
        counts = [*hist[:GROUP_COLUMNS], sum(hist[GROUP_COLUMNS:])]
        mean = info.summary()["mean_groups"]
        rows.append([name, info.n_neurons, *counts, mean, round(info.sim_threshold, 3)])
    groups = [f"{g} group{'s' if g > 1 else ''}" for g in range(1, GROUP_COLUMNS)]
    header = ["layer", "neurons", "dead", *groups, f"{GROUP_COLUMNS}+ groups"]
    neuron_items: list = []
    if layers:
        k = int(layers[0].top.values.shape[1])
        neuron_items = [
            polysemanticity_histogram(layers, names),
            table([*header, "mean groups (live)", "related if cosine ≥"], rows),
            text(
                f"Polysemanticity: the number of unrelated token groups among the tokens at a "
                f"neuron's top {k} positions on held-out text (each position weighs its "
                "activation, clipped at 0); token types are related when the cosine of their "
                f"centred embeddings is at least the {100 * SIM_QUANTILE:g}th percentile of random "
                f"pairs' (the last column), grouped by single linkage; groups with ≥ "
                f"{layers[0].min_share:.0%} of the weight count; 0 = dead.",
                "p",
                "note",
            ),
        ]
    return Section(
        "Models with MLPs",
        [_findings(mlp_findings(pairs, neurons, t)), *compare.items, *neuron_items],
        intro="Each MLP model is its attention-only twin (same data, seed, optimiser and stopping "
        f"rule) with {block} in every block. " + compare.intro,
    )
