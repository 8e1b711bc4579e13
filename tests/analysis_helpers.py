"""Helpers shared by the tests: a tiny codec, hand-built models, greedy decoding by hand."""

from __future__ import annotations

import math

import torch

from interp_toolkit.tokenizer import EOT_ID, CompactVocab


def tiny_codec(d_vocab: int) -> CompactVocab:
    """A compact vocabulary of ``d_vocab`` ids: <|endoftext|> (id 0, BOS), GPT-2 ids 0.., <unk>."""
    return CompactVocab([EOT_ID] + list(range(d_vocab - 2)))


def make_prev_token_head(model, layer: int = 0, head: int = 0, alpha: float = 6.0) -> None:
    """Make ``layer.head`` attend to the previous token through W_pos, and no other head see position.

    Position p is written as (p, p^2, 1) in residual dims 0..2 (the rest of W_pos is zero, and W_E
    is zero there). The head's q/k read those dims so that q_i . k_j = -alpha (j - (i-1))^2 after
    the 1/sqrt(d_head) scale; every other head's Q/K/V ignore dims 0..2.
    """
    d_head = int(model.cfg.d_head)
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
        q = model.blocks[layer].attn.q.original_component.weight
        k = model.blocks[layer].attn.k.original_component.weight
        rows = slice(head * d_head, (head + 1) * d_head)
        q[rows] = 0.0
        k[rows] = 0.0
        s = alpha * math.sqrt(d_head)
        base = head * d_head
        # q = s * (2 x0 - 2 x2, -x2, 2 x0 - x1 - x2); k = (x0, x1, x2)
        q[base + 0, 0], q[base + 0, 2] = 2 * s, -2 * s
        q[base + 1, 2] = -s
        q[base + 2, 0], q[base + 2, 1], q[base + 2, 2] = 2 * s, -s, -s
        k[base + 0, 0], k[base + 1, 1], k[base + 2, 2] = 1.0, 1.0, 1.0


def greedy_tokens(model, toks: torch.Tensor, n: int) -> torch.Tensor:
    """``toks`` with ``n`` greedy tokens appended, one full forward pass each (no KV cache)."""
    with torch.no_grad():
        for _ in range(n):
            toks = torch.cat([toks, model(toks)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return toks
