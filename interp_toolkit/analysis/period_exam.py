"""Two-repeat exams at every period: does the model copy the token after the earlier occurrence,
wherever the pattern sits and whatever the distance? (Single prompts:
:mod:`interp_toolkit.analysis.exam`; the pass rule and verdicts:
:mod:`interp_toolkit.analysis.exam_verdict`.)

A period-``p`` prompt is ``[BOS] prefix seg seg[:-1]`` and its target is ``seg[-1]``: ``seg`` is
``p`` distinct tokens, ``prefix`` a random number of random tokens (the offset, uniform over
``0..min(room, max_offset)``) that never contain a segment token, so the only way to the target
is to find the earlier occurrence of the last prompt token and copy what followed it
(induction), at a position that changes from prompt to prompt. Two token kinds
(:data:`TOKEN_KINDS`): ``letters`` (single-letter tokens ``' A'``..; the target is never the
alphabet's next letter after the token before it, so knowing the alphabet cannot pass) and
``random`` (random ids of the model's vocabulary, :func:`~.batches.default_token_range`). The
rows are built by :func:`~.batches.repeated_tokens` (the one builder of repeated-token batches),
all prompts of one period in one batch of equal length (the shorter prefixes are followed by
filler after the query, which a causal model never reads).

A prompt passes when the target's rank (:func:`~.exam.target_rank`, ties fail) is 0. Chance is
measured, not assumed: :func:`exam_with_chance` sits the same prompts on an untrained model of
the same architecture, and :func:`with_chance` pairs an exam with any other model's (the
study's 1-layer model), with an exact one-sided McNemar test on the shared prompts.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.analysis.batches import default_token_range, repeated_tokens
from interp_toolkit.analysis.exam import target_rank
from interp_toolkit.analysis.intervals import Interval, mcnemar_greater, wilson
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec

#: The token kinds an exam draws its segments from.
TOKEN_KINDS = ("letters", "random")
#: Prompts per period and token kind by default (a Wilson interval at 200/200 is [0.981, 1]).
N_PROMPTS = 200
#: The longest random prefix by default (a toy context of 32 gives less room than this).
MAX_OFFSET = 64
#: The test behind every "above chance": paired, on the same prompts.
CHANCE_TEST = "exact one-sided McNemar test on the same prompts"

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


@dataclass(frozen=True)
class ExamPrompts:
    """The prompts of one period and kind: ``tokens[i, :query[i] + 1]`` is prompt ``i`` (what
    follows the query is filler no causal model reads), ``target[i]`` its answer and
    ``offsets[i]`` how many random tokens precede the pattern."""

    kind: str
    period: int
    tokens: Int[torch.Tensor, "prompt pos"]
    query: Int[torch.Tensor, " prompt"]
    target: Int[torch.Tensor, " prompt"]
    offsets: Int[torch.Tensor, " prompt"]

    def digest(self) -> str:
        """What pairing two models' exams checks: the same prompts, token for token."""
        h = hashlib.sha1(f"{self.kind},{self.period}".encode())
        for t in (self.tokens, self.query, self.target):
            h.update(t.contiguous().numpy().tobytes())
        return h.hexdigest()[:16]


