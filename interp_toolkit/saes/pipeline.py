"""One SAE from a model, start to end: train (or resume) at a hook, evaluate, read every latent,
and write the SAE folder's data files (:func:`run_sae`). Pages are written by
:func:`interp_toolkit.reports.features.write_pages`; ``interp-toolkit sae`` and
:func:`interp_toolkit.api.sae` do both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import write_bytes, write_json
from interp_toolkit.models.activations import MAX_SEQ
from interp_toolkit.runtime import validate
from interp_toolkit.saes.activations import (
    TokenSource,
    check_hook,
    hook_width,
    token_source,
)
from interp_toolkit.saes.architectures import sae_architecture
from interp_toolkit.saes.config import SAEConfig, SAEPaths, SAETrainConfig, check_shape
from interp_toolkit.saes.evaluate import SAEMetrics, evaluate_sae
from interp_toolkit.saes.features import LatentFeatures, labeller, latent_features
from interp_toolkit.saes.options import SAEOptions
from interp_toolkit.saes.sae import SparseAutoencoder
from interp_toolkit.saes.train import TrainedSAE, train_sae
from interp_toolkit.text.codecs import Codec

#: Held-out tokens read by the evaluation (three forward passes each) and by the feature data
#: (one pass; more, so that a latent for one token or one previous token fills its top 20).
EVAL_TOKENS, FEATURE_TOKENS = 16_384, 65_536


@dataclass
class SAEResult:
    """A trained SAE with its metrics and per-latent data, and what it was measured on."""

    sae: SparseAutoencoder
    paths: SAEPaths
    trained: TrainedSAE
    metrics: SAEMetrics
    features: LatentFeatures
    heldout: Tensor
    source: TokenSource


def default_folder(
    target_source: object, hook: str, arch: str, expansion: int, k: int, step: int | None = None
) -> Path:
    """``RUN/saes/<hook>-<arch>-x<expansion>[-k<k>][-step<N>]`` for a run folder (``-k``: an
    architecture sized by ``k``; ``step``: the model is the run's weights kept at that step,
    ``RUN@N``, never the final model's SAE)."""
    from interp_toolkit.runs.folder import Run

    if not isinstance(target_source, Run):
        raise UserError("an SAE of this model needs a folder to live in: give --out FOLDER.")
    return target_source.paths.saes / sae_name(hook, arch, expansion, k, step)


def sae_name(hook: str, arch: str, expansion: int, k: int, step: int | None = None) -> str:
    """An SAE's folder name in ``RUN/saes/``: ``<hook>-<arch>-x<expansion>[-k<k>][-step<N>]``."""
    name = f"{hook}-{arch}-x{expansion}" + (f"-k{k}" if sae_architecture(arch).uses_k else "")
    return name + (f"-step{step}" if step is not None else "")


def training_source(
    codec: Codec, n_ctx: int, target_source: object, train: SAETrainConfig, seed: int
) -> TokenSource:
    """The token rows an SAE trains on (and its held-out rows): blocks of ``train``'s size, rows of
    at most :data:`MAX_SEQ` tokens."""
    rows = -(-train.batch * train.batches_per_block // min(n_ctx, MAX_SEQ))
    return token_source(codec, n_ctx, target_source, rows_per_block=rows, seed=seed)


def sae_config(
    model: TransformerBridge,
    hook: str,
    *,
    arch: str,
    expansion: int,
    k: int,
    model_name: str,
    source: TokenSource,
) -> SAEConfig:
    check_hook(model, hook)
    check_shape(arch, k, expansion)
    d_in = hook_width(model, hook)
    return SAEConfig(
        d_in=d_in,
        d_sae=d_in * expansion,
        arch=arch,
        k=k if sae_architecture(arch).uses_k else 0,
        hook_name=hook,
        model_name=model_name,
        context_size=source.seq_len,
        dataset_path=source.corpus,
    )


def run_sae(
    model: TransformerBridge,
    codec: Codec,
    target_source: object,
    out: str | Path,
    options: SAEOptions,
    *,
    model_name: str = "",
) -> SAEResult:
    """Train (``options.resume``: continue) the SAE of ``options`` into ``out``, then evaluate it
    and read its latents on held-out rows; writes cfg.json, sae_weights.safetensors, evals.json
    and sparsity.safetensors (SAELens's names)."""
    o, hook = options, options.hook
    expansion, k = validate.count(o.expansion, "expansion"), validate.count(o.k, "k")
    tokens, seed = validate.count(o.tokens, "tokens"), validate.seed(o.seed)
    check_hook(model, hook)
    check_shape(o.arch, k, expansion)
    latents = expansion * hook_width(model, hook)
    if sae_architecture(o.arch).uses_k and k > latents:
        raise UserError(
            f"--k {k} cannot work: this SAE has {latents} latents ({expansion} x {hook}'s "
            f"width {latents // expansion}); use --k 1 to {latents}, or a larger --expansion."
        )
    progress = not o.quiet
    tcfg = SAETrainConfig(tokens=tokens, seed=seed)
    source = training_source(codec, int(model.cfg.n_ctx), target_source, tcfg, seed)
    cfg = sae_config(
        model, hook, arch=o.arch, expansion=expansion, k=k, model_name=model_name, source=source
    )
    trained = train_sae(model, source, cfg, tcfg, out, resume=o.resume, progress=progress)
    sae = trained.sae.to(next(model.parameters()).device)
    heldout = source.heldout_rows(max(16, FEATURE_TOKENS // source.seq_len))
    n_eval = max(16, EVAL_TOKENS // source.seq_len)
    families = source.heldout_families(n_eval)
    metrics = evaluate_sae(model, sae, heldout[:n_eval], families=families, progress=progress)
    feats = latent_features(model, sae, heldout, labeller(codec), seed=seed)
    paths = trained.paths or SAEPaths(Path(out))
    write_json(paths.evals, metrics.evals().to_dict())
    write_bytes(paths.sparsity, _sparsity(metrics))
    return SAEResult(sae, paths, trained, metrics, feats, heldout, source)


def _sparsity(metrics: SAEMetrics) -> bytes:
    """SAELens's sparsity.safetensors: ``sparsity`` = log10(feature density + 1e-10)."""
    from safetensors.torch import save

    return save({"sparsity": torch.log10(metrics.feature_density.float() + 1e-10).contiguous()})
