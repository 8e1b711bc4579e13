"""Helpers shared by the tests: a tiny codec, hand-built models, greedy decoding by hand."""

from __future__ import annotations

import math

import torch

from interp_toolkit.text.codecs import EOT_ID, CompactVocab


def tiny_codec(d_vocab: int) -> CompactVocab:
    """A compact vocabulary of ``d_vocab`` ids: <|endoftext|> (id 0, BOS), GPT-2 ids 0.., <unk>."""
    return CompactVocab([EOT_ID] + list(range(d_vocab - 2)))


def _position_only(model) -> None:
    """Write position p as (p, p^2, 1) in residual dims 0..2 (the rest of W_pos zero, W_E zero
    there) and make every head's Q/K/V ignore those dims. Once per model, so heads planted
    afterwards keep their reads."""
    if getattr(model, "_position_only", False):
        return
    model._position_only = True
    n_ctx = int(model.cfg.n_ctx)
    with torch.no_grad():
        pos = model.pos_embed.original_component.weight
        pos.zero_()
        p = torch.arange(n_ctx, dtype=torch.float32)
        pos[:, 0], pos[:, 1], pos[:, 2] = p, p**2, 1.0
        model.embed.original_component.weight[:, :3] = 0.0
        for blk in model.blocks:
            for lin in (blk.attn.q, blk.attn.k, blk.attn.v):
                lin.original_component.weight[:, :3] = 0.0


def make_offset_head(model, layer: int = 0, head: int = 0, offset: int = 1, alpha: float = 6.0):
    """Make ``layer.head`` attend to the token ``offset`` positions back through W_pos (offset 1:
    a previous-token head; 0: a current-token head), and no other head see position.

    With position p written as (p, p^2, 1) in residual dims 0..2 (:func:`_position_only`), the
    head's q/k read those dims so that q_i . k_j = -alpha (j - (i - d))^2 after the
    1/sqrt(d_head) scale."""
    _position_only(model)
    d = float(offset)
    q, k, base, s = _qk_rows(model, layer, head, alpha)
    with torch.no_grad():
        # q = s * (2 x0 - 2d x2, -x2, 2d x0 - x1 - d^2 x2); k = (x0, x1, x2)
        q[base + 0, 0], q[base + 0, 2] = 2 * s, -2 * d * s
        q[base + 1, 2] = -s
        q[base + 2, 0], q[base + 2, 1], q[base + 2, 2] = 2 * d * s, -s, -d * d * s
        k[base + 0, 0], k[base + 1, 1], k[base + 2, 2] = 1.0, 1.0, 1.0


def make_prev_token_head(model, layer: int = 0, head: int = 0, alpha: float = 6.0) -> None:
    """A previous-token head (:func:`make_offset_head` with offset 1)."""
    make_offset_head(model, layer, head, offset=1, alpha=alpha)


def make_first_token_head(model, layer: int = 0, head: int = 0, alpha: float = 6.0) -> None:
    """Make ``layer.head`` attend to position 0 from every query: q_i . k_j = -alpha j^2."""
    _position_only(model)
    q, k, base, s = _qk_rows(model, layer, head, alpha)
    with torch.no_grad():
        q[base + 0, 2] = -s  # q = -s * x2 (the constant 1)
        k[base + 0, 1] = 1.0  # k = x1 = j^2


def _qk_rows(model, layer: int, head: int, alpha: float):
    """The head's W_Q/W_K rows zeroed; returns (W_Q, W_K, first row, scale)."""
    d_head = int(model.cfg.d_head)
    q = model.blocks[layer].attn.q.original_component.weight
    k = model.blocks[layer].attn.k.original_component.weight
    rows = slice(head * d_head, (head + 1) * d_head)
    with torch.no_grad():
        q[rows] = 0.0
        k[rows] = 0.0
    return q, k, head * d_head, alpha * math.sqrt(d_head)


def greedy_tokens(model, toks: torch.Tensor, n: int) -> torch.Tensor:
    """``toks`` with ``n`` greedy tokens appended, one full forward pass each (no KV cache)."""
    with torch.no_grad():
        for _ in range(n):
            toks = torch.cat([toks, model(toks)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return toks


def tiny_mlp_text_run(root, *, repeat_fraction: float | None = 0.5):
    """A tiny 2-layer MLP run (LayerNorm, d_model 32) saved under ``root/run``, trained on nothing,
    with a small text corpus ``root/corpus.txt`` recorded as its data: SAEs, probes and every
    command with a --json option run on it in seconds."""
    from interp_toolkit.models.build import ModelConfig, build_model
    from interp_toolkit.runs.folder import save_run

    text = root / "corpus.txt"
    text.write_text("".join(f"{chr(97 + i % 26)}{i % 7} = [{i}, {i * 3}]\n" for i in range(3000)))
    data = {"corpus": str(text), "val_fraction": 0.2}
    if repeat_fraction is not None:
        data["repeat_fraction"] = repeat_fraction
    base = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64, mlp=True)
    cfg = ModelConfig(**base, d_mlp=24, normalization="LN")
    return save_run(root / "run", build_model(cfg), tiny_codec(64), cfg, {"data": data})
