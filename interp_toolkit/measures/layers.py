"""The measurements of what each layer knows: the study's previous-token probe of one model
(:class:`ProbeMeasurement`, with the decodable rule :func:`is_decodable`) and the neurons and SAE
latents of one MLP model (:class:`NeuronMeasurement`, :class:`LatentCount`); their sentences are
:mod:`interp_toolkit.reports.layer_findings`'."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.probing.probes import ProbeResult, ProbeRow, beyond_untrained
from interp_toolkit.saes.evaluate import SAEEvals
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.units.neurons import LayerNeurons
from interp_toolkit.units.reading import RuleCount, rule_text

#: What the study probes: the previous token's identity on repeated random tokens, where it
#: cannot be guessed from the current token.
PROBE_FEATURE = "prev_token"
PROBE_DATA = "repeats"


def is_decodable(row: ProbeRow, t: Thresholds = THRESHOLDS) -> bool:
    """Decodable beyond an untrained model of the same architecture
    (:func:`~interp_toolkit.probing.probes.beyond_untrained` at ``t.decodable``): the only probe
    claim the study page makes."""
    return beyond_untrained(row, t.decodable)


@dataclass(frozen=True)
class ProbeMeasurement(Jsonable):
    """The study's probe on one model, and on the same model with heads ablated (if any)."""

    name: str
    n_layers: int
    mlp: bool
    result: ProbeResult = field(metadata=json_field(key="probe"))
    ablated: ProbeResult | None = None  # the layer-0 previous-token role heads mean-ablated


def headline_evals(evals: SAEEvals) -> dict[str, Any]:
    """L0, explained variance, CE loss recovered, dead latents and tokens, pooled and per row
    family (the study's SAE numbers; evals.json in the SAE folder has them all)."""

    def pick(e: SAEEvals) -> dict[str, Any]:
        kept = ("l0", "explained_variance", "ce_loss_score", "dead")
        return {**{k: getattr(e, k) for k in kept}, "tokens": e.total_tokens_eval}

    return {**pick(evals), "by_family": {k: pick(v) for k, v in evals.by_family.items()}}


@dataclass(frozen=True)
class LatentCount(Jsonable):
    """The monosemanticity rule on the latents of an SAE at one MLP layer (``blocks.L.mlp.
    hook_post``), on an SAE trained the same way on the untrained twin and under the shuffled
    control (the model's SAE, its top values on random positions); ``evals``: the model's SAE's
    metrics (evals.json's groups) on the held-out mix, with ``by_family`` (text, synthetic)."""

    layer: int
    model: RuleCount
    untrained: RuleCount | None
    d_sae: int
    tokens: int
    shuffled: RuleCount | None = None
    evals: SAEEvals | None = field(default=None, metadata=json_field(encode=headline_evals))

    json_order = ("layer", "d_sae", "tokens", "model", "untrained", "shuffled", "evals")


#: The monosemanticity rule, as the study page and neurons.json state it.
RULE_TEXT = rule_text("unit")


@dataclass(frozen=True)
class NeuronMeasurement(Jsonable):
    """The neurons of every MLP layer of one model (each statistic beside the untrained twin's
    and the shuffled control's), and the SAE latents of those layers, when measured."""

    name: str
    layers: tuple[LayerNeurons, ...] = field(
        metadata=json_field(encode=lambda ls: [replace(i.summary(), k=i.k) for i in ls])
    )
    latents: tuple[LatentCount, ...] = ()

    rule = RULE_TEXT
    json_extra = ("rule",)
    json_order = ("name", "rule", "layers", "latents")
