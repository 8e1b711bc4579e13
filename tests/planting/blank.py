"""The blank model every planted model starts from, and the tools that write a head by hand.

A planted model is a native attention-only model (``build_model``) with n_ctx 32 and a 32-id
vocabulary (:func:`letters_codec`: BOS, ``A``, `` A``..`` Z``, three more ids, ``<unk>``) whose
every weight is written by hand. :func:`blank_model` zeroes every weight and bias, then lays the
residual stream out as one-hot blocks of :data:`BLOCK` (32) dims:

==================  ==========================================================================
``TOK`` (0..31)      the token's id (``W_E[t] = e_{TOK+t}``)
``POS`` (32..63)     the position (``W_pos[p] = e_{POS+p}``)
(the model's own)    the blocks its layer-0 heads write for layer 1 (:mod:`planting.circuits`:
                     ``MID``; :mod:`planting.heads`: ``PREV``, ``PREV2``)
``out``              what the unembedding reads (``W_U[out+t, t] = 1``): the embedding alone
                     gives every logit 0
==================  ==========================================================================

:class:`Head` zeroes one head and hands out its live q/k/v rows and o columns; a query row that
carries ``Head.unit`` (``sqrt(d_head)``) undoes the attention's 1/sqrt(d_head) scale, so a query
weight ``Head.unit * x`` against a key weight 1 is an attention logit ``x`` (``Head.scale``: logit
:data:`ALPHA`, 20, so a head with ALPHA on one key of 32 puts ``1 - 31·e^-20`` of its attention
there).
"""

from __future__ import annotations

import math

import torch

from interp_toolkit.heads.registry import HeadId
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.text.codecs import EOT_ID, CompactVocab, gpt2_encoding

BLOCK = 32  # d_vocab = n_ctx = the width of each residual block
TOK, POS = 0, 32
ALPHA = 20.0
LETTERS = [f" {chr(c)}" for c in range(ord("A"), ord("Z") + 1)]


def letters_codec() -> CompactVocab:
    """32 ids: BOS (<|endoftext|>), ``A``, `` A``..`` Z``, ``!``, ``"``, ``#``, then ``<unk>``."""
    enc = gpt2_encoding()
    pieces = ["A", *LETTERS, "!", '"', "#"]
    ids = [EOT_ID] + [enc.encode_ordinary(p)[0] for p in pieces]
    codec = CompactVocab(ids)
    assert codec.d_vocab == BLOCK and codec.bos_id == 0
    return codec


def blank_model(cfg: ModelConfig, out: int):
    """``cfg`` with every weight and bias 0, then the embeddings (``TOK``), positions (``POS``)
    and the unembedding (reading block ``out``) of the module docstring."""
    model = build_model(cfg)
    eye = torch.eye(BLOCK)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.original_component.weight[:, TOK : TOK + BLOCK] = eye
        model.pos_embed.original_component.weight[:, POS : POS + BLOCK] = eye
        model.unembed.original_component.weight[:, out : out + BLOCK] = eye
    return model


class Head:
    """The live weights of one head, zeroed: rows ``[d_head, d_model]`` of the q/k/v nn.Linear
    (``q = W x``) and columns ``[d_model, d_head]`` of o (``out = W z``). Write them under
    ``torch.no_grad()``."""

    def __init__(self, model, head: HeadId) -> None:
        attn = model.blocks[head.layer].attn
        self.d_head = int(model.cfg.d_head)
        rows = slice(head.head * self.d_head, (head.head + 1) * self.d_head)
        self.q = attn.q.original_component.weight[rows]
        self.k = attn.k.original_component.weight[rows]
        self.v = attn.v.original_component.weight[rows]
        self.o = attn.o.original_component.weight[:, rows]
        self.unit = math.sqrt(self.d_head)  # undoes the 1/sqrt(d_head) scale
        self.scale = ALPHA * math.sqrt(self.d_head)  # logit ALPHA
        for w in (self.q, self.k, self.v, self.o):
            w.zero_()

    def copy(self, src: int, dst: int, gain: float = 1.0) -> None:
        """OV: the one-hot in block ``src`` -> head dims 0..31 -> block ``dst`` (times ``gain``)."""
        for i in range(BLOCK):
            self.v[i, src + i] = 1.0
            self.o[dst + i, i] = gain

    def positional(self, shares: dict[int, float], sharpness: float) -> None:
        """Query p puts logit ``sharpness + log(share)`` on key ``p - d`` for each offset ``d``
        (head dims 0..31: one per key position)."""
        for p in range(BLOCK):
            self.k[p, POS + p] = 1.0
            for d, share in shares.items():
                if p - d >= 0:
                    self.q[p - d, POS + p] = self.unit * (sharpness + math.log(share))

    def content(self, key_block: int | tuple[int, ...], sharpness: float) -> None:
        """Query token t looks for a key whose ``key_block`` holds t (head dims 0..31)."""
        blocks = key_block if isinstance(key_block, tuple) else (key_block,)
        for t in range(BLOCK):
            self.q[t, TOK + t] = self.unit * sharpness
            for b in blocks:
                self.k[t, b + t] = 1.0

    def key_noise(self, bias: torch.Tensor) -> None:
        """Add ``bias[token of the key]`` to every logit (the last head dim, constant query)."""
        for p in range(BLOCK):
            self.q[self.d_head - 1, POS + p] = self.unit
        self.k[self.d_head - 1, TOK : TOK + BLOCK] = bias
