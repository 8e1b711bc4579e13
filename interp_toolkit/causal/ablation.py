"""Per-head ablations on ``hook_z``: impact across positions, and head scores with heads ablated.

Whole-head ablation hits a head's query, key and value readers at once; which input carries an
induction head's induction is measured by path (:mod:`interp_toolkit.causal.paths`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge
from transformer_lens.hook_points import HookPoint

from interp_toolkit.errors import UserError
from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.heads.scorer import HeadScores, head_scores
from interp_toolkit.runtime import validate

ABLATION_MODES = ("zero", "mean")


def z_hook_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def _check_mode(mode: str) -> None:
    if mode not in ABLATION_MODES:
        raise UserError(f"ablation mode {mode!r} is unknown: use zero or mean.")


def mean_z(
    model: TransformerBridge, tokens: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, "layer head d_head"]:
    """Each head's ``hook_z`` averaged over batch and positions (for mean ablation)."""
    device = next(model.parameters()).device
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens.to(device), names_filter=lambda n: n.endswith("attn.hook_z")
        )
    return torch.stack(
        [cache[z_hook_name(layer)].float().mean((0, 1)) for layer in range(int(model.cfg.n_layers))]
    )


def ablation_hooks(
    heads: Sequence[tuple[int, int]],
    *,
    mode: str = "zero",
    means: Float[torch.Tensor, "layer head d_head"] | None = None,
) -> list[tuple[str, Callable[..., Any]]]:
    """Forward hooks that zero- or mean-ablate each (layer, head) on ``hook_z``."""
    _check_mode(mode)
    if mode == "mean" and means is None:
        raise ValueError("mean ablation needs means (see mean_z)")
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))
    hooks = []
    for layer, hs in by_layer.items():

        def hook(
            z: torch.Tensor, hook: HookPoint, layer: int = layer, hs: list[int] = hs
        ) -> torch.Tensor:
            z = z.clone()
            for h in hs:
                if mode == "zero":
                    z[:, :, h, :] = 0.0
                else:
                    z[:, :, h, :] = means[layer, h].to(z.dtype).to(z.device)
            return z

        hooks.append((z_hook_name(layer), hook))
    return hooks


def _next_token_logprobs(
    model: TransformerBridge, tokens: Int[torch.Tensor, "batch pos"]
) -> Float[torch.Tensor, "batch pos_minus_1"]:
    logits = model(tokens)
    logp = logits[:, :-1].float().log_softmax(-1)
    return logp.gather(-1, tokens[:, 1:, None])[..., 0]


def head_impact(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    mode: str = "zero",
) -> Float[torch.Tensor, "layer head pos_minus_1"]:
    """Drop in log-prob of the correct next token when one head is ablated on ``hook_z``.

    ``out[l, h, p] = mean_b( logp_clean[b, p] - logp_ablated[b, p] )`` where ``logp[b, p]`` is the
    log-prob the model gives ``tokens[b, p+1]`` at position ``p``; positive means the head helped.
    ``mode="mean"`` replaces the head's z by its mean over batch and positions (on ``tokens``).
    One forward pass per head.
    """
    _check_mode(mode)
    cfg = model.cfg
    tokens = validate.token_ids(tokens, d_vocab=int(cfg.d_vocab), n_ctx=int(cfg.n_ctx), batch=True)
    if tokens.shape[1] < 2:
        raise UserError("head_impact needs token sequences of at least 2 positions.")
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    means = mean_z(model, tokens) if mode == "mean" else None
    out = torch.zeros(n_layers, n_heads, tokens.shape[1] - 1)
    with torch.no_grad():
        clean = _next_token_logprobs(model, tokens)
        for layer in range(n_layers):
            for head in range(n_heads):
                hooks = ablation_hooks([(layer, head)], mode=mode, means=means)
                with model.hooks(fwd_hooks=hooks):
                    ablated = _next_token_logprobs(model, tokens)
                out[layer, head] = (clean - ablated).mean(0).cpu()
    return out


def induction_after_ablation(
    model: TransformerBridge,
    batch: RepeatedTokens,
    ablate: Sequence[tuple[int, int]],
    *,
    mode: str = "zero",
    batch_size: int | None = None,
) -> HeadScores:
    """All head scores on ``batch`` with the heads in ``ablate`` ablated on ``hook_z``.

    The causal check: ablating a layer-0 previous-token head should lower the induction score of
    the layer-1 induction head it feeds (K-composition)."""
    _check_mode(mode)
    ablate = validate.heads(ablate, int(model.cfg.n_layers), int(model.cfg.n_heads))
    cfg = model.cfg
    validate.token_ids(
        batch.tokens, d_vocab=int(cfg.d_vocab), n_ctx=int(cfg.n_ctx), batch=True, name="batch"
    )
    means = mean_z(model, batch.tokens) if mode == "mean" else None
    hooks = ablation_hooks(ablate, mode=mode, means=means)
    return head_scores(model, batch, fwd_hooks=hooks, batch_size=batch_size)
