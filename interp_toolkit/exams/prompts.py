"""The prompts of the period exams: ``[BOS] prefix seg seg[:-1]`` -> ``seg[-1]``, of two token
kinds, at random offsets (:mod:`interp_toolkit.exams.periods` sits them).

A period-``p`` prompt is ``[BOS] prefix seg seg[:-1]`` and its target is ``seg[-1]``: ``seg`` is
``p`` distinct tokens, ``prefix`` a random number of random tokens (the offset, uniform over
``0..min(room, max_offset)``) that never contain a segment token, so the only way to the target
is to find the earlier occurrence of the last prompt token and copy what followed it
(induction), at a position that changes from prompt to prompt. Two token kinds
(:data:`TOKEN_KINDS`): ``letters`` (single-letter tokens ``' A'``..; the target is never the
alphabet's next letter after the token before it, so knowing the alphabet cannot pass) and
``random`` (random ids of the model's vocabulary, :func:`~.batches.default_token_range`). The
rows are built by :func:`~.batches.repeated_tokens`, the one builder of repeated-token batches;
a prompt with a shorter prefix is followed by filler after its query, which a causal model never
reads.

The **order control** (``order_control=True``) sits the same segments and prefixes with the first
copy of ``seg`` in a random order in which ``seg[-1]`` does not follow ``seg[-2]``: the context
holds the same tokens as often (the target once), but the token that followed the query's earlier
occurrence is another. Copying what is in the context without induction passes as often as it
does as is; induction does not (docs/study.md section 0).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.heads.repeats import default_token_range, repeated_tokens
from interp_toolkit.runtime.seeds import np_rng
from interp_toolkit.text.codecs import Codec

#: The token kinds an exam draws its segments from.
TOKEN_KINDS = ("letters", "random")
#: Prompts per period and token kind by default (a Wilson interval at 200/200 is [0.981, 1]).
N_PROMPTS = 200
#: The longest random prefix by default (a toy context of 32 gives less room than this).
MAX_OFFSET = 64
#: How many start positions (offsets 0 .. MIN_OFFSETS - 1 at least) every default period's prompts
#: draw from, so that no fixed-position shortcut can pass (issue 30): the default periods stop at
#: the longest period with that much room (:func:`roomy_exam_period`; the cpu preset's context
#: of 32: period 8, offsets 0..16). A period asked for explicitly may have less; the exam states
#: each period's number of start positions (``offsets.positions``) either way.
MIN_OFFSETS = 16

#: Letters the letter exams draw from: ``' A'..' Z'`` first, ``' a'..' z'`` only for periods
#: longer than the uppercase letters the codec keeps.
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
    """The exam letters ``codec`` encodes as one kept token: ``' A'``.. (BPE), or ``'A'``.. where
    a letter with its space is two tokens (bytes)."""
    by_case = [[_letter_id(codec, letter) for letter in letters] for letters in EXAM_LETTERS]
    successor = {
        a: b
        for row in by_case
        for a, b in zip(row[:-1], row[1:], strict=True)
        if a is not None and b is not None
    }
    upper = tuple(i for i in by_case[0] if i is not None)
    return LetterPool(upper, upper + tuple(i for i in by_case[1] if i is not None), successor)


def _letter_id(codec: Codec, letter: str) -> int | None:
    ids = codec.encode(letter)
    if len(ids) != 1:  # a byte codec: ' A' is two tokens, 'A' is one
        ids = codec.encode(letter.strip())
    return int(ids[0]) if len(ids) == 1 and not codec.contains_unk(ids) else None


def max_exam_period(
    codec: Codec, n_ctx: int, kind: str = "letters", *, prepend_bos: bool = True
) -> int:
    """The longest period of ``kind`` whose prompt (``2*period - 1`` tokens, + BOS) fits ``n_ctx``
    at offset 0; letters are also capped by the letters the codec keeps (52 at most: GPT-2's
    1,024-token context is capped by the letters, not by the context)."""
    fit = (n_ctx - int(prepend_bos) + 1) // 2
    if kind == "letters":
        return min(fit, len(letter_pool(codec).ids))
    low, high = default_token_range(codec)
    return min(fit, high - low - 1)


def offset_positions(
    n_ctx: int, period: int, *, prepend_bos: bool = True, max_offset: int = MAX_OFFSET
) -> int:
    """How many start positions a period's prompts draw their offset from: ``0 .. room``, the
    room being what the context leaves after ``[BOS] seg seg[:-1]`` (at most ``max_offset``)."""
    return min(max(0, max_offset), n_ctx - int(prepend_bos) - (2 * period - 1)) + 1


def roomy_exam_period(
    codec: Codec, n_ctx: int, kind: str = "letters", *, prepend_bos: bool = True
) -> int:
    """The longest period of ``kind`` whose prompts can start at :data:`MIN_OFFSETS` offsets or
    more (and that :func:`max_exam_period` allows); below 2 when even period 2 has less room."""
    room = (n_ctx - int(prepend_bos) - (MIN_OFFSETS - 1) + 1) // 2
    return min(room, max_exam_period(codec, n_ctx, kind, prepend_bos=prepend_bos))


@dataclass(frozen=True)
class ExamPrompts:
    """The prompts of one period and kind: ``tokens[i, :query[i] + 1]`` is prompt ``i`` (what
    follows the query is filler no causal model reads), ``target[i]`` its answer and
    ``offsets[i]`` how many random tokens precede the pattern, drawn uniformly from
    ``positions`` start positions (``0 .. positions - 1``)."""

    kind: str
    period: int
    tokens: Int[torch.Tensor, "prompt pos"]
    query: Int[torch.Tensor, " prompt"]
    target: Int[torch.Tensor, " prompt"]
    offsets: Int[torch.Tensor, " prompt"]
    positions: int = 1

    def digest(self) -> str:
        """What pairing two models' exams checks: the same prompts, token for token."""
        h = hashlib.sha1(f"{self.kind},{self.period}".encode())
        for t in (self.tokens, self.query, self.target):
            h.update(t.contiguous().numpy().tobytes())
        return h.hexdigest()[:16]


