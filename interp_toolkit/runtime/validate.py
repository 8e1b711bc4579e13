"""What the public API and the command line are given, checked in one place: token ids (type,
shape, range, length), layers and heads, seeds, temperatures, counts and paths. Every entry point
that takes them calls these (the command line through the option table of
:mod:`interp_toolkit.cli.boundary`); each failure is one
:class:`~interp_toolkit.errors.UserError` line naming the argument and the fix.

Token ids may be a list or tuple of ints, or an integer tensor or array. One sequence is
``[pos]`` (or a ``[1, pos]`` batch of one); a batch is ``[batch, pos]``.

torch and numpy are imported by the functions that need them, so the command line can check
its options before either loads.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_toolkit.errors import UserError

if TYPE_CHECKING:
    import torch

#: Seeds are 0..2^63-1: every generator we seed (torch, numpy, Python) takes them.
SEED_MAX = 2**63 - 1


def seed(value: Any, name: str = "seed") -> int:
    """A seed: a whole number from 0 to 2^63-1."""
    if not is_whole(value) or not 0 <= int(value) <= SEED_MAX:
        raise UserError(
            f"{name}={value!r} cannot work: a seed is a whole number from 0 to {SEED_MAX}."
        )
    return int(value)


def temperature(value: Any, name: str = "temperature") -> float:
    """A sampling temperature: a finite number >= 0 (0 = greedy)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) < 0:
        raise UserError(
            f"{name}={value!r} cannot work: use a finite number >= 0 (0 = always the most likely "
            "token, 1 = the model's own distribution)."
        )
    return float(value)


def number(
    value: Any,
    name: str,
    *,
    least: float | int | None = None,
    above: float | int | None = None,
    below: float | int | None = None,
    optional: bool = False,
    why: str = "",
) -> float | None:
    """A finite real number (not a bool, a string, NaN or infinity) that is >= ``least``,
    > ``above`` and < ``below`` (each bound when given; ``why``: the reason for the range, said
    when a value is refused); ``optional``: None is taken too."""
    if value is None and optional:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    try:
        x = float(value) if ok else math.nan
    except OverflowError:  # an int past float's range
        x = math.nan
    ok = math.isfinite(x) and (least is None or x >= least) and (above is None or x > above)
    if not ok or (below is not None and x >= below):
        bounds = [
            f"{op} {b:g}" for op, b in ((">=", least), (">", above), ("<", below)) if b is not None
        ]
        where = f" {' and '.join(bounds)}" if bounds else ""
        raise UserError(
            f"{name}={value!r} cannot work: use a finite number{where}"
            f"{', or None' if optional else ''}{f' ({why})' if why else ''}."
        )
    return x


def text(value: Any, name: str, example: str) -> str:
    """A text argument: a non-empty ``str`` (e.g. a prompt, a target token, a name)."""
    if not isinstance(value, str):
        raise UserError(
            f"{name} must be text (str), got {type(value).__name__} {value!r}: "
            f"e.g. {name}={example}."
        )
    if not value:
        raise UserError(f"{name} is empty: give some text, e.g. {name}={example}.")
    return unicode(value, name)


def unicode(value: str, name: str) -> str:
    """Text every codec can encode: no lone surrogate (what Python makes of bytes that are not
    UTF-8 on a command line, ``$'\\xff'``, or of a half of a surrogate pair)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        what = (
            f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8,"
            if 0xDC80 <= code <= 0xDCFF
            else f"a lone surrogate U+{code:04X}"
        )
        raise UserError(
            f"{name} holds {what} at character {exc.start}: give text in UTF-8."
        ) from None
    return value


def flag(value: Any, name: str) -> bool:
    """A yes/no argument: True or False (not 0, 1 or "false", which read as the opposite)."""
    if not isinstance(value, bool):
        raise UserError(f"{name}={value!r} cannot work: use True or False.")
    return value


def path_arg(value: Any, name: str, example: str = "runs/cpu-2l") -> Path:
    """A path argument: a non-empty ``str`` or ``os.PathLike`` (not None, a number or ``''``,
    which would silently mean the current folder)."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise UserError(
            f"{name} must be a path (str or pathlib.Path), got {type(value).__name__} "
            f'{value!r}: e.g. {name}="{example}".'
        )
    if not os.fspath(value).strip():
        raise UserError(f'{name} is an empty path: name a folder, e.g. {name}="{example}".')
    return Path(value)


