"""Two-repeat exams at every period: prompts at random offsets, two token kinds, the one rank
(ties fail), measured chance levels, and stubs with a known answer."""

from __future__ import annotations

import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.exams.periods import exam_by_period, with_chance
from interp_toolkit.exams.prompts import (
    MIN_OFFSETS,
    TOKEN_KINDS,
    exam_prompts,
    letter_pool,
    max_exam_period,
    offset_positions,
    roomy_exam_period,
)
from interp_toolkit.exams.single import run_exam, target_rank
from interp_toolkit.text.codecs import EOT_ID, CompactVocab, GPT2Codec, gpt2_encoding

DROPPED = (" Q", " z")  # letters the test vocabulary does not keep (they map to <unk>)


def _codec() -> CompactVocab:
    enc = gpt2_encoding()
    letters = [" " + chr(c) for c in [*range(65, 91), *range(97, 123)]]
    kept = [enc.encode_ordinary(s)[0] for s in letters if s not in DROPPED]
    return CompactVocab([EOT_ID, *kept, *[i for i in range(100, 140) if i not in kept]])


class Stub(torch.nn.Module):
    """Anything with ``cfg.n_ctx`` and ``forward(tokens) -> logits`` can sit an exam.

    ``rule(prefix) -> logits``: the logits at the last position of ``prefix`` (what a causal
    model sees at that position). Counts forward calls."""

    def __init__(self, d_vocab: int, n_ctx: int, rule) -> None:
        super().__init__()
        self.cfg = type("Cfg", (), {"n_ctx": n_ctx})()
        self.d_vocab, self.rule, self.calls = d_vocab, rule, 0

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = torch.zeros(*tokens.shape, self.d_vocab)
        for b, row in enumerate(tokens.tolist()):
            for q in range(len(row)):
                out[b, q] = self.rule(row[: q + 1])
        return out


def _induction(d_vocab: int, tie_with: int | None = None):
    """Logit 1 on the token after the previous occurrence of the last token (perfect induction);
    ``tie_with``: that id gets the same logit (a tie)."""

    def rule(row: list[int]) -> torch.Tensor:
        logits = torch.zeros(d_vocab)
        last = row[-1]
        earlier = [i for i in range(len(row) - 1) if row[i] == last]
        if earlier:
            logits[row[earlier[-1] + 1]] = 1.0
            if tie_with is not None and tie_with != row[earlier[-1] + 1]:
                logits[tie_with] = 1.0
        return logits

    return rule


def _fixed_position(d_vocab: int):
    """The old exam's shortcut: the pattern starts right after BOS, so at query q the target
    sits at position (q + 1) // 2. Copies that token, whatever the prompt."""

    def rule(row: list[int]) -> torch.Tensor:
        logits = torch.zeros(d_vocab)
        logits[row[len(row) // 2]] = 1.0
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
    codec = _codec()
    assert max_exam_period(codec, 32) == 16  # [BOS] + 2*16 - 1 = 32 tokens
    assert max_exam_period(codec, 31) == 15
    assert max_exam_period(codec, 33, prepend_bos=False) == 17
    assert max_exam_period(codec, 200, "random") == 90  # 91 ids below <unk>, less BOS
    assert max_exam_period(GPT2Codec(), 1024) == 52  # GPT-2: capped by the letters
    assert max_exam_period(GPT2Codec(), 1024, "random") == 512


@pytest.mark.parametrize("kind", TOKEN_KINDS)
@pytest.mark.parametrize("period", [2, 3, 9, 16])
def test_prompt_construction(kind, period):
    codec = _codec()
    pool = letter_pool(codec)
    p = exam_prompts(codec, kind, period, n_prompts=60, n_ctx=32, seed=3)
    assert p.tokens.shape == (60, 32) and (p.tokens[:, 0] == codec.bos_id).all()
    room = 32 - 1 - (2 * period - 1)
    offsets = p.offsets.tolist()
    assert min(offsets) >= 0 and max(offsets) <= room
    if room >= 4:
        assert len(set(offsets)) > 2  # the pattern does not always start right after BOS
    for i, row in enumerate(p.tokens.tolist()):
        s, q = 1 + offsets[i], int(p.query[i])
        seg, prefix = row[s : s + period], row[1:s]
        assert q == s + 2 * period - 2 and row[s + period : q + 1] == seg[:-1]
        assert int(p.target[i]) == seg[-1] and len(set(seg)) == period
        assert not set(prefix) & set(seg) and codec.bos_id not in row[1:]
        assert not codec.contains_unk(row[: q + 1])
        if kind == "letters":
            assert set(seg) <= set(pool.ids) and pool.successor.get(seg[-2]) != seg[-1]
    again = exam_prompts(codec, kind, period, n_prompts=60, n_ctx=32, seed=3)
    other = exam_prompts(codec, kind, period, n_prompts=60, n_ctx=32, seed=4)
    assert again.digest() == p.digest() and other.digest() != p.digest()


def test_alphabet_bigrams_cannot_pass():
    codec = _codec()
    pool = letter_pool(codec)

    def next_letter(row: list[int]) -> torch.Tensor:
        logits = torch.zeros(codec.d_vocab)
        if row[-1] in pool.successor:
            logits[pool.successor[row[-1]]] = 1.0
        return logits

    rows = exam_by_period(
        Stub(codec.d_vocab, 32, next_letter), codec, kinds=("letters",), n_prompts=20
    )
    assert [r.passes for r in rows] == [0] * 7


def test_constant_logits_pass_nothing():
    codec = _codec()
    stub = Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab))
    rows = exam_by_period(stub, codec, n_prompts=10)
    # a context of 32 leaves MIN_OFFSETS start positions up to period 8 (offsets 0..16)
    assert [(r.kind, r.period) for r in rows] == [(k, p) for k in TOKEN_KINDS for p in range(2, 9)]
    assert all(r.passes == 0 and r.median_rank == codec.d_vocab - 1 for r in rows)
    assert stub.calls == 1  # 140 prompts of 32 tokens: one batched forward pass