def _kind_seed(seed: int, kind: str, period: int) -> int:
    return int(np.random.SeedSequence([seed, TOKEN_KINDS.index(kind), period]).generate_state(1)[0])


def control_order(period: int, g: np.random.Generator) -> list[int]:
    """A random order of a segment's positions ``0..period-1`` in which position ``period - 1``
    (the target) does not come right after position ``period - 2`` (the query's token); for a
    period of 2 that is the reverse."""
    while True:
        order = [int(i) for i in g.permutation(period)]
        at = order.index(period - 2)
        if at == period - 1 or order[at + 1] != period - 1:
            return order


def shuffle_first_copies(
    tokens: Int[torch.Tensor, "prompt pos"],
    starts: Int[torch.Tensor, " prompt"],
    period: int,
    seed: int,
) -> Int[torch.Tensor, "prompt pos"]:
    """``tokens`` with each row's first copy of its segment (``starts[i] .. + period``) in a
    :func:`control_order`, drawn per row from ``seed``."""
    out = tokens.clone()
    g = np_rng(seed, "exam_order_control")
    for i, s in enumerate(starts.tolist()):
        seg = tokens[i, s : s + period].clone()
        out[i, s : s + period] = seg[control_order(period, g)]
    return out


def exam_prompts(
    codec: Codec,
    kind: str,
    period: int,
    *,
    n_prompts: int = N_PROMPTS,
    n_ctx: int,
    seed: int = 0,
    prepend_bos: bool = True,
    max_offset: int = MAX_OFFSET,
    order_control: bool = False,
) -> ExamPrompts:
    """``n_prompts`` prompts ``[BOS] prefix seg seg[:-1]`` of one kind and period; deterministic
    in ``(seed, kind, period)``. UserError when the period does not fit. ``order_control``: the
    same prompts with each first copy shuffled (module docstring)."""
    if kind not in TOKEN_KINDS:
        raise UserError(f"token kind {kind!r} is unknown: use {' or '.join(TOKEN_KINDS)}.")
    if n_prompts < 1:
        raise UserError(f"n_prompts={n_prompts} cannot work: use at least 1 prompt.")
    longest = max_exam_period(codec, n_ctx, kind, prepend_bos=prepend_bos)
    if not 2 <= period <= longest:
        raise UserError(
            f"period {period} does not fit the {kind} exam of this model: use 2..{longest} "
            f"(context {n_ctx}{' with BOS' if prepend_bos else ''})."
        )
    positions = offset_positions(n_ctx, period, prepend_bos=prepend_bos, max_offset=max_offset)
    low, high = default_token_range(codec)
    pool = letter_pool(codec) if kind == "letters" else None
    batch = repeated_tokens(
        n_prompts,
        period,
        low=low,
        high=min(high, int(codec.d_vocab)),
        bos_id=int(codec.bos_id) if prepend_bos and codec.bos_id is not None else None,
        prefix_max=positions - 1,
        seed=_kind_seed(seed, kind, period),
        segment_ids=None if pool is None else pool.for_period(period),
    )
    tokens = batch.tokens.clone()
    starts = batch.starts
    if pool is not None:  # the target is never the alphabet's next letter: swap the last two
        for i, s in enumerate(starts.tolist()):
            a, b = int(tokens[i, s + period - 2]), int(tokens[i, s + period - 1])
            if pool.successor.get(a) == b:
                for copy in (s, s + period):
                    tokens[i, copy + period - 2], tokens[i, copy + period - 1] = b, a
    target = tokens[torch.arange(n_prompts), starts + period - 1]
    if order_control:
        tokens = shuffle_first_copies(tokens, starts, period, _kind_seed(seed, kind, period))
    return ExamPrompts(
        kind=kind,
        period=period,
        tokens=tokens[:, :-1].contiguous(),  # the last column is only ever filler or a target
        query=starts + 2 * period - 2,
        target=target,
        offsets=starts - int(prepend_bos),
        positions=positions,
    )