def finite_weights(named: Iterable[tuple[str, torch.Tensor]], where: str, fix: str) -> None:
    """Every floating tensor of ``named`` (name, tensor) must be finite: a NaN or an infinity
    would make every score, rank and sample of the model NaN or garbage. One line naming the
    tensors (the first three) and ``fix``."""
    bad = non_finite(named)
    if bad:
        raise UserError(f"{where} holds NaN or infinite weights ({first_three(bad)}): {fix}")


def non_finite(named: Iterable[tuple[str, torch.Tensor]]) -> list[str]:
    """The names of the floating tensors of ``named`` (name, tensor) that hold a NaN or an
    infinity (one device sync)."""
    import torch

    items = [(n, t) for n, t in named if t.is_floating_point() and t.numel()]
    if not items:
        return []
    finite = torch.stack([torch.isfinite(t).all() for _, t in items]).cpu()
    return [n for (n, _), ok in zip(items, finite.tolist(), strict=True) if not ok]


def first_three(names: Sequence[str]) -> str:
    """``a, b, c and N more``: the first three ``names`` and how many more there are."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def token_ids(
    value: Any, *, d_vocab: int | None, n_ctx: int, batch: bool = False, name: str = "tokens"
) -> torch.Tensor:
    """``value`` as a long tensor ``[pos]`` (``batch=True``: ``[batch, pos]``), checked (the
    id range only when ``d_vocab`` is known)."""
    import torch

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
    import torch

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


def count(
    value: Any,
    name: str,
    least: int = 1,
    *,
    optional: bool = False,
    most: int | None = None,
    cost: str = "",
) -> Any:
    """A whole number, ``least`` or more (a top-k, a number of sequences...) and at most
    ``most`` when given (``cost``: what each one costs, said when a count is refused);
    ``optional``: None is taken too (and returned)."""
    if value is None and optional:
        return None
    if not is_whole(value) or int(value) < least:  # the command line's line, word for word
        raise UserError(f"{name}={value!r} cannot work: use a whole number, {least} or more.")
    if most is not None and int(value) > most:
        why = f" ({cost})" if cost else ""
        raise UserError(
            f"{name}={value!r} cannot work: use a whole number from {least} to {most:,}{why}."
        )
    return int(value)


def layer(index: Any, n_layers: int) -> int:
    """A layer index of a model with ``n_layers`` layers."""
    if not is_whole(index) or not 0 <= int(index) < n_layers:
        raise UserError(f"layer {index!r} does not exist: the model has layers 0..{n_layers - 1}.")
    return int(index)


def head(layer_index: Any, head_index: Any, n_layers: int, n_heads: int) -> tuple[int, int]:
    """A (layer, head) of a model with ``n_layers`` x ``n_heads`` heads."""
    ok = is_whole(layer_index) and is_whole(head_index)
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


def is_whole(x: Any) -> bool:
    """An integer (numpy's too), not a bool."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        if value.dtype.is_signed or value.dtype in (torch.uint8, torch.bool):
            return value
        value = value.cpu().numpy()  # uint16/32/64: most torch ops are not implemented for them
    if isinstance(value, str):
        raise UserError(
            f"{name} is text where token ids are taken: encode it first (codec.encode)."
        )
    try:
        arr = np.asarray(value)
        wide = arr.dtype.kind == "u" and arr.dtype.itemsize > 1  # torch has no ops for uint64
        if not (wide and arr.size and int(arr.max()) > SEED_MAX):
            return torch.as_tensor(arr.astype(np.int64) if wide else arr)
    except (TypeError, ValueError, RuntimeError):
        raise UserError(
            f"{name} is not token ids ({type(value).__name__}): give a list of ints or an "
            "integer tensor."
        ) from None
    raise UserError(
        f"{name}: token id {int(arr.max())} is outside this model's vocabulary: "
        "are the ids from this model's own codec?"
    )
