"""Two-repeat exams at every period: prompts, the tie rule, and stubs with a known answer."""

from __future__ import annotations

import pytest
import torch

from interp_toolkit.analysis.period_exam import (
    exam_by_period,
    letter_pool,
    max_exam_period,
    period_exam_batch,
)
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import EOT_ID, CompactVocab, GPT2Codec, gpt2_encoding

DROPPED = (" Q", " z")  # letters the test vocabulary does not keep (they map to <unk>)


def _codec() -> CompactVocab:
    enc = gpt2_encoding()
    letters = [" " + chr(c) for c in [*range(65, 91), *range(97, 123)]]
    kept = [enc.encode_ordinary(s)[0] for s in letters if s not in DROPPED]
    return CompactVocab([EOT_ID, *kept, *[i for i in range(100, 140) if i not in kept]])


class Stub(torch.nn.Module):
    """Anything with ``cfg.n_ctx`` and ``forward(tokens) -> logits`` can sit an exam.

    ``rule(row) -> logits`` gives the last position's logits of one prompt row; other positions
    are zeros. Counts forward calls.
    """

    def __init__(self, d_vocab: int, n_ctx: int, rule) -> None:
        super().__init__()
        self.cfg = type("Cfg", (), {"n_ctx": n_ctx})()
        self.d_vocab, self.rule, self.calls = d_vocab, rule, 0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.zeros(*tokens.shape, self.d_vocab)
        for b, row in enumerate(tokens.tolist()):
            out[b, -1] = self.rule(row)
        return out


def _induction(d_vocab: int, tie_with: int | None = None):
    """Logit 1 on the token after the previous occurrence of the last token (perfect induction);
    ``tie_with``: that id gets the same logit (a tie)."""

    def rule(row: list[int]) -> torch.Tensor:
        logits = torch.zeros(d_vocab)
        last = row[-1]
        j = max(i for i in range(len(row) - 1) if row[i] == last)
        logits[row[j + 1]] = 1.0
        if tie_with is not None and tie_with != row[j + 1]:
            logits[tie_with] = 1.0
        return logits

    return rule


def test_letter_pool_keeps_only_single_kept_tokens():
    codec = _codec()
    pool = letter_pool(codec)
    assert len(pool.upper) == 25 and len(pool.ids) == 50
    assert codec.unk_id not in pool.ids and len(set(pool.ids)) == 50
    assert codec.str_tokens(pool.upper)[:3] == [" A", " B", " C"]
    assert pool.successor[codec.encode(" A")[0]] == codec.encode(" B")[0]
    assert codec.encode(" P")[0] not in pool.successor  # its successor ' Q' is not kept
    assert pool.for_period(25) == pool.upper and pool.for_period(26) == pool.ids


def test_longest_period_fits_context_and_pool():
    pool = letter_pool(_codec())
    assert max_exam_period(pool, 32) == 16  # [BOS] + 2*16 - 1 = 32 tokens
    assert max_exam_period(pool, 31) == 15
    assert max_exam_period(pool, 33, prepend_bos=False) == 17
    assert max_exam_period(letter_pool(GPT2Codec()), 1024) == 52  # GPT-2: capped by the letters


@pytest.mark.parametrize("period", [2, 3, 16, 25, 26, 50])
def test_prompt_construction(period):
    codec = _codec()
    pool = letter_pool(codec)
    tokens, targets = period_exam_batch(pool, period, n_prompts=40, bos_id=codec.bos_id, seed=3)
    assert tokens.shape == (40, 2 * period)
    assert (tokens[:, 0] == codec.bos_id).all()
    allowed = set(pool.for_period(period))
    for row, target in zip(tokens.tolist(), targets.tolist(), strict=True):
        seg = row[1 : 1 + period]
        assert len(set(seg)) == period and set(seg) <= allowed
        assert row[1 + period :] == seg[:-1] and target == seg[-1]
        assert pool.successor.get(seg[-2]) != target
        assert not codec.contains_unk(row)
    again, _ = period_exam_batch(pool, period, n_prompts=40, bos_id=codec.bos_id, seed=3)
    other, _ = period_exam_batch(pool, period, n_prompts=40, bos_id=codec.bos_id, seed=4)
    assert torch.equal(tokens, again) and not torch.equal(tokens, other)


def test_alphabet_bigrams_cannot_pass():
    codec = _codec()
    pool = letter_pool(codec)

    def next_letter(row: list[int]) -> torch.Tensor:
        logits = torch.zeros(codec.d_vocab)
        if row[-1] in pool.successor:
            logits[pool.successor[row[-1]]] = 1.0
        return logits

    rows = exam_by_period(Stub(codec.d_vocab, 32, next_letter), codec, n_prompts=30)
    assert [r.pass_rate for r in rows] == [0.0] * 15


def test_constant_logits_pass_nothing():
    codec = _codec()
    stub = Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab))
    rows = exam_by_period(stub, codec, n_prompts=30)
    assert [r.period for r in rows] == list(range(2, 17))
    assert all(r.pass_rate == 0.0 and r.median_rank == codec.d_vocab - 1 for r in rows)
    assert stub.calls == 15  # one batched forward pass per period


def test_perfect_induction_passes_everything():
    codec = _codec()
    rows = exam_by_period(Stub(codec.d_vocab, 32, _induction(codec.d_vocab)), codec)
    assert all(r.pass_rate == 1.0 and r.median_rank == 0.0 for r in rows)
    assert rows[0].to_dict() == {
        "period": 2,
        "pass_rate": 1.0,
        "median_rank": 0.0,
        "n_prompts": 30,
        "chance": 0.5,
    }
    assert rows[-1].chance == 1 / 16


def test_ties_are_failures():
    codec = _codec()
    tie = codec.unk_id - 1  # a filler id, never a target: it ties with every target
    rows = exam_by_period(
        Stub(codec.d_vocab, 32, _induction(codec.d_vocab, tie_with=tie)),
        codec,
        periods=[4, 9],
        n_prompts=10,
    )
    assert [(r.pass_rate, r.median_rank, r.ranks) for r in rows] == [(0.0, 1.0, (1,) * 10)] * 2


def test_bad_periods_name_the_range():
    codec = _codec()
    stub = Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab))
    with pytest.raises(UserError, match=r"2\.\.16"):
        exam_by_period(stub, codec, periods=[17])
    with pytest.raises(UserError, match="2..16"):
        exam_by_period(stub, codec, periods=[1])
    with pytest.raises(UserError, match="n_prompts"):
        exam_by_period(stub, codec, n_prompts=0)
