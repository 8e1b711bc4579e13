"""Attention patterns of a model on one sequence: the data attention views and heatmaps draw.

Only the needed ``blocks.L.attn.hook_pattern`` hooks are cached, and the pass stops after the
last layer asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec

HeadSpec = Sequence[int] | Sequence[tuple[int, int]] | None


def prompt_tokens(
    codec: Codec | None,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    n_ctx: int,
    prepend_bos: bool = True,
) -> Int[Tensor, " pos"]:
    """Model ids of a prompt. Text is encoded (with BOS first unless ``prepend_bos=False``);
    token ids are taken as given. Raises UserError if empty or longer than ``n_ctx``."""
    if isinstance(text_or_tokens, str):
        if codec is None:
            raise UserError("text prompts need the model's vocabulary: pass codec=…")
        ids = list(codec.encode(text_or_tokens))
        if prepend_bos:
            ids = [int(codec.bos_id), *ids]
    elif isinstance(text_or_tokens, Tensor):
        ids = text_or_tokens.reshape(-1).tolist()
    else:
        ids = [int(t) for t in text_or_tokens]
    if not ids:
        raise UserError("the prompt is empty: give at least one token of text.")
    if len(ids) > n_ctx:
        raise UserError(
            f"the prompt is {len(ids)} tokens but the model's context is {n_ctx}: "
            f"shorten it to at most {n_ctx} tokens."
        )
    return torch.tensor(ids, dtype=torch.long)


def attention_patterns(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], layers: Sequence[int]
) -> dict[int, Float[Tensor, "head dest src"]]:
    """Attention patterns ``[head, dest, src]`` of the given layers on one sequence."""
    wanted = {f"blocks.{int(layer)}.attn.hook_pattern": int(layer) for layer in layers}
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens.reshape(1, -1).to(next(model.parameters()).device),
            names_filter=lambda name: name in wanted,
            stop_at_layer=max(wanted.values()) + 1,
        )
    return {layer: cache[name][0].detach().float().cpu() for name, layer in wanted.items()}


def head_patterns(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], heads: Sequence[tuple[int, int]]
) -> Float[Tensor, "n_heads dest src"]:
    """The attention patterns ``[dest, src]`` of ``heads`` on one sequence, in that order."""
    by_layer = attention_patterns(model, tokens, sorted({layer for layer, _ in heads}))
    return torch.stack([by_layer[layer][head] for layer, head in heads])


def heads_by_layer(
    n_layers: int, n_heads: int, layer: int | None, heads: HeadSpec
) -> dict[int, list[int]]:
    """Which heads of which layers to show. ``heads`` is a list of head indices (within ``layer``,
    or within every layer) or a list of ``(layer, head)`` pairs; None means every head."""
    if layer is not None and not 0 <= layer < n_layers:
        raise UserError(f"layer {layer} does not exist: the model has layers 0..{n_layers - 1}.")
    layers = [layer] if layer is not None else list(range(n_layers))
    if heads is None:
        return {ly: list(range(n_heads)) for ly in layers}
    heads = list(heads)
    if heads and isinstance(heads[0], (tuple, list)):
        out: dict[int, list[int]] = {}
        for ly, hd in heads:  # type: ignore[misc]
            head = HeadId(int(ly), int(hd)).check(n_layers, n_heads)
            if layer is None or head.layer == layer:
                out.setdefault(head.layer, []).append(head.head)
        return dict(sorted(out.items()))
    for hd in heads:
        if not 0 <= int(hd) < n_heads:
            raise UserError(f"head {hd} does not exist: the model has heads 0..{n_heads - 1}.")
    return {ly: [int(h) for h in heads] for ly in layers}
