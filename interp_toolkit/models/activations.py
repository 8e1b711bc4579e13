"""Reading activations: run a model with hooks at named points and stop as soon as the last
one has fired (nothing after it, e.g. the unembedding, is computed)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge
from transformer_lens.hook_points import HookPoint

Hooks = Sequence[tuple[Any, Callable[..., Any]]]

#: Longest row an activation analysis reads by default (probes, neurons, SAEs): a longer
#: context (GPT-2's 1,024 tokens) is cut to this.
MAX_SEQ = 128


class _Stop(Exception):
    """Raised once every hook asked for has fired: nothing after it is needed."""


def run_hooks(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "b pos"],
    names: Sequence[str],
    take: Callable[[int, torch.Tensor], None],
    fwd_hooks: Hooks = (),
) -> None:
    """Run ``tokens`` through ``model`` calling ``take(i, activation)`` (detached, float32, CPU)
    at hook ``names[i]``; the pass stops once every hook has fired (the rest is not computed).
    Hook names may be TransformerLens aliases (``hook_resid_mid``, ``mlp.hook_post``)."""
    seen: set[int] = set()

    def grab(act: torch.Tensor, hook: HookPoint, i: int) -> None:
        take(i, act.detach().float().cpu())
        seen.add(i)
        if len(seen) == len(names):
            raise _Stop

    hooks = [*fwd_hooks, *((n, partial(grab, i=i)) for i, n in enumerate(names))]
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            model(tokens.to(next(model.parameters()).device))
    except _Stop:
        return
    raise RuntimeError(f"hooks {[n for i, n in enumerate(names) if i not in seen]} did not fire")


def per_query_head(x: torch.Tensor, n_heads: int, dim: int) -> torch.Tensor:
    """A key/value tensor with one entry per K/V head along ``dim``, repeated for every query head
    that shares it (grouped- and multi-query attention: query head ``h`` reads K/V head
    ``h // (n_heads // n_kv)``, as ``transformers``' ``repeat_kv``); unchanged when every query
    head has its own."""
    n_kv = x.shape[dim]
    if n_kv == n_heads:
        return x
    if n_kv < 1 or n_heads % n_kv:
        raise ValueError(f"{n_kv} key/value heads cannot serve {n_heads} query heads")
    return x.repeat_interleave(n_heads // n_kv, dim=dim)
