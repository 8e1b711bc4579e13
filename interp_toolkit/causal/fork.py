"""Every reader of the circuit graph fires on every architecture: per-head Q/K/V inputs, the MLP's
input, and one K/V head per query head.

TL's path patching and edge attribution read and write each head's own copy of the residual
stream at ``blocks.L.attn.hook_q_input`` / ``hook_k_input`` / ``hook_v_input`` (``[batch, pos,
head, d_model]``), switched on by ``model.set_use_split_qkv_input(True)``, and the MLP's input at
``blocks.L.hook_mlp_in``. TL 4.3 implements the fork only in its ``JointQKVAttentionBridge``
(GPT-2, GPT-NeoX) and ``PositionEmbeddingsAttentionBridge`` (Llama, Mistral, Qwen2, Gemma 2,
Phi, ...); on the plain ``AttentionBridge`` (our native models; OPT, GPT-J) the flag raises
``NotImplementedError``, and ``hook_mlp_in`` never fires in a block with one norm for both
branches (GPT-J, Phi). The workarounds here, each leaving the logits unchanged (tested):

- native models (:func:`install_fork`): each ``NativeAttention`` gets a forward that honours the
  flag, built from the bridge's own pieces (``_fork_and_norm_per_head``,
  ``_project_per_head_qkv``, the weights, rotary and ``hook_pattern``);
- ``transformers`` models on the plain bridge (:func:`qkv_fork`): the Q, K and V projections'
  outputs are recomputed per head from the block's residual (captured before ``ln1``), each
  head's copy put through ``hook_{q,k,v}_input`` and ``ln1`` first;
- one norm for attention and MLP (:func:`mlp_input_fork`): the MLP's input is recomputed as
  ``ln1(hook_mlp_in(residual))``;
- grouped-query attention (:func:`per_query_kv`): a copy of the model with each K/V head repeated
  for the query heads that share it (the same outputs), so K and V inputs are per query head.
"""

from __future__ import annotations

import copy
import math
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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


def _tl_forks(model: TransformerBridge) -> bool:
    """Whether TL's own bridge forks every layer's Q/K/V inputs (the classes TL 4.3's
    ``_validate_attention_fork_supported`` accepts)."""
    from transformer_lens.model_bridge.generalized_components import (
        JointQKVAttentionBridge,
        PositionEmbeddingsAttentionBridge,
    )

    forks = (JointQKVAttentionBridge, PositionEmbeddingsAttentionBridge)
    return all(isinstance(b.attn, forks) for b in model.blocks)


def _residual_capture(block: Any, store: dict[str, torch.Tensor]) -> Any:
    """Keep the residual the block's ``ln1`` reads (its input, before the norm) in ``store``."""

    def capture(_module: Any, args: tuple[Any, ...]) -> None:
        if args and isinstance(args[0], torch.Tensor):
            store["x"] = args[0]

    return block.ln1.register_forward_pre_hook(capture)


def _projection_hook(model: TransformerBridge, layer: int, kind: str, store: dict) -> Callable:
    """A forward hook on ``blocks.L.attn.hook_{kind}`` that recomputes the projection per head
    from the captured residual, each head's copy through ``hook_{kind}_input`` and ``ln1``."""
    block, n_heads = model.blocks[layer], int(model.cfg.n_heads)
    linear = getattr(block.attn, kind).original_component
    fork_point = getattr(block.attn, f"hook_{kind}_input")
    norm = block.ln1.original_component

    def hook(_module: Any, _inputs: Any, out: torch.Tensor) -> torch.Tensor | None:
        if not bool(getattr(model.cfg, "use_split_qkv_input", False)):
            return None
        x = store["x"]
        copies = fork_point(x.unsqueeze(2).expand(-1, -1, n_heads, -1))
        weight = linear.weight.view(n_heads, -1, linear.weight.shape[-1])
        new = torch.einsum("bphd,hed->bphe", norm(copies), weight)
        if linear.bias is not None:
            new = new + linear.bias.view(n_heads, -1)
        return new.reshape(out.shape).to(out.dtype)

    return hook