def test_perfect_induction_passes_everything_and_reports_the_interval():
    codec = _codec()
    rows = exam_by_period(
        Stub(codec.d_vocab, 32, _induction(codec.d_vocab)), codec, periods=[2, 5], n_prompts=40
    )
    assert all(r.pass_rate == 1.0 and r.median_rank == 0.0 for r in rows)
    d = rows[0].to_dict()
    assert (d["period"], d["kind"], d["n_prompts"], d["passes"]) == (2, "letters", 40, 40)
    assert d["wilson95"][1] == 1.0 and abs(d["wilson95"][0] - 0.9124) < 1e-4
    assert d["offsets"]["min"] >= 0 and d["offsets"]["max"] == 28 and d["chance"] == []


def test_every_default_period_has_room_for_sixteen_offsets():
    """Issue 30: the exams' offsets shrank to 0 at periods 14-16 (context 32), where a model
    copying from a fixed position could pass. Every default period now draws its prompts' starts
    from at least 16 positions, stated per period; a longer period asked for explicitly says it
    has fewer."""
    codec = _codec()
    assert MIN_OFFSETS == 16
    assert roomy_exam_period(codec, 32) == 8  # [BOS] + 15 + 16 offsets: 8 has 17, 9 has 15
    assert offset_positions(32, 8) == 17 and offset_positions(32, 9) == 15
    assert offset_positions(32, 16) == 1 and offset_positions(32, 2, max_offset=5) == 6
    assert (
        roomy_exam_period(GPT2Codec(), 1024) == 52 and roomy_exam_period(codec, 256, "random") == 90
    )
    stub = Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab))
    rows = exam_by_period(stub, codec, n_prompts=200)
    for r in rows:
        d = r.to_dict()["offsets"]
        assert d["positions"] >= 16 and d["roomy"] and d["at_least"] == 16, (r.period, d)
        assert d["min"] == 0 and d["max"] == d["positions"] - 1  # 200 prompts reach both ends
        prompts = exam_prompts(codec, r.kind, r.period, n_prompts=200, n_ctx=32)
        assert len(set(prompts.offsets.tolist())) >= 16
    (late,) = exam_by_period(stub, codec, periods=[15], kinds=("letters",), n_prompts=20)
    assert late.to_dict()["offsets"] == {
        "min": 0, "max": 2, "positions": 3, "at_least": 16, "roomy": False,
    }  # fmt: skip


def test_a_fixed_position_shortcut_fails_at_random_offsets():
    """Copying from where the old exam put the target passes only the prompts whose pattern
    starts right after BOS."""
    codec = _codec()
    rows = exam_by_period(
        Stub(codec.d_vocab, 32, _fixed_position(codec.d_vocab)), codec, periods=[3, 8], n_prompts=40
    )
    for r in rows:
        prompts = exam_prompts(codec, r.kind, r.period, n_prompts=40, n_ctx=32)
        at_bos = int((prompts.offsets == 0).sum())
        assert r.passes == at_bos < 6, r.to_dict()


