"""Two-repeat exams at every period: does the model copy the token after the earlier occurrence,
whatever the distance? (The single-prompt exams live in :mod:`interp_toolkit.analysis.exam`.)"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec

# --- Two-repeat exams at every period -------------------------------------------------------------
#
# A period-p exam prompt is ``[BOS] seg seg[:-1]`` and its target is ``seg[-1]``: ``seg`` is p
# distinct single-letter tokens, so the only way to the target is to find the earlier occurrence of
# the last prompt token and copy what followed it (induction). The target is never the alphabet's
# next letter after the token before it, so knowing the alphabet's bigrams cannot pass.

#: Letters the period exams draw from, in order of use: ``' A'..' Z'`` first, ``' a'..' z'`` only
#: for periods longer than the uppercase letters the codec keeps.
EXAM_LETTERS = (
    tuple(" " + chr(c) for c in range(ord("A"), ord("Z") + 1)),
    tuple(" " + chr(c) for c in range(ord("a"), ord("z") + 1)),
)


@dataclass(frozen=True)
class LetterPool:
    """The single-letter token ids a codec keeps (never ``<unk>``), and each letter's successor.

    ``upper``: ids of the kept ``' A'..' Z'``; ``ids``: those followed by the kept ``' a'..' z'``;
    ``successor[i]``: the id of the alphabet's next letter after id ``i`` (same case), when kept.
    """

    upper: tuple[int, ...]
    ids: tuple[int, ...]
    successor: dict[int, int]

    def for_period(self, period: int) -> tuple[int, ...]:
        """Uppercase letters while they suffice for ``period``, else all kept letters."""
        return self.upper if period <= len(self.upper) else self.ids


def letter_pool(codec: Codec) -> LetterPool:
    """The exam letters ``codec`` encodes as one kept token."""
    by_case: list[list[int | None]] = []
    for letters in EXAM_LETTERS:
        row: list[int | None] = []
        for letter in letters:
            ids = codec.encode(letter)
            row.append(int(ids[0]) if len(ids) == 1 and not codec.contains_unk(ids) else None)
        by_case.append(row)
    successor = {
        a: b
        for row in by_case
        for a, b in zip(row[:-1], row[1:], strict=True)
        if a is not None and b is not None
    }
    upper = tuple(i for i in by_case[0] if i is not None)
    return LetterPool(upper, upper + tuple(i for i in by_case[1] if i is not None), successor)


def max_exam_period(pool: LetterPool, n_ctx: int, *, prepend_bos: bool = True) -> int:
    """The longest period whose prompt (``2*period - 1`` tokens, + BOS) fits ``n_ctx`` and whose
    segment fits the letter pool (52 letters at most: GPT-2's 1,024-token context is capped by the
    pool, not by the context)."""
    return min((n_ctx - int(prepend_bos) + 1) // 2, len(pool.ids))


def period_exam_batch(
    pool: LetterPool,
    period: int,
    *,
    n_prompts: int,
    bos_id: int | None,
    seed: int = 0,
) -> tuple[Int[torch.Tensor, "prompt pos"], Int[torch.Tensor, " prompt"]]:
    """``n_prompts`` prompts ``[BOS] seg seg[:-1]`` (BOS when ``bos_id`` is given) and their
    targets ``seg[-1]``; deterministic in ``(seed, period)``."""

    letters = np.asarray(pool.for_period(period), dtype=np.int64)
    if period < 2 or period > len(letters):
        raise UserError(
            f"period {period} cannot be examined: use 2..{len(pool.ids)} "
            "(distinct single-letter tokens the vocabulary keeps)."
        )
    if n_prompts < 1:
        raise UserError(f"n_prompts={n_prompts} cannot work: use at least 1 prompt.")
    rng = np.random.default_rng([seed, period])
    segs = np.empty((n_prompts, period), dtype=np.int64)
    for i in range(n_prompts):
        for _ in range(1000):
            seg = rng.permutation(letters)[:period]
            if pool.successor.get(int(seg[-2])) != int(seg[-1]):
                break
        else:  # pragma: no cover - only a two-letter alphabet A, B can get here
            raise UserError(f"period {period}: the letter pool is too small for a fair target.")
        segs[i] = seg
    body = np.concatenate([segs, segs[:, :-1]], axis=1)
    if bos_id is not None:
        body = np.concatenate([np.full((n_prompts, 1), bos_id, dtype=np.int64), body], axis=1)
    return torch.from_numpy(body), torch.from_numpy(segs[:, -1].copy())


@dataclass(frozen=True)
class PeriodExam:
    """Two-repeat exams at one period. ``rank``: how many other tokens have a logit at least the
    target's (ties count against it), so a prompt passes exactly when ``rank == 0``; ``chance``:
    the pass rate of guessing among the period's tokens in context (1/period)."""

    period: int
    n_prompts: int
    pass_rate: float
    median_rank: float
    chance: float
    ranks: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "pass_rate": self.pass_rate,
            "median_rank": self.median_rank,
            "n_prompts": self.n_prompts,
            "chance": self.chance,
        }


def exam_by_period(
    model: torch.nn.Module,
    codec: Codec,
    *,
    periods: Sequence[int] | None = None,
    n_prompts: int = 30,
    seed: int = 0,
    prepend_bos: bool = True,
) -> list[PeriodExam]:
    """Two-repeat exams at every period (default: 2 .. :func:`max_exam_period`), one batched
    forward pass per period. A prompt passes when the target's logit is strictly above every
    other logit; a model whose logits are all equal passes none. ``model`` needs ``cfg.n_ctx`` and
    ``model(tokens) -> logits [batch, pos, vocab]``."""

    pool = letter_pool(codec)
    n_ctx = int(model.cfg.n_ctx)
    longest = max_exam_period(pool, n_ctx, prepend_bos=prepend_bos)
    periods = list(range(2, longest + 1)) if periods is None else [int(p) for p in periods]
    if longest < 2 or not periods:
        raise UserError(
            f"no period fits: the context ({n_ctx}) and letter pool ({len(pool.ids)}) allow "
            f"periods 2..{longest}."
        )
    bad = [p for p in periods if not 2 <= p <= longest]
    if bad:
        raise UserError(
            f"period(s) {', '.join(map(str, bad))} do not fit this model: use 2..{longest} "
            f"(context {n_ctx}{' with BOS' if prepend_bos else ''}, {len(pool.ids)} letters)."
        )
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    bos_id = int(codec.bos_id) if prepend_bos else None
    out = []
    for period in periods:
        tokens, targets = period_exam_batch(
            pool, period, n_prompts=n_prompts, bos_id=bos_id, seed=seed
        )
        with torch.no_grad():
            last = model(tokens.to(device))[:, -1].float().cpu()
        target_logit = last.gather(1, targets[:, None])
        ranks = [int(r) - 1 for r in (last >= target_logit).sum(1)]
        out.append(
            PeriodExam(
                period=period,
                n_prompts=n_prompts,
                pass_rate=sum(r == 0 for r in ranks) / n_prompts,
                median_rank=float(statistics.median(ranks)),
                chance=1.0 / period,
                ranks=tuple(ranks),
            )
        )
    return out