def _kind_seed(seed: int, kind: str, period: int) -> int:
    return int(np.random.SeedSequence([seed, TOKEN_KINDS.index(kind), period]).generate_state(1)[0])


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
) -> ExamPrompts:
    """``n_prompts`` prompts ``[BOS] prefix seg seg[:-1]`` of one kind and period; deterministic
    in ``(seed, kind, period)``. UserError when the period does not fit."""
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
    off = int(prepend_bos)
    room = min(max(0, max_offset), n_ctx - off - (2 * period - 1))
    low, high = default_token_range(codec)
    pool = letter_pool(codec) if kind == "letters" else None
    batch = repeated_tokens(
        n_prompts,
        period,
        low=low,
        high=min(high, int(codec.d_vocab)),
        bos_id=int(codec.bos_id) if prepend_bos and codec.bos_id is not None else None,
        prefix_max=room,
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
    rows = torch.arange(n_prompts)
    return ExamPrompts(
        kind=kind,
        period=period,
        tokens=tokens[:, :-1].contiguous(),  # the last column is only ever filler or a target
        query=starts + 2 * period - 2,
        target=tokens[rows, starts + period - 1],
        offsets=starts - off,
    )


class _Stop(Exception):
    """Ends a forward pass at the unembedding's input."""


def query_logits(
    model: torch.nn.Module,
    tokens: Int[torch.Tensor, "prompt pos"],
    query: Int[torch.Tensor, " prompt"],
) -> torch.Tensor:
    """The logits at each row's query position. A TransformerBridge is stopped at the
    unembedding's input and unembeds the query positions only (at a 1,024-token vocabulary that
    is half the cost of a 2-layer model's pass); any other model runs whole."""
    rows = torch.arange(tokens.shape[0])
    if "unembed.hook_in" not in getattr(model, "hook_dict", {}) or not hasattr(model, "unembed"):
        return model(tokens)[rows.to(tokens.device), query.to(tokens.device)]
    store: dict[str, torch.Tensor] = {}

    def grab(act: torch.Tensor, hook: Any) -> None:
        store["x"] = act[rows.to(act.device), query.to(act.device)]
        raise _Stop

    try:
        with model.hooks(fwd_hooks=[("unembed.hook_in", grab)]):
            model(tokens)
    except _Stop:
        pass
    return model.unembed(store["x"])


def exam_ranks(model: torch.nn.Module, prompts: ExamPrompts, d_vocab: int) -> list[int]:
    """The target's rank (:func:`~.exam.target_rank`) at each prompt's query position, in
    batched forward passes (about 64M positions x vocabulary entries of logits each)."""
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    n, length = prompts.tokens.shape
    per = max(1, (1 << 26) // max(1, length * d_vocab))
    ranks: list[int] = []
    for lo in range(0, n, per):
        sl = slice(lo, lo + per)
        with torch.no_grad():
            at = query_logits(model, prompts.tokens[sl].to(device), prompts.query[sl])
        ranks += [int(r) for r in target_rank(at.float().cpu(), prompts.target[sl])]
    return ranks


@dataclass(frozen=True)
class Chance:
    """Another model's pass count on the same prompts (an untrained model of the same
    architecture, or the study's 1-layer model), and the p-value of the examined model passing
    more often (:data:`CHANCE_TEST`)."""

    model: str
    passes: int
    n_prompts: int
    p_value: float

    @property
    def pass_rate(self) -> float:
        return self.passes / self.n_prompts

    def to_dict(self) -> dict[str, Any]:
        iv = wilson(self.passes, self.n_prompts)
        return {
            "model": self.model,
            "passes": self.passes,
            "n_prompts": self.n_prompts,
            "pass_rate": self.pass_rate,
            "wilson95": [iv.low, iv.high],
            "p_value": self.p_value,
            "test": CHANCE_TEST,
        }


@dataclass(frozen=True)
class PeriodExam:
    """One model's exam at one period and token kind: ``passes`` of ``n_prompts`` prompts had
    rank 0; ``ranks`` per prompt; ``offsets``: the (smallest, largest) prefix used; ``digest``:
    the prompts' (:meth:`ExamPrompts.digest`); ``chance``: other models on the same prompts."""

    period: int
    kind: str
    n_prompts: int
    passes: int
    median_rank: float
    offsets: tuple[int, int] = (0, 0)
    ranks: tuple[int, ...] = ()
    digest: str = ""
    chance: tuple[Chance, ...] = ()

    @property
    def pass_rate(self) -> float:
        return self.passes / self.n_prompts

    @property
    def interval(self) -> Interval:
        """The Wilson 95% interval of the pass rate."""
        return wilson(self.passes, self.n_prompts)

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.period)

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "period": self.period,
            "kind": self.kind,
            "n_prompts": self.n_prompts,
            "passes": self.passes,
            "pass_rate": self.pass_rate,
            "wilson95": [iv.low, iv.high],
            "median_rank": self.median_rank,
            "offsets": {"min": self.offsets[0], "max": self.offsets[1]},
            "chance": [c.to_dict() for c in self.chance],
        }


def _periods(
    codec: Codec, n_ctx: int, kind: str, periods: Sequence[int] | None, bos: bool, cap: int | None
) -> list[int]:
    longest = max_exam_period(codec, n_ctx, kind, prepend_bos=bos)
    if periods is None:
        longest = longest if cap is None else min(longest, cap)
        if longest < 2:
            raise UserError(f"no period fits the {kind} exam of this model (context {n_ctx}).")
        return list(range(2, longest + 1))
    bad = [p for p in periods if not 2 <= p <= longest]
    if bad:
        raise UserError(
            f"period(s) {', '.join(map(str, bad))} do not fit the {kind} exam of this model: use "
            f"2..{longest} (context {n_ctx}{' with BOS' if bos else ''})."
        )
    return [int(p) for p in periods]


