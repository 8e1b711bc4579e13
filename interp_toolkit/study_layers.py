"""What ``reproduce`` measures beyond the heads: what each layer knows, and the MLP twins.

- **Probes** (every 1- and 2-layer model of a study): the previous token's identity on repeated
  random tokens (:data:`~.reports.layer_findings.PROBE_FEATURE` on
  :data:`~.reports.layer_findings.PROBE_DATA`), at every layer boundary, then again with the
  model's layer-0 previous-token role heads mean-ablated (:func:`measure_probe`).
- **MLP twins** (``reproduce --mlp``): for each of :data:`MLP_LAYERS` in the study, the same
  recipe on the GPT-2 block (:func:`~interp_toolkit.presets.with_mlp`), trained and analysed like
  every depth, plus every neuron of every layer on held-out text (:func:`measure_neurons`).
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_lens import TransformerBridge

from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.analysis.neurons import analyse_neurons
from interp_toolkit.analysis.probe_data import neuron_windows
from interp_toolkit.analysis.probes import probe
from interp_toolkit.analysis.run_analysis import RunSummary
from interp_toolkit.models import AttnOnlyConfig
from interp_toolkit.reports.layer_findings import (
    PROBE_DATA,
    PROBE_FEATURE,
    NeuronMeasurement,
    ProbeMeasurement,
)
from interp_toolkit.runs import Run
from interp_toolkit.tokenizer import Codec

#: The depths ``reproduce --mlp`` trains an MLP twin of (when the study has them).
MLP_LAYERS = (1, 2)
#: The depths the study probes.
PROBE_LAYERS = (1, 2)
MLP_SUFFIX = "-mlp"


def run_name(preset: str, n_layers: int, mlp: bool = False) -> str:
    """A study's run folder name: ``cpu-2l``, ``cpu-2l-mlp``."""
    return f"{preset}-{n_layers}l{MLP_SUFFIX if mlp else ''}"


def layer0_previous_token_heads(summary: RunSummary) -> list[HeadId]:
    """The layer-0 heads with the previous-token role (what the probe ablates)."""
    heads = (HeadId.parse(h) for h in summary.heads.get("previous-token", []))
    return sorted(h for h in heads if h.layer == 0)


def measure_probe(
    model: TransformerBridge,
    codec: Codec,
    name: str,
    ablate: Sequence[HeadId] = (),
    seed: int = 0,
    model_cfg: AttnOnlyConfig | None = None,
) -> ProbeMeasurement:
    """The previous-token probe at every boundary beside an untrained model of the same
    architecture (``model_cfg``: the run's), and again with the heads ``ablate`` (the model's
    layer-0 previous-token heads, :func:`layer0_previous_token_heads`) mean-ablated (against the
    same untrained numbers)."""
    result = probe(model, codec, PROBE_FEATURE, data=PROBE_DATA, seed=seed, model_cfg=model_cfg)
    ablated = None
    if ablate:
        heads = [(h.layer, h.head) for h in ablate]
        ablated = probe(
            model, codec, PROBE_FEATURE, data=PROBE_DATA, seed=seed, ablate=heads, untrained=result
        )
    mlp = not bool(getattr(model.cfg, "attn_only", False))
    return ProbeMeasurement(name, int(model.cfg.n_layers), mlp, result, ablated)


def measure_neurons(run: Run, seed: int = 0) -> NeuronMeasurement:
    """Every neuron of every MLP layer on the run's held-out text (the ``neurons`` defaults)."""
    tokens = neuron_windows(run.codec, run.model_cfg.n_ctx, run, seed=seed)
    layers = analyse_neurons(run.model, tokens, list(range(run.model_cfg.n_layers)), seed=seed)
    return NeuronMeasurement(run.name, tuple(layers))
