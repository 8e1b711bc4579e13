"""Fused attention for training steps, whenever nothing reads the attention pattern.

TransformerLens's native attention (``NativeAttention.forward``) builds the pattern explicitly
(scores, causal mask, softmax, mask again) and passes it through the bridge's ``hook_pattern``
before the value matmul, so that hooks can read or edit it. A training step only needs the output.
Inside :func:`fused_attention`, each layer's native attention computes it with
``F.scaled_dot_product_attention`` (one fused kernel forward and backward, flash attention on GPUs)
on every call where it may: causal attention, no attention mask, no score soft-cap, no grouped
keys, and **no hook** (forward or backward, on the module or global) on the layer's
``hook_pattern`` or ``hook_attn_scores``. Every other call, such as the periodic head scoring
during training or a user's hook, runs TransformerLens's own forward, so a pattern is exact
whenever anything reads it (under bf16 autocast such a layer runs in float32, autocast off, so
the pattern read is the float32 one). The q/k/v/o projections and their hook points run as
before (a shortformer's q/k, below, when nothing but its own hooks is on them, excepted). Under bf16 autocast on CUDA, SDPA takes bf16 q, k, v and keeps its softmax in float32
accumulators; on the CPU (whose bf16 SDPA backward is slow) the two attention matmuls run in
bf16, with the softmax in float32 for short contexts and, from :data:`CPU_BF16_SOFTMAX_FROM` keys
on, in bf16 as plain PyTorch under autocast computes it (:func:`_bf16_cpu_attention`).

A shortformer model (positions in the queries and keys only:
:func:`~interp_toolkit.models.build.install_shortformer`) adds its positions to each projection's
output through a hook there (``positions @ W``, a matmul per projection). In the fused path,
when that hook is the only one on the query and key projections, the positions are added to their
input instead (``(x + positions) @ W``, as a plain implementation writes it: one addition per
layer), equal up to float rounding.

SDPA and the explicit softmax differ only by float rounding (tests/unit/training/test_sdpa.py compares
logits and gradients); benchmarks/train_throughput.py measures the speed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from transformer_lens import TransformerBridge
from transformer_lens.model_bridge.sources.native.model import NativeAttention
from transformer_lens.utilities.activation_functions import softcap_enabled

from interp_toolkit.models.build import hooked, qk_positions


def _fused_forward(native: NativeAttention, bridge: torch.nn.Module) -> Callable[..., Any]:
    exact = native.forward  # TransformerLens's own (bound) forward

    def forward(
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        pattern_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        read = hooked(bridge.hook_pattern) or hooked(bridge.hook_attn_scores)
        if (
            read
            or attention_mask is not None
            or not native.causal
            or native.kv_repeats > 1
            or softcap_enabled(native.attn_scores_soft_cap)
        ):
            device = hidden_states.device.type
            fp32 = read and torch.is_autocast_enabled(device)  # a read pattern is float32
            with torch.autocast(device, enabled=False) if fp32 else contextlib.nullcontext():
                return exact(
                    hidden_states.float() if fp32 else hidden_states,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    pattern_fn=pattern_fn,
                    **kwargs,
                )
        b, s, _ = hidden_states.shape
        shape = (b, s, native.n_heads, native.d_head)
        positions = qk_positions(native.q, native.k)
        if positions is None:
            q, k = native.q(hidden_states), native.k(hidden_states)
        else:  # shortformer: (x + positions) @ W instead of the hooks' x @ W + positions @ W
            qk_in = hidden_states + positions.weight[:s]
            q, k = native.q.original_component(qk_in), native.k.original_component(qk_in)
        q, k = q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2)
        v = native.v(hidden_states).view(shape).transpose(1, 2)
        if native.rotary is not None:
            q, k = native.rotary.apply_rope(q, k, position_ids=position_ids)
        if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            z = _bf16_cpu_attention(q, k, v, 1.0 / native.scale)
        else:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / native.scale)
        # no pattern: the bridge fires hook_pattern / hook_attn_scores only for a 4-d tensor
        return native.o(z.transpose(1, 2).reshape(b, s, -1)), None

    return forward


#: From this many keys on, bf16 training on the CPU runs the attention's softmax in bf16 (as
#: plain PyTorch under autocast does): at the byte preset's 256 keys casting the [batch, head,
#: query, key] scores to float32 and back cost more than the matmuls (docs/benchmarks.md). Below
#: it the softmax stays float32 (the curriculum's 32 keys; not re-measured against bf16 there).
CPU_BF16_SOFTMAX_FROM = 128


def _bf16_cpu_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> torch.Tensor:
    """Causal attention under bf16 autocast on the CPU: the two matmuls in bf16 (torch's bf16
    SDPA backward on the CPU ran ~6x slower than its float32 one here), the softmax in float32
    below :data:`CPU_BF16_SOFTMAX_FROM` keys and in bf16 from there on
    (benchmarks/train_throughput.py, docs/benchmarks.md). The output is in v's dtype."""
    n = k.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * scale  # [batch, head, query, key], bf16
    if n < CPU_BF16_SOFTMAX_FROM:
        scores = scores.float()
    mask = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
    pattern = scores.masked_fill(mask, float("-inf")).softmax(-1)
    return pattern.to(v.dtype) @ v


@contextlib.contextmanager
def fused_attention(model: TransformerBridge) -> Iterator[None]:
    """Within the block, ``model``'s native attention layers use SDPA whenever no hook reads their
    pattern (see the module doc); TransformerLens's forward is restored afterwards."""
    patched = []
    for block in model.blocks:
        bridge = block.attn
        native = bridge.original_component
        if isinstance(native, NativeAttention):
            # an instance attribute: shadows the class's
            native.forward = _fused_forward(native, bridge)
            patched.append(native)
    try:
        yield
    finally:
        for native in patched:
            del native.forward
