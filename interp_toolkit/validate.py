"""What the public API is given, checked in one place: token ids (type, shape, range, length),
layers and heads. Every entry point that takes them calls these; each failure is one
:class:`~interp_toolkit.errors.UserError` line naming the argument and the fix.

Token ids may be a list or tuple of ints, or an integer tensor or array. One sequence is
``[pos]`` (or a ``[1, pos]`` batch of one); a batch is ``[batch, pos]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from interp_toolkit.errors import UserError


def token_ids(
    value: Any, *, d_vocab: int | None, n_ctx: int, batch: bool = False, name: str = "tokens"
) -> torch.Tensor:
    """``value`` as a long tensor ``[pos]`` (``batch=True``: ``[batch, pos]``), checked (the
    id range only when ``d_vocab`` is known)."""
    t = _as_tensor(value, name)
    if t.numel() == 0:
        raise UserError(f"{name} is empty: give at least one token.")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise UserError(
            f"{name} must be integer token ids, got a {str(t.dtype).removeprefix('torch.')} "
            "tensor: pass ids (e.g. codec.encode(text)), or the text itself where text is taken."
        )
    if not batch and t.ndim == 2 and t.shape[0] == 1:
        t = t[0]
    want = 2 if batch else 1
    if batch and t.ndim == 1:
        t = t[None]
    if t.ndim != want:
        shape = "x".join(map(str, t.shape)) or "a scalar"
        if not batch and t.ndim == 2:
            raise UserError(
                f"{name} is a batch of {t.shape[0]} sequences ({shape}) but one sequence is "
                f"taken: pass one row, e.g. {name}[0]."
            )
        layout = "[batch, pos]" if batch else "[pos]"
        raise UserError(f"{name} has shape {shape}: give token ids shaped {layout}.")
    if t.shape[-1] > n_ctx:
        raise UserError(
            f"{name} has {t.shape[-1]} tokens but the model's context is {n_ctx}: "
            f"shorten it to at most {n_ctx} tokens."
        )
    if d_vocab is not None:
        in_vocab(t, d_vocab, name)
    return t.long()


def in_vocab(ids: torch.Tensor | Iterable[int], d_vocab: int, name: str = "tokens") -> None:
    """Every id of ``ids`` must be one of the model's (0..d_vocab-1)."""
    t = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(list(ids), dtype=torch.long)
    if t.numel() == 0:
        return
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= d_vocab:
        bad = lo if lo < 0 else hi
        raise UserError(
            f"{name}: token id {bad} is outside this model's vocabulary (ids 0..{d_vocab - 1}): "
            "are the ids from this model's own codec?"
        )


def count(value: Any, name: str) -> int:
    """A positive whole number (a top-k, a number of sequences...)."""
    if not _is_int(value) or int(value) < 1:
        raise UserError(f"{name}={value!r} cannot work: use a whole number, 1 or more.")
    return int(value)


def layer(index: Any, n_layers: int) -> int:
    """A layer index of a model with ``n_layers`` layers."""
    if not _is_int(index) or not 0 <= int(index) < n_layers:
        raise UserError(f"layer {index!r} does not exist: the model has layers 0..{n_layers - 1}.")
    return int(index)


def head(layer_index: Any, head_index: Any, n_layers: int, n_heads: int) -> tuple[int, int]:
    """A (layer, head) of a model with ``n_layers`` x ``n_heads`` heads."""
    ok = _is_int(layer_index) and _is_int(head_index)
    if not ok or not (0 <= int(layer_index) < n_layers and 0 <= int(head_index) < n_heads):
        raise UserError(
            f"head {layer_index}.{head_index} does not exist: this model has layers "
            f"0..{n_layers - 1} and heads 0..{n_heads - 1} (write L.H, e.g. {n_layers - 1}.0)."
        )
    return int(layer_index), int(head_index)


def heads(pairs: Sequence[Any], n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """A list of (layer, head) pairs, each checked."""
    out = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise UserError(f"head {pair!r} is not a (layer, head) pair: write e.g. (1, 0).")
        out.append(head(pair[0], pair[1], n_layers, n_heads))
    return out


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, str):
        raise UserError(
            f"{name} is text where token ids are taken: encode it first (codec.encode)."
        )
    try:
        return torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError, RuntimeError):
        raise UserError(
            f"{name} is not token ids ({type(value).__name__}): give a list of ints or an "
            "integer tensor."
        ) from None