@contextmanager
def qkv_fork(model: TransformerBridge) -> Iterator[TransformerBridge]:
    """The model with its per-head Q/K/V inputs forked (``hook_{q,k,v}_input`` fire), restoring
    the caller's flags on exit (module docstring: TL's fork, the native one, or the projections
    recomputed per head)."""
    install_fork(model)
    saved = bool(getattr(model.cfg, "use_split_qkv_input", False))
    saved_attn_in = bool(getattr(model.cfg, "use_attn_in", False))
    with ExitStack() as handles:
        if not has_native_attention(model) and not _tl_forks(model):
            object.__setattr__(model, "_validate_attention_fork_supported", _allow_fork)
            for layer, block in enumerate(model.blocks):
                if block.attn.q.original_component.weight.shape[0] != (
                    int(model.cfg.n_heads) * int(model.cfg.d_head)
                ):
                    raise NotImplementedError("the projection fork needs one K/V per head")
                store: dict[str, torch.Tensor] = {}
                handles.callback(_residual_capture(block, store).remove)
                for kind in ("q", "k", "v"):
                    point = model.hook_dict[f"blocks.{layer}.attn.hook_{kind}"]
                    hook = _projection_hook(model, layer, kind, store)
                    handles.callback(point.register_forward_hook(hook).remove)
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


def _shares_ln1(block: Any) -> bool:
    """A ``transformers`` block whose MLP reads ``ln1``'s output (no ``ln2``: GPT-J, Phi)."""
    subs = getattr(block, "submodules", None)
    return isinstance(subs, dict) and "mlp" in subs and "ln2" not in subs and "ln1" in subs


@contextmanager
def mlp_input_fork(model: TransformerBridge) -> Iterator[None]:
    """In blocks whose MLP reads ``ln1``'s output, the MLP's input recomputed as
    ``ln1(hook_mlp_in(residual))``, so ``blocks.L.hook_mlp_in`` fires (and what a hook adds there
    reaches the MLP alone) while ``use_hook_mlp_in`` is on."""
    with ExitStack() as handles:
        for layer, block in enumerate(model.blocks):
            if not _shares_ln1(block):
                continue
            store: dict[str, torch.Tensor] = {}
            handles.callback(_residual_capture(block, store).remove)

            def hook(
                _module: Any, _inputs: Any, out: torch.Tensor, block: Any = block, store=store
            ) -> torch.Tensor | None:
                if not bool(getattr(model.cfg, "use_hook_mlp_in", False)):
                    return None
                norm = block.ln1.original_component
                return norm(block.hook_mlp_in(store["x"])).to(out.dtype)

            point = model.hook_dict[f"blocks.{layer}.mlp.hook_in"]
            handles.callback(point.register_forward_hook(hook).remove)
        yield


_EXPANDED = "_interp_toolkit_per_query_kv"


def per_query_kv(model: TransformerBridge) -> TransformerBridge:
    """``model`` itself when each query head has its own K/V head; else (grouped- or multi-query
    attention on a ``transformers`` model) a copy whose ``k_proj``/``v_proj`` rows are repeated so
    that every query head has its own copy of its K/V head: the same outputs (tested), and K/V
    inputs per query head. Made once per model."""
    n_heads, n_kv = int(model.cfg.n_heads), getattr(model.cfg, "n_key_value_heads", None)
    if not n_kv or int(n_kv) == n_heads:
        return model
    cached = getattr(model, _EXPANDED, None)
    if cached is not None:
        return cached
    from transformer_lens import TransformerBridge as Bridge

    hf = model.original_model
    group = n_heads // int(n_kv)
    state = {}
    for name, t in hf.state_dict().items():
        name = name.replace("._original_component", "")
        if name.endswith(("k_proj.weight", "v_proj.weight")):
            t = t.reshape(int(n_kv), -1, t.shape[-1]).repeat_interleave(group, 0).flatten(0, 1)
        elif name.endswith(("k_proj.bias", "v_proj.bias")):
            t = t.reshape(int(n_kv), -1).repeat_interleave(group, 0).flatten()
        state[name] = t
    config = copy.deepcopy(hf.config)
    config.num_key_value_heads = n_heads
    param = next(hf.parameters())
    fresh = type(hf)(config)
    missing = fresh.load_state_dict(state, strict=False).missing_keys
    if missing:
        raise NotImplementedError(f"cannot give each query head its K/V head: {missing[:3]}")
    twin = Bridge.boot_transformers(
        str(model.cfg.model_name),
        hf_model=fresh.to(param.device).eval(),
        tokenizer=model.tokenizer,
        device=str(param.device),
        dtype=param.dtype,
    ).eval()
    object.__setattr__(model, _EXPANDED, twin)
    return twin
