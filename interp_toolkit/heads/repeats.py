"""Repeated-random-token batches: the probe every head score is measured on.

Each row is laid out as::

    [BOS] prefix(p_i tokens) seg seg ... seg (n_repeats times) filler(prefix_max - p_i tokens)

``seg`` is ``period`` random tokens; ``p_i`` is drawn uniformly from ``0..prefix_max`` per row, so
the repeats start at a different offset in every row (a head cannot "solve" the stripe from
positions alone) while every row has the same length. Tokens of a row are distinct whenever the id
range allows it (the segment always when ``high - low >= period``; the prefix/filler too when
``high - low >= period + prefix_max``), so the only repeats are the ones we put there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.text.codecs import PRINTABLE, Codec

#: GPT-2 ids used for random tokens: skips the ~1000 most frequent merges (bytes, common words)
#: and the rare tail above 20000 (TL's ``induction_loss`` uses 100..20000; Olsson et al. exclude
#: "the most common and the least common tokens").
GPT2_TOKEN_RANGE = (1000, 20000)


@dataclass(frozen=True)
class RepeatedTokens(Jsonable):
    """A batch of repeated random tokens and where the repeats are; its JSON describes it (no
    tokens).

    ``starts[i]`` is the position of the first token of the first repeat in row ``i``; repeat
    ``r`` (0-based) covers positions ``starts[i] + r*period ... starts[i] + (r+1)*period - 1``.
    ``repeats=False`` marks a null batch: same layout, but no token occurs twice in a row.
    """

    tokens: Int[torch.Tensor, "batch pos"] = field(metadata=json_field(skip=True))
    period: int
    n_repeats: int
    starts: Int[torch.Tensor, " batch"] = field(metadata=json_field(skip=True))
    has_bos: bool = field(metadata=json_field(key="bos"))
    low: int = field(metadata=json_field(skip=True))
    high: int = field(metadata=json_field(skip=True))
    prefix_max: int = 0
    seed: int = 0
    repeats: bool = True

    json_extra = ("n_seqs", "seq_len", "token_range")
    json_order = ("n_seqs", "seq_len", "period", "n_repeats", "prefix_max", "bos")
    json_order += ("token_range", "seed", "repeats")

    @property
    def n_seqs(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def token_range(self) -> tuple[int, int]:
        return self.low, self.high


def default_token_range(codec: Codec) -> tuple[int, int]:
    """The default ``[low, high)`` id range for random tokens of a codec.

    Compact vocabularies: every id below ``<unk>`` (``[0, unk_id)``; the BOS id is skipped by
    :func:`repeated_tokens` itself). GPT-2 (no ``<unk>``): :data:`GPT2_TOKEN_RANGE`. Bytes: the
    printable ASCII bytes (:data:`~interp_toolkit.text.codecs.PRINTABLE`), what text is made of.
    A Hugging Face tokenizer: its ordinary ids (``TokenizerCodec.token_range``).
    """
    own = getattr(codec, "token_range", None)
    if own is not None:
        return own
    if codec.store == "bytes":
        return PRINTABLE
    if codec.unk_id is not None:
        return 0, int(codec.unk_id)
    d_vocab = int(codec.d_vocab)
    # a GPT-2-like codec with a small vocabulary: every id
    return (0, d_vocab) if d_vocab < GPT2_TOKEN_RANGE[1] else GPT2_TOKEN_RANGE


def _candidates(low: int, high: int, bos_id: int | None) -> torch.Tensor:
    ids = torch.arange(low, high, dtype=torch.long)
    return ids if bos_id is None else ids[ids != bos_id]


def _check(n_seqs: int, period: int, n_repeats: int, low: int, high: int, prefix_max: int) -> None:
    if n_seqs < 1:
        raise UserError(f"n_seqs={n_seqs} cannot work: use at least 1 sequence.")
    if period < 2:
        raise UserError(f"period={period} cannot work: the repeated segment needs >= 2 tokens.")
    if n_repeats < 2:
        raise UserError(f"n_repeats={n_repeats} cannot work: a segment must occur at least twice.")
    if prefix_max < 0:
        raise UserError(f"prefix_max={prefix_max} cannot work: use 0 or more.")
    if high - low < 2:
        raise UserError(f"token range [{low}, {high}) is too small: give at least 2 ids.")


def _rows(
    n_seqs: int, n_tokens: int, cand: torch.Tensor, gen: torch.Generator, distinct: bool
) -> torch.Tensor:
    """``n_seqs`` rows of ``n_tokens`` ids from ``cand``; distinct within a row when asked."""
    if distinct and len(cand) >= n_tokens:
        idx = torch.stack(
            [torch.randperm(len(cand), generator=gen)[:n_tokens] for _ in range(n_seqs)]
        )
    else:
        idx = torch.randint(0, len(cand), (n_seqs, n_tokens), generator=gen)
    return cand[idx]


def repeated_tokens(
    n_seqs: int,
    period: int,
    *,
    n_repeats: int = 2,
    low: int,
    high: int,
    bos_id: int | None,
    prefix_max: int = 0,
    seed: int = 0,
    segment_ids: Sequence[int] | None = None,
) -> RepeatedTokens:
    """``n_seqs`` rows of ``[BOS?] prefix seg×n_repeats filler`` with random ids in ``[low, high)``.

    Ids equal to ``bos_id`` are never drawn. Deterministic in ``seed`` (a private generator; the
    global RNG is untouched). ``segment_ids``: draw each segment (distinct ids) from these instead,
    and the prefix and filler from ``[low, high)`` without them, so that a segment token occurs in
    a row only where the segment repeats (the exams' letters).
    """
    _check(n_seqs, period, n_repeats, low, high, prefix_max)
    cand = _candidates(low, high, bos_id)
    gen = rng(seed, "repeated_tokens")
    prefix_len = torch.randint(0, prefix_max + 1, (n_seqs,), generator=gen)
    if segment_ids is None:
        # period + prefix_max distinct ids per row: the segment, then prefix+filler.
        fresh = _rows(n_seqs, period + prefix_max, cand, gen, distinct=True)
        seg, extra = fresh[:, :period], fresh[:, period:]
    else:
        pool = torch.as_tensor(list(segment_ids), dtype=torch.long)
        if len(pool) < period:
            raise UserError(f"period {period} needs {period} segment ids; {len(pool)} were given.")
        seg = _rows(n_seqs, period, pool, gen, distinct=True)
        rest = cand[~torch.isin(cand, pool)]
        if len(rest) < 1:
            raise UserError("no id is left for the prefix once the segment ids are taken out.")
        extra = _rows(n_seqs, prefix_max, rest, gen, distinct=True)
    has_bos = bos_id is not None
    off = int(has_bos)
    tokens = torch.full((n_seqs, off + prefix_max + n_repeats * period), int(bos_id or 0))
    for i, p in enumerate(prefix_len.tolist()):
        tokens[i, off:] = torch.cat([extra[i, :p], seg[i].repeat(n_repeats), extra[i, p:]])
    return RepeatedTokens(
        tokens=tokens,
        period=period,
        n_repeats=n_repeats,
        starts=prefix_len + off,
        has_bos=has_bos,
        low=low,
        high=high,
        prefix_max=prefix_max,
        seed=seed,
    )


def non_repeating_like(batch: RepeatedTokens, *, seed: int) -> RepeatedTokens:
    """The no-repeat control batch: the layout of ``batch`` (length, BOS, starts, period) with fresh
    random ids, distinct within each row whenever the id range is at least the row length, so the
    induction/duplicate stripes carry no signal."""
    n_seqs, length = batch.tokens.shape
    off = int(batch.has_bos)
    bos_id = int(batch.tokens[0, 0]) if batch.has_bos else None
    cand = _candidates(batch.low, batch.high, bos_id)
    gen = rng(seed, "no_repeat_control")
    body = _rows(n_seqs, length - off, cand, gen, distinct=True)
    tokens = batch.tokens.clone()
    tokens[:, off:] = body
    return replace(batch, tokens=tokens, starts=batch.starts.clone(), seed=seed, repeats=False)


def default_layout(n_ctx: int, *, n_repeats: int = 2, has_bos: bool = True) -> tuple[int, int]:
    """``(period, prefix_max)`` that fit a context of ``n_ctx``: prefix up to n_ctx/8 (at most 16),
    period up to 50 (ARENA's choice) filling the rest."""
    prefix_max = min(16, n_ctx // 8)
    room = n_ctx - int(has_bos) - prefix_max
    period = min(50, room // n_repeats)
    if period < 2:
        raise UserError(
            f"a context of {n_ctx} tokens is too short for {n_repeats} repeats: "
            "use a model with n_ctx >= 8 or fewer repeats."
        )
    return period, prefix_max


def repeated_batch(
    codec: Codec,
    d_vocab: int,
    n_seqs: int,
    period: int,
    *,
    n_repeats: int = 2,
    prefix_max: int = 0,
    seed: int = 0,
    token_range: tuple[int, int] | None = None,
) -> RepeatedTokens:
    """A repeated-token batch for a model of ``d_vocab`` ids read through ``codec``: ``[BOS] prefix seg×n filler``
    with ids from ``token_range`` (default :func:`default_token_range`, capped at ``d_vocab``)."""
    low, high = token_range or default_token_range(codec)
    return repeated_tokens(
        n_seqs,
        period,
        n_repeats=n_repeats,
        low=low,
        high=min(high, d_vocab),
        bos_id=codec.bos_id,
        prefix_max=prefix_max,
        seed=seed,
    )


def default_probe(codec: Codec, n_ctx: int, *, n_seqs: int = 32, seed: int = 0) -> RepeatedTokens:
    """The standard probe for a model: ``[BOS] prefix x x`` in :func:`default_layout` with ids
    from :func:`default_token_range` (what training logs and the study's checks use)."""
    period, prefix_max = default_layout(n_ctx)
    return repeated_batch(codec, codec.d_vocab, n_seqs, period, prefix_max=prefix_max, seed=seed)


def _longest_repeat(
    row: list[int], period: int, first: int, unk_id: int | None = None
) -> tuple[int, int]:
    """(length, first query) of the longest stretch of queries ``q >= first + period`` with
    ``row[q] == row[q - period]`` (``<unk>`` never matches, not even itself); (0, 0) when there
    is none."""
    best, best_q, run = (0, 0), 0, 0
    for q in range(first + period, len(row)):
        same = row[q] == row[q - period] and row[q] != unk_id
        run = run + 1 if same else 0
        if run == 1:
            best_q = q
        if run > best[0]:
            best = (run, best_q)
    return best


#: The shortest span the periodic reading infers: at period 2 the induction key is the token
#: before the query, so a previous-token head would read as an induction head.
MIN_SPAN = 3


def whole_period(
    tokens: Int[torch.Tensor, "batch pos"], *, bos_id: int | None, unk_id: int | None = None
) -> int | None:
    """The period ``p`` of a prompt that is, row by row and as a whole, a span of at least
    :data:`MIN_SPAN` *distinct* tokens followed by itself (``seg seg``, more copies, or a last
    copy cut short; a leading BOS aside), so that every repeated token has exactly one earlier
    occurrence, one period back; None for any other prompt (a run of one token, ``'    '``, is
    no span: its tokens are not distinct; ``<unk>`` is never part of one)."""
    found = set()
    for row in tokens.tolist():
        body = row[1:] if bos_id is not None and row and row[0] == bos_id else row
        p = next((p for p in range(1, len(body) // 2 + 1) if _repeats_with(body, p)), None)
        span = body[:p] if p else []
        if p is None or p < MIN_SPAN or len(set(span)) < p or unk_id in span:
            return None
        found.add(p)
    return found.pop() if len(found) == 1 else None


def _repeats_with(body: list[int], p: int) -> bool:
    return all(body[q] == body[q - p] for q in range(p, len(body)))


def prompt_probe(
    tokens: Int[torch.Tensor, "batch pos"],
    *,
    bos_id: int | None,
    period: int | None = None,
    unk_id: int | None = None,
) -> RepeatedTokens:
    """A probe from your own tokens: where each row repeats, found from the tokens themselves.

    A row repeats with period ``p`` where ``row[q] == row[q - p]`` for at least ``p`` queries in a
    row (one whole repeat). Without ``period``, each row's period is the one with the longest such
    stretch (the shortest on a tie); every row must then agree. The repeats start one period
    before the stretch; trailing tokens that do not complete a repeat are read as filler. Rows
    start with BOS when their first token is ``bos_id``. UserError when a row does not repeat.
    ``unk_id``: the vocabulary's ``<unk>``, never a match (a run of ``<unk>`` is not a span
    followed by itself: it is text the vocabulary could not read).
    """
    rows = [[int(t) for t in row] for row in tokens.tolist()]
    has_bos = bos_id is not None and all(r[0] == bos_id for r in rows)
    first = int(has_bos)
    found: list[tuple[int, int, int]] = []  # (period, start, n_repeats) per row
    for i, row in enumerate(rows):
        tries = [period] if period is not None else range(2, (len(row) - first) // 2 + 1)
        runs = [(p, *_longest_repeat(row, p, first, unk_id)) for p in tries if p >= 2]
        fits = [(n, p, q0) for p, n, q0 in runs if n >= p]
        if not fits:
            at = f" with period {period}" if period is not None else ""
            raise UserError(
                f"row {i} of the prompt has no repeated segment{at} (a span of 2 or more tokens "
                "followed by itself): repeat a span, e.g. 'A B C D A B C D'"
                + (", or pass another period." if period is not None else ", or pass period=.")
            )
        n, p, q0 = max(fits, key=lambda f: (f[0], -f[1]))  # the longest, then the shortest p
        found.append((p, q0 - p, 1 + n // p))
    periods = {p for p, _, _ in found}
    if len(periods) > 1:
        raise UserError(
            f"the rows repeat with different periods {sorted(periods)}: pass period= to read "
            "them all with one."
        )
    return RepeatedTokens(
        tokens=tokens.long(),
        period=found[0][0],
        n_repeats=min(n for _, _, n in found),
        starts=torch.tensor([s for _, s, _ in found], dtype=torch.long),
        has_bos=has_bos,
        low=int(tokens.min()),
        high=int(tokens.max()) + 1,
    )