#: Every period up to this one is examined by default; beyond it, every ``SPARSE_STEP``-th (a
#: byte model's context of 256 fits periods up to 94: 93 exams of each kind would cost minutes).
DENSE_PERIODS = 16
SPARSE_STEP = 8


def default_periods(longest: int) -> list[int]:
    """The periods examined by default: 2..16, then 24, 32, ... up to ``longest`` (and
    ``longest`` itself)."""
    dense = list(range(2, min(longest, DENSE_PERIODS) + 1))
    sparse = list(range(DENSE_PERIODS + SPARSE_STEP, longest + 1, SPARSE_STEP))
    tail = [longest] if longest > DENSE_PERIODS and longest not in sparse else []
    return dense + sparse + tail


def _periods(
    codec: Codec, n_ctx: int, kind: str, periods: Sequence[int] | None, bos: bool, cap: int | None
) -> list[int]:
    longest = max_exam_period(codec, n_ctx, kind, prepend_bos=bos)
    if periods is None:
        # the periods with room for MIN_OFFSETS start positions; a context too short for even
        # period 2 to have them (a toy's 16) keeps every period that fits, each stating its room
        roomy = roomy_exam_period(codec, n_ctx, kind, prepend_bos=bos)
        longest = roomy if roomy >= 2 else longest
        longest = longest if cap is None else min(longest, cap)
        if longest < 2:
            raise UserError(f"no period fits the {kind} exam of this model (context {n_ctx}).")
        return default_periods(longest)
    bad = [p for p in periods if not 2 <= p <= longest]
    if bad:
        raise UserError(
            f"period(s) {', '.join(map(str, bad))} do not fit the {kind} exam of this model: use "
            f"2..{longest} (context {n_ctx}{' with BOS' if bos else ''})."
        )
    return [int(p) for p in periods]


def exam_plan(
    codec: Codec,
    n_ctx: int,
    *,
    periods: Sequence[int] | None = None,
    kinds: Sequence[str] = TOKEN_KINDS,
    n_prompts: int = N_PROMPTS,
    seed: int = 0,
    prepend_bos: bool = True,
    max_offset: int = MAX_OFFSET,
    max_period: int | None = None,
    order_control: bool = False,
) -> list[ExamPrompts]:
    """The prompts of every exam :func:`exam_by_period` sits (same arguments), kind by kind;
    by default a kind the vocabulary cannot make (no letters) is left out. ``order_control``:
    each exam's order control instead (:func:`exam_prompts`)."""
    for kind in kinds:
        if kind not in TOKEN_KINDS:
            raise UserError(f"token kind {kind!r} is unknown: use {' or '.join(TOKEN_KINDS)}.")
    if n_prompts < 1:
        raise UserError(f"n_prompts={n_prompts} cannot work: use at least 1 prompt.")
    fits = [
        k
        for k in kinds
        if periods is not None or max_exam_period(codec, n_ctx, k, prepend_bos=prepend_bos) >= 2
    ]
    return [
        exam_prompts(
            codec,
            k,
            p,
            n_prompts=n_prompts,
            n_ctx=n_ctx,
            seed=seed,
            prepend_bos=prepend_bos,
            max_offset=max_offset,
            order_control=order_control,
        )
        for k in fits or kinds
        for p in _periods(codec, n_ctx, k, periods, prepend_bos, max_period)
    ]
