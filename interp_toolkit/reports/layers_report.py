"""The study page's sections on what each layer knows (probe curves) and on the MLP twins
(each beside its attention-only twin; their neurons and SAE latents against baselines). Measurements in,
sections out; every sentence comes from :mod:`interp_toolkit.reports.layer_findings`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.layers import RULE_TEXT, NeuronMeasurement, ProbeMeasurement
from interp_toolkit.reports.layer_findings import mlp_findings, probe_sentence
from interp_toolkit.reports.study_report import depth_section
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.units.reading import RuleCount
from interp_toolkit.views.neurons import baseline_chart, baseline_table
from interp_toolkit.views.page import Section, table, text
from interp_toolkit.views.probes import probe_section


def _of(c: RuleCount) -> str:
    return f"{c.monosemantic} of {c.live}"


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
    section), then its neurons and SAE latents against their baselines. ``block``: what the MLP models
    add to every block (:func:`~.layer_findings.block_phrase`)."""
    depths = [d for mlp, twin in pairs for d in (twin, mlp) if d is not None]
    own = {mlp.name: curves[mlp.name] for mlp, _ in pairs if mlp.name in curves}
    compare = depth_section(depths, curves=own, t=t)
    neuron_items = _neuron_items(neurons)
    return Section(
        "Models with MLPs",
        [_findings(mlp_findings(pairs, neurons, t)), *compare.items, *neuron_items],
        intro="Each MLP model is its attention-only twin (same data, seed, optimiser and stopping "
        f"rule) with {block} in every block. " + compare.intro,
    )


def _neuron_items(neurons: Sequence[NeuronMeasurement]) -> list[Any]:
    """The MLP twins' neurons beside their baselines, and neurons against SAE latents."""
    layers = [info for n in neurons for info in n.layers]
    names = [f"{n.name} layer {info.layer}" for n in neurons for info in n.layers]
    if not layers:
        return []
    k = int(layers[0].top.values.shape[1])
    items: list[Any] = [baseline_chart(layers, names), baseline_table(layers, names)]
    rows = []
    for n in neurons:
        by_layer = {info.layer: info for info in n.layers}
        for c in n.latents:
            info = by_layer[c.layer]
            twin = info.stats.get("untrained")
            counts = [info.model.rule, twin and twin.rule, c.model, c.untrained]
            rows.append([f"{n.name} layer {c.layer}", *(_of(x) if x else "—" for x in counts)])
    if rows:
        header = ["layer", "neurons", "neurons, untrained twin", "SAE latents"]
        items.append(table([*header, "SAE latents, untrained twin"], rows))
    items.append(
        text(
            f"Monosemantic: {RULE_TEXT} (top {k} positions). Each statistic is read on the model, "
            "on its untrained twin (same config and seed, before training) and with each "
            "neuron's activations shuffled over the positions. The old polysemanticity count "
            "(unrelated token groups) is withdrawn (docs/dictionaries.md); its figures stay in "
            "the table beside their baselines.",
            "p",
            "note",
        )
    )
    return items