def exam_by_period(
    model: torch.nn.Module,
    codec: Codec,
    *,
    periods: Sequence[int] | None = None,
    kinds: Sequence[str] = TOKEN_KINDS,
    n_prompts: int = N_PROMPTS,
    seed: int = 0,
    prepend_bos: bool = True,
    max_offset: int = MAX_OFFSET,
    max_period: int | None = None,
) -> list[PeriodExam]:
    """Two-repeat exams of every kind at every period (default: 2 .. :func:`max_exam_period` of
    the kind, or ``max_period`` if smaller), one batched forward pass per period and kind.
    ``model`` needs ``cfg.n_ctx`` and ``model(tokens) -> logits [batch, pos, vocab]``."""
    n_ctx = int(model.cfg.n_ctx)
    for kind in kinds:
        if kind not in TOKEN_KINDS:
            raise UserError(f"token kind {kind!r} is unknown: use {' or '.join(TOKEN_KINDS)}.")
    if n_prompts < 1:
        raise UserError(f"n_prompts={n_prompts} cannot work: use at least 1 prompt.")
    fits = [
        k
        for k in kinds
        if periods is not None or max_exam_period(codec, n_ctx, k, prepend_bos=prepend_bos) >= 2
    ]  # by default a kind the vocabulary cannot make (no letters) is left out
    plan = [
        (k, p)
        for k in fits or kinds
        for p in _periods(codec, n_ctx, k, periods, prepend_bos, max_period)
    ]
    out = []
    for kind, period in plan:
        prompts = exam_prompts(
            codec,
            kind,
            period,
            n_prompts=n_prompts,
            n_ctx=n_ctx,
            seed=seed,
            prepend_bos=prepend_bos,
            max_offset=max_offset,
        )
        ranks = exam_ranks(model, prompts, int(codec.d_vocab))
        out.append(
            PeriodExam(
                period=period,
                kind=kind,
                n_prompts=n_prompts,
                passes=sum(r == 0 for r in ranks),
                median_rank=float(statistics.median(ranks)),
                offsets=(int(prompts.offsets.min()), int(prompts.offsets.max())),
                ranks=tuple(ranks),
                digest=prompts.digest(),
            )
        )
    return out


def with_chance(
    exams: Sequence[PeriodExam], reference: Sequence[PeriodExam], name: str
) -> list[PeriodExam]:
    """``exams`` with ``reference`` (another model's exams) added as a chance level wherever the
    two sat the same prompts (same kind, period and prompt digest); the others are unchanged."""
    by_key: Mapping[tuple[str, int], PeriodExam] = {r.key: r for r in reference}
    out = []
    for e in exams:
        r = by_key.get(e.key)
        if r is None or r.digest != e.digest or len(r.ranks) != len(e.ranks) or not e.ranks:
            out.append(e)
            continue
        p = mcnemar_greater([x == 0 for x in e.ranks], [x == 0 for x in r.ranks])
        chance = Chance(name, r.passes, r.n_prompts, p)
        out.append(replace(e, chance=(*(c for c in e.chance if c.model != name), chance)))
    return out


def untrained_name(model: torch.nn.Module) -> str:
    cfg = model.cfg
    return f"untrained {int(cfg.n_layers)}-layer model (same architecture)"


def exam_with_chance(
    model: torch.nn.Module, codec: Codec, *, model_cfg: Any = None, **options: Any
) -> list[PeriodExam]:
    """:func:`exam_by_period` (``options``) on ``model``, with the same prompts on an untrained
    model of its architecture (seeded, :func:`~.untrained.untrained_models`) as its chance level;
    without one (an architecture that cannot be rebuilt), no chance level."""
    from interp_toolkit.analysis.untrained import untrained_models

    exams = exam_by_period(model, codec, **options)
    maker = untrained_models(model, model_cfg=model_cfg, n_models=1)  # type: ignore[arg-type]
    if maker is None:
        return exams
    twin = maker.make(maker.seeds[0])
    try:
        reference = exam_by_period(twin, codec, **options)
    finally:
        del twin
    return with_chance(exams, reference, untrained_name(model))