def test_ties_fail_in_every_exam():
    """One rank (exams/single.py target_rank): another token with the target's logit ranks it 1,
    in the period exams and in a single-prompt exam alike."""
    logits = torch.tensor([[0.0, 2.0, 2.0, 1.0], [0.0, 3.0, 2.0, 1.0]])
    assert target_rank(logits, torch.tensor([1, 1])).tolist() == [1, 0]
    assert target_rank(torch.zeros(5), torch.tensor(2)).item() == 4
    codec = _codec()
    tie = codec.unk_id - 1  # a filler id, never a target: it ties with every target
    rows = exam_by_period(
        Stub(codec.d_vocab, 32, _induction(codec.d_vocab, tie_with=tie)),
        codec,
        kinds=("letters",),
        periods=[4, 9],
        n_prompts=10,
    )
    assert [(r.passes, r.median_rank, r.ranks) for r in rows] == [(0, 1.0, (1,) * 10)] * 2


def test_single_prompt_exam_ranks_ties_against_the_target():
    """A model whose logits are all equal (no unembedding) ranks every target last and passes
    no exam (ties counted for the target would rank it 0, a pass)."""
    from interp_toolkit.models.build import ModelConfig, build_model

    codec = _codec()
    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=32, d_vocab=codec.d_vocab)
    model = build_model(cfg, codec=codec)
    with torch.no_grad():
        model.unembed.original_component.weight.zero_()
        if model.unembed.original_component.bias is not None:
            model.unembed.original_component.bias.zero_()
    result = run_exam(model, codec, " A B A", " B")
    assert result.rank == codec.d_vocab - 1 and not result.passed


def test_chance_is_another_model_on_the_same_prompts():
    codec = _codec()
    good = exam_by_period(
        Stub(codec.d_vocab, 32, _induction(codec.d_vocab)), codec, periods=[3, 7], n_prompts=30
    )
    flat = exam_by_period(
        Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab)),
        codec,
        periods=[3, 7],
        n_prompts=30,
    )
    paired = with_chance(good, flat, "flat model")
    for e in paired:
        (c,) = e.chance
        assert (c.model, c.passes, c.n_prompts) == ("flat model", 0, 30)
        assert abs(c.p_value - 0.5**30) < 1e-15  # 30 discordant prompts, all for the good model
    # prompts of another seed are not the same prompts: no pairing
    other = exam_by_period(
        Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab)),
        codec,
        periods=[3, 7],
        n_prompts=30,
        seed=1,
    )
    assert all(e.chance == () for e in with_chance(good, other, "flat model"))


def test_bad_periods_name_the_range():
    codec = _codec()
    stub = Stub(codec.d_vocab, 32, lambda row: torch.zeros(codec.d_vocab))
    with pytest.raises(UserError, match=r"2\.\.16"):
        exam_by_period(stub, codec, periods=[17])
    with pytest.raises(UserError, match="2..16"):
        exam_by_period(stub, codec, periods=[1])
    with pytest.raises(UserError, match="n_prompts"):
        exam_by_period(stub, codec, n_prompts=0)
    with pytest.raises(UserError, match="token kind"):
        exam_by_period(stub, codec, kinds=("digits",))
    assert [r.period for r in exam_by_period(stub, codec, max_period=4, n_prompts=2)] == [
        2,
        3,
        4,
    ] * 2


@pytest.mark.parametrize("circuit", ["k", "q"])
def test_hand_built_circuits_pass_every_exam_and_their_controls_none(circuit):
    """The K- and Q-composition circuits (tests/planting/circuits.py) induce at any offset and
    for any token; their controls (layer 0's output cut) copy every token in context alike, so
    the target (in context once, the other segment tokens twice) never ranks first."""
    from planting import letters_codec
    from planting.circuits import CIRCUITS, control_model

    codec = letters_codec()
    model = CIRCUITS[circuit][0]()
    rows = exam_by_period(model, codec, n_prompts=24)
    assert len(rows) == 14 and all(r.passes == 24 for r in rows), [r.to_dict() for r in rows]
    assert max(r.offsets[1] for r in rows) == 28  # period 2: up to 28 random tokens first
    control = exam_by_period(control_model(circuit), codec, n_prompts=24)
    assert all(r.passes == 0 for r in control), [r.to_dict() for r in control]


def test_query_logits_unembed_only_the_query_positions():
    from planting import letters_codec
    from planting.circuits import k_composition_model

    from interp_toolkit.exams.periods import query_logits

    model = k_composition_model()
    p = exam_prompts(letters_codec(), "random", 5, n_prompts=6, n_ctx=32)
    with torch.no_grad():
        full = model(p.tokens)[torch.arange(6), p.query]
        assert torch.allclose(query_logits(model, p.tokens, p.query), full, atol=1e-5)
