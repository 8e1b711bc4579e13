"""TransformerLens 4.3's per-head Q/K/V input fork on our native models (the one workaround).

TL's path patching (``transformer_lens.patching.get_act_patch_direct_path``) and edge attribution
read and write each head's own copy of the residual stream at ``blocks.L.attn.hook_q_input`` /
``hook_k_input`` / ``hook_v_input`` (``[batch, pos, head, d_model]``), switched on by
``model.set_use_split_qkv_input(True)``. TL 4.3 implements that fork only in its
``JointQKVAttentionBridge`` (GPT-2) and ``PositionEmbeddingsAttentionBridge``; on the plain
``AttentionBridge`` that wraps a native model's ``NativeAttention`` the flag raises
``NotImplementedError`` ("No hook point is available before the Q/K/V projections").

:func:`qkv_fork` is the smallest workaround we found: on a native model it lets the flag through and
gives each native attention a forward that honours it, built from the bridge's own pieces
(``_fork_and_norm_per_head``, ``_project_per_head_qkv``, the ``NativeAttention`` weights, rotary and
``hook_pattern``), so every hook fires as before and the logits are unchanged (a test checks both
with the fork off and on). On a model whose bridge has the fork (GPT-2) it does nothing.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from transformer_lens import TransformerBridge

_FORKED = "_interp_toolkit_fork"


def has_native_attention(model: TransformerBridge) -> bool:
    """Whether ``model``'s attention is TL's plain ``AttentionBridge`` over ``NativeAttention``."""
    attn = getattr(model.blocks[0], "attn", None)
    return type(getattr(attn, "original_component", None)).__name__ == "NativeAttention"


def _forked_forward(self: Any, *args: Any, **kwargs: Any) -> Any:
    """NativeAttention's forward with the per-head fork when ``use_split_qkv_input`` is on."""
    if not bool(getattr(self.config, "use_split_qkv_input", False)):
        return type(self).forward(self, *args, **kwargs)
    native = self.original_component
    hidden = kwargs.pop("hidden_states", None)
    if hidden is None:
        hidden, args = args[0], args[1:]
    position_ids = kwargs.get("position_ids")
    if kwargs.get("attention_mask") is not None:
        raise NotImplementedError("the per-head fork of a native model takes no attention_mask")
    hidden = self.hook_in(hidden)
    source = self._captured_pre_ln_residual
    source = hidden if source is None else source
    n_heads, d_head = native.n_heads, native.d_head
    if native.n_kv_heads != n_heads:
        raise NotImplementedError("the per-head fork of a native model needs one K/V per head")
    q_in = self._fork_and_norm_per_head(source, self.hook_q_input, n_heads)
    k_in = self._fork_and_norm_per_head(source, self.hook_k_input, n_heads)
    v_in = self._fork_and_norm_per_head(source, self.hook_v_input, n_heads)
    q = self._project_per_head_qkv(self.q, q_in, n_heads, d_head).transpose(1, 2)
    k = self._project_per_head_qkv(self.k, k_in, n_heads, d_head).transpose(1, 2)
    v = self._project_per_head_qkv(self.v, v_in, n_heads, d_head).transpose(1, 2)
    if native.rotary is not None:
        q, k = native.rotary.apply_rope(q, k, position_ids=position_ids)
    seq = q.shape[2]
    scores = torch.matmul(q, k.transpose(-2, -1)) / native.scale
    if native.attn_scores_soft_cap > 0:
        cap = native.attn_scores_soft_cap
        scores = cap * torch.tanh(scores / cap)
    mask = native.causal_mask[:seq, :seq] if native.causal else None
    if mask is not None:
        scores = scores.masked_fill(mask, -math.inf)
    pattern = F.softmax(scores, dim=-1)
    if mask is not None:
        pattern = pattern.masked_fill(mask, 0.0)
    pattern = self.hook_pattern(pattern)
    z = torch.matmul(pattern, v).transpose(1, 2).reshape(hidden.shape[0], seq, -1)
    return self.hook_out(self.o(z)), pattern


def _allow_fork(flag_name: str) -> None:
    """The bridge's check, for a native model whose attentions carry :func:`_forked_forward`."""
    if flag_name == "use_attn_result":
        raise NotImplementedError(
            "use_attn_result: per-head results are not forked on native models"
        )


def install_fork(model: TransformerBridge) -> TransformerBridge:
    """Give a native model the per-head Q/K/V fork (idempotent; a no-op on other bridges). The
    fork stays off until ``model.set_use_split_qkv_input(True)`` (TL's tools switch it)."""
    if not has_native_attention(model) or getattr(model, _FORKED, False):
        return model
    for block in model.blocks:
        # object.__setattr__: the bridge would pass a plain setattr on to NativeAttention
        object.__setattr__(block.attn, "forward", types.MethodType(_forked_forward, block.attn))
    object.__setattr__(model, "_validate_attention_fork_supported", _allow_fork)
    object.__setattr__(model, _FORKED, True)
    return model


@contextmanager
def qkv_fork(model: TransformerBridge) -> Iterator[TransformerBridge]:
    """The model with its per-head Q/K/V inputs forked (``hook_{q,k,v}_input`` fire), restoring
    the caller's flags on exit."""
    install_fork(model)
    saved = bool(getattr(model.cfg, "use_split_qkv_input", False))
    saved_attn_in = bool(getattr(model.cfg, "use_attn_in", False))
    try:
        if saved_attn_in:
            model.set_use_attn_in(False)
        if not saved:
            model.set_use_split_qkv_input(True)
        yield model
    finally:
        model.set_use_split_qkv_input(saved)
        if saved_attn_in:
            model.set_use_attn_in(True)
