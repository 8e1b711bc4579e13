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

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.text.codecs import Codec

HeadSpec = str | Sequence[int] | Sequence[tuple[int, int]] | None


def prompt_tokens(
    codec: Codec | None,
    text_or_tokens: str | Sequence[int] | Tensor,
    *,
    n_ctx: int,
    prepend_bos: bool = True,
    d_vocab: int | None = None,
) -> Int[Tensor, " pos"]:
    """Model ids of a prompt. Text is encoded (with BOS first unless ``prepend_bos=False``);
    token ids are taken as given (one sequence). Checked (:mod:`interp_toolkit.runtime.validate`):
    integer ids of the model's vocabulary (``d_vocab``, default the codec's), 1..``n_ctx`` of them."""
    if d_vocab is None and codec is not None:
        d_vocab = codec.d_vocab
    if isinstance(text_or_tokens, str):
        if codec is None:
            raise UserError("text prompts need the model's vocabulary: pass codec=…")
        ids = list(codec.encode(text_or_tokens))
        text_or_tokens = [int(codec.bos_id), *ids] if prepend_bos else ids
        if not text_or_tokens:
            raise UserError("the prompt is empty: give at least one token of text.")
    return validate.token_ids(text_or_tokens, d_vocab=d_vocab, n_ctx=n_ctx, name="prompt")


def attention_patterns(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], layers: Sequence[int]
) -> dict[int, Float[Tensor, "head dest src"]]:
    """Attention patterns ``[head, dest, src]`` of the given layers on one sequence."""
    cfg = model.cfg
    tokens = validate.token_ids(tokens, d_vocab=int(cfg.d_vocab), n_ctx=int(cfg.n_ctx))
    layers = [validate.layer(layer, int(cfg.n_layers)) for layer in layers]
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
    heads = validate.heads(heads, int(model.cfg.n_layers), int(model.cfg.n_heads))
    by_layer = attention_patterns(model, tokens, sorted({layer for layer, _ in heads}))
    return torch.stack([by_layer[layer][head] for layer, head in heads])


def heads_by_layer(
    n_layers: int, n_heads: int, layer: int | None, heads: HeadSpec
) -> dict[int, list[int]]:
    """Which heads of which layers to show. ``heads`` is a list of head indices (within ``layer``,
    or within every layer), a list of ``(layer, head)`` pairs, or text naming heads ``"L.H"``
    (comma-separated); None means every head."""
    if isinstance(heads, str):  # "0.1": a head's name, not the characters "0", ".", "1"
        from interp_toolkit.heads.registry import HeadId

        heads = [tuple(HeadId.parse(h)) for h in heads.split(",")]
    if layer is not None:
        layer = validate.layer(layer, n_layers)
    layers = [layer] if layer is not None else list(range(n_layers))
    if heads is None:
        return {ly: list(range(n_heads)) for ly in layers}
    heads = list(heads)
    if heads and isinstance(heads[0], (tuple, list)):
        out: dict[int, list[int]] = {}
        for ly, hd in validate.heads(heads, n_layers, n_heads):
            if layer is None or ly == layer:
                out.setdefault(ly, []).append(hd)
        return dict(sorted(out.items()))
    for hd in heads:
        validate.head(layers[0] if layers else 0, hd, n_layers, n_heads)
    return {ly: [int(h) for h in heads] for ly in layers}
