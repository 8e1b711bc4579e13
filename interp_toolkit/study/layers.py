"""What ``reproduce`` measures beyond the heads: what each layer knows, and the MLP twins.

- **Probes** (every 1- and 2-layer model of a study): the previous token's identity on repeated
  random tokens (:data:`~.reports.layer_findings.PROBE_FEATURE` on
  :data:`~.reports.layer_findings.PROBE_DATA`), at every layer boundary, then again with the
  model's layer-0 previous-token role heads mean-ablated (:func:`measure_probe`).
- **MLP twins** (``reproduce --mlp``): for each of :data:`MLP_LAYERS` in the study, the same
  recipe on the GPT-2 block (:func:`~interp_toolkit.training.presets.with_mlp`), trained and analysed like
  every depth, plus every neuron of every layer on held-out text, each statistic beside the
  untrained twin's and a shuffled-activation control's, and the latents of an SAE on every MLP
  layer read by the same monosemanticity rule (:func:`measure_neurons`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.heads.registry import HeadId
from interp_toolkit.measures.layers import (
    PROBE_DATA,
    PROBE_FEATURE,
    LatentCount,
    NeuronMeasurement,
    ProbeMeasurement,
)
from interp_toolkit.measures.run import RunSummary
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.probing.data import neuron_windows
from interp_toolkit.probing.probes import probe
from interp_toolkit.runs.folder import Run
from interp_toolkit.saes.activations import TokenSource
from interp_toolkit.saes.config import SAEPaths, SAETrainConfig
from interp_toolkit.saes.evaluate import evaluate_sae
from interp_toolkit.saes.features import top_latent_activations
from interp_toolkit.saes.pipeline import EVAL_TOKENS, sae_config, sae_name, training_source
from interp_toolkit.saes.sae import SparseAutoencoder, load_sae
from interp_toolkit.saes.train import train_sae
from interp_toolkit.text.codecs import Codec
from interp_toolkit.units.neurons import analyse_neurons, untrained_twin
from interp_toolkit.units.reading import ContextFacts, RuleCount, random_top, unit_concepts

#: The depths ``reproduce --mlp`` trains an MLP twin of (when the study has them).
MLP_LAYERS = (1, 2)
#: The depths the study probes.
PROBE_LAYERS = (1, 2)


def run_name(preset: str, n_layers: int, mlp: bool = False) -> str:
    """A study's run folder name: ``cpu-2l``, ``cpu-2l-mlp``."""
    return f"{preset}-{n_layers}l{'-mlp' if mlp else ''}"


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
    model_cfg: ModelConfig | None = None,
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


#: The SAEs read against the MLP twins' neurons: TopK, EXPANSION latents per neuron, K active,
#: trained on SAE_TOKENS activations of the run's own training mix.
SAE_EXPANSION, SAE_K, SAE_TOKENS = 2, 32, 200_000


def measure_neurons(run: Run, seed: int = 0, *, sae_tokens: int = SAE_TOKENS) -> NeuronMeasurement:
    """Every neuron of every MLP layer on the run's held-out text (the ``neurons`` defaults),
    each statistic beside the untrained twin's and the shuffled control's; then the latents of an
    SAE on each MLP layer (and of one trained the same way on the untrained twin), read by the
    same rule on the same rows (:func:`measure_latents`), each SAE on ``sae_tokens`` activations
    or as many as the run was trained on, if fewer (none below one block)."""
    tokens = neuron_windows(run.codec, run.model_cfg.n_ctx, run, seed=seed)
    twin = untrained_twin(run.model, run.model_cfg)
    layers = list(range(run.model_cfg.n_layers))
    neurons = analyse_neurons(run.model, tokens, layers, seed=seed, untrained=twin)
    latents = ()
    train = run.settings.get("train", {})  # the tokens it was trained on: steps x batch x context
    trained = int(train.get("steps", 0)) * int(train.get("batch_size", 0)) * run.model_cfg.n_ctx
    n = min(sae_tokens, trained)
    if n >= SAETrainConfig().batch * SAETrainConfig().batches_per_block:
        latents = tuple(measure_latents(run, twin, la, tokens, seed, n) for la in layers)
    return NeuronMeasurement(run.name, tuple(neurons), latents)


def measure_latents(
    run: Run, twin: TransformerBridge, layer: int, tokens: torch.Tensor, seed: int, n_tokens: int
) -> LatentCount:
    """The monosemanticity rule on the latents of a TopK SAE at ``blocks.L.mlp.hook_post`` of the
    run (kept in ``RUN/saes/``, reused when there), under the shuffled-activation control, and on
    an SAE trained the same way on the untrained twin, on ``tokens``; and the run's SAE's metrics
    on the held-out mix, pooled and per row family (text, synthetic)."""
    hook = f"blocks.{layer}.mlp.hook_post"
    name = sae_name(hook, "topk", SAE_EXPANSION, SAE_K)
    facts = ContextFacts.of(tokens)
    counts, shuffled, metrics = [], None, None
    for model, folder in (
        (run.model, run.paths.saes / name),
        (twin, run.paths.saes / "untrained-twin" / name),
    ):
        sae, source = _trained_sae(run, model, hook, folder, seed, n_tokens)
        top, density = top_latent_activations(model, sae, tokens)
        counts.append(RuleCount.of(unit_concepts(facts, top, alive=density > 0)))
        if shuffled is None:
            control = random_top(top, *tokens.shape, seed=seed)
            shuffled = RuleCount.of(unit_concepts(facts, control, alive=density > 0))
            rows = max(16, EVAL_TOKENS // source.seq_len)
            heldout = source.heldout_rows(rows)
            families = source.heldout_families(rows)
            metrics = evaluate_sae(model, sae, heldout, families=families).evals()
    d_sae = int(run.model_cfg.mlp_width) * SAE_EXPANSION
    return LatentCount(layer, counts[0], counts[1], d_sae, n_tokens, shuffled, metrics)


def _trained_sae(
    run: Run, model: TransformerBridge, hook: str, folder: Path, seed: int, n_tokens: int
) -> tuple[SparseAutoencoder, TokenSource]:
    tcfg = SAETrainConfig(tokens=n_tokens, seed=seed)
    source = training_source(run.codec, run.model_cfg.n_ctx, run, tcfg, seed)
    if SAEPaths(folder).cfg.is_file():
        return load_sae(folder), source
    cfg = sae_config(
        model,
        hook,
        arch="topk",
        expansion=SAE_EXPANSION,
        k=SAE_K,
        model_name=run.name,
        source=source,
    )
    resume = SAEPaths(folder).state.is_file()
    sae = train_sae(model, source, cfg, tcfg, folder, resume=resume, progress=False).sae
    return sae, source
