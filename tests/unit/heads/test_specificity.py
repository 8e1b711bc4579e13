"""The specificity test: the sign-flip statistics by hand, planted heads that must (or must not)
get a role, and tests that fail on a wrong definition (a null that pools heads, a
Benjamini-Hochberg that ignores the smallest attainable p)."""

from __future__ import annotations

import math

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec
from planting import letters_codec
from planting.heads import PLANTED, SPLIT, expected_roles, planted_model, split_model, split_roles

from interp_toolkit.heads import specificity
from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import SCORE_KINDS, HeadId, Stripe
from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.heads.specificity import Pair, bh_reach, draws_for, sign_flip_p
from interp_toolkit.models.build import ModelConfig, build_model

# ----------------------------------------------------------------------------- statistics


def test_sign_flip_p_by_hand():
    """Three rows with difference 1 each: the observed sum 3 is reached only when no sign flips,
    1 draw in 8; every difference 0 gives p = 1 (a tie counts against the head)."""
    signs = specificity._signs(40_000, 3, seed=1)
    p = sign_flip_p(torch.tensor([[1.0, 0.0, -1.0]] * 3), signs)
    n = signs.shape[0]
    assert abs(float(p[0]) - 1 / 8) < 4 * math.sqrt(1 / 8 * 7 / 8 / n)
    assert float(p[1]) == 1.0
    assert float(p[2]) == 1.0  # all three rows below the rival: every draw is >= -3
    # rows 2, 1, 1: the sum 4 is beaten only by (+,+,+) = 4 and (+,+,-)... enumerate all 8
    delta = torch.tensor([2.0, 1.0, 1.0])
    draws = [sum(s * d for s, d in zip(ss, delta.tolist(), strict=True)) for ss in _all_signs(3)]
    want = sum(d >= 4 for d in draws) / 8
    got = float(sign_flip_p(delta[:, None], signs)[0])
    assert abs(got - want) < 4 * math.sqrt(want * (1 - want) / n)


def _all_signs(n: int) -> list[tuple[int, ...]]:
    return [tuple(1 if (i >> b) & 1 else -1 for b in range(n)) for i in range(2**n)]


def test_the_rival_test_holds_its_level_on_a_skewed_null():
    """At the boundary of "key = 2 x rival" nothing makes a row's difference symmetric. Here the
    key holds 1 and the rival Exp(1) / 2 in every row (difference 1 - Exp(1): mean 0, skew -2,
    now and then a rival takes much of the attention). Over 2,000 nulls of 64 rows the sign flip,
    which assumes symmetry, rejects 8.4% at nominal 5%; the rival comparison (``Pair.of``: the
    studentized bootstrap) 5.5%; with the skew the other way, 3.3% against 4.7%."""
    from interp_toolkit.heads.scorer import RowPair
    from interp_toolkit.heads.specificity import _resamples, bootstrap_t_p, specificity_tests

    gen = torch.Generator().manual_seed(0)
    x = torch.empty(64, 1, 2000, dtype=torch.float64).exponential_(1.0, generator=gen)
    counts = torch.ones(64, dtype=torch.float64)
    for target, rival, flip_band in (
        (torch.ones_like(x), x / 2, (0.07, 1.0)),
        (x, torch.full_like(x, 0.5), (0.0, 0.04)),
    ):
        rate = {}
        for name, pair in (
            ("flip", Pair(target, rival, counts, 2.0)),
            ("rival", Pair.of(RowPair(target, rival, counts), 2.0)),
        ):
            p = specificity_tests({"k": {"x": pair}}, 999, seed=1).p_value["k"]
            rate[name] = float((p <= 0.05).double().mean())
        assert flip_band[0] < rate["flip"] < flip_band[1], rate
        assert 0.04 <= rate["rival"] <= 0.065, rate
    # a column whose rows all hold the same difference: p = 1 / (N + 1) above 0, 1 at or below
    flat = torch.tensor([[0.5, 0.0, -0.5]] * 8, dtype=torch.float64)
    assert bootstrap_t_p(flat, _resamples(999, 8, 2)).tolist() == [1 / 1000, 1.0, 1.0]


def test_tau_is_the_score_the_deciding_comparison_needs():
    """Two rows (1 query each) read 0.9 at the score's key and 0.1 at a rival. With ratio 2 each
    row's difference is 0.9 - 0.2 = 0.7; the sign-flip draws of its sum are 1.4, 0, -1.4 with
    chances 1/4, 1/2, 1/4, so the 0.95 quantile is 1.4 and τ = (2 x 0.2 + 1.4) / 2 = 0.9; at ratio
    1 (the control) τ = (0.2 + 1.6) / 2 = 0.9 too, and 0.5 when the rows differ by 0.8 and 0."""
    signs = specificity._signs(4000, 2, seed=0)

    def tau(target, rival, ratio):
        t, r = torch.tensor(target)[:, None], torch.tensor(rival)[:, None]
        delta = t - ratio * r
        baseline = (ratio * r).sum(0)
        return float(specificity.sign_flip_tau(delta, baseline, torch.tensor([2.0]), signs)[0])

    assert tau([0.9, 0.9], [0.1, 0.1], 2.0) == pytest.approx(0.9)
    assert tau([0.9, 0.9], [0.1, 0.1], 1.0) == pytest.approx(0.9)
    # differences 0.8 and 0: draws 0.8 (p 1/2), -0.8; 0.95 quantile 0.8 -> (0.2 + 0.8) / 2
    assert tau([0.9, 0.1], [0.1, 0.1], 1.0) == pytest.approx(0.5)


def test_draws_for_reach_alpha_over_m():
    for m in (1, 48, 96, 576, 864, 10_000):
        n = draws_for(m, 0.05)
        assert 1 / (n + 1) <= 0.05 / m
        assert bh_reach(n, m, 0.05) == 1
    # 999 draws (p >= 0.001) over 144 tests: BH needs 3 tests at the smallest p (3 * .05/144 >=
    # .001 > 2 * .05/144); over 10 tests one is enough; 9 draws (p >= 0.1) can never reach .05
    assert bh_reach(999, 144, 0.05) == 3
    assert bh_reach(999, 10, 0.05) == 1
    assert bh_reach(9, 10, 0.05) is None


def test_the_rival_is_the_strongest_other_key_at_each_query():
    """The rival keys of a query: every key it can attend to but the score's own, never BOS for a
    relative key; the rival's value is the largest attention among them."""
    from interp_toolkit.heads.scorer import _Queries, _strongest_rival

    batch = RepeatedTokens(
        torch.zeros(1, 8, dtype=torch.long), period=3, n_repeats=2, starts=torch.tensor([1]),
        has_bos=True, low=1, high=8,
    )  # fmt: skip
    qs = _Queries(batch, batch.starts, 8)
    prev = Stripe("body", lag=1)
    keys = qs.rival_keys(prev, None)
    assert keys[4].nonzero().flatten().tolist() == [1, 2, 4]  # q=4: not BOS, not q-1 = 3
    assert qs.rival_keys(prev, 1)[4].nonzero().flatten().tolist() == [2, 4]
    assert qs.rival_keys(Stripe("body", column=0), None)[3].nonzero().flatten().tolist() == [
        1,
        2,
        3,
    ]
    pat = torch.zeros(1, 1, 8, 8)
    pat[0, 0, 4, [0, 1, 2, 3, 4]] = torch.tensor([0.5, 0.05, 0.3, 0.1, 0.05])
    best = _strongest_rival(prev, None, pat, qs, lambda _: None)
    assert float(best[0, 0, 4]) == pytest.approx(0.3)  # key 2; BOS (0.5) is no rival


def test_control_pair_needs_the_same_layout():
    from interp_toolkit.heads.scorer import RowScores

    a = RowScores(torch.zeros(2, 1, 1), torch.ones(2))
    with pytest.raises(ValueError):
        Pair.control(a, RowScores(torch.zeros(2, 1, 1), torch.tensor([1.0, 2.0])))


# ----------------------------------------------------------------------------- planted heads


@pytest.fixture(scope="module")
def codec():
    return letters_codec()


@pytest.fixture(scope="module")
def sharp(codec):
    return discover_heads(planted_model(), codec, DiscoveryOptions(n_seqs=32))


def test_planted_heads_get_exactly_their_roles(sharp):
    """Positives get their role; every negative (q-2, a window, q-1 and q-2 evenly, more on q-2,
    BOS, the current token, induction one position late or split, a positional head at offset
    Δ-1, a duplicate/induction split, uniform, random) gets none, although five of them reach
    the 0.4 floor on the deciding score (the floor alone would name them)."""
    assert sharp.roles == expected_roles(), sharp.to_dict()["heads"]
    over_floor = [
        h
        for h in PLANTED
        if PLANTED[h][1] == "none"
        and any(float(sharp.scores.get(k)[h]) >= 0.4 for k in sharp.decides.values())
    ]
    assert len(over_floor) >= 5, over_floor


def test_planted_heads_with_soft_noisy_attention(codec):
    """Softer heads (most, not all, of the attention where they look) whose logits vary with the
    key's token, so an even split is even only on average: the same roles."""
    rep = discover_heads(
        planted_model(sharpness=6.0, noise=1.0, seed=3), codec, DiscoveryOptions(n_seqs=32)
    )
    assert rep.roles == expected_roles(), rep.to_dict()["heads"]


def test_which_comparison_decided_is_reported(sharp):
    heads = {h["head"]: h for h in sharp.to_dict()["heads"]}
    # q-1 and q-2 evenly: beaten by its own q-2, the strongest other key; more on q-2: likewise
    rival = "vs the strongest other key"
    assert heads["0.3"]["decided_by"]["previous_token"] == rival
    assert heads["0.4"]["decided_by"]["previous_token"] == rival
    assert heads["0.3"]["comparisons"]["previous_token"][rival] == 1.0
    # the positional head at offset Δ-1 reads 1 on the induction stripe, and as much without
    # repeats: the no-repeat control decides
    assert heads["1.3"]["scores"]["induction"] > 0.99
    assert heads["1.3"]["decided_by"]["induction"] == "vs no-repeat control"
    assert heads["1.3"]["comparisons"]["induction"][rival] < 0.01
    # ...and the repeat explains none of its score: under the floor, whatever the test says
    assert abs(heads["1.3"]["repeat_effect"]["induction"]) < 0.01
    assert heads["1.0"]["repeat_effect"]["induction_vw"] > 0.9
    assert "previous_token" not in heads["1.0"]["repeat_effect"]
    # the split induction head loses to the key one position late
    assert heads["1.2"]["decided_by"]["induction_vw"] == rival
    reason = heads["1.0"]["role_reason"]
    assert reason["score"] == "induction_vw" and reason["floor"] == 0.4
    assert reason["repeat_effect"] > 0.9
    assert reason["p_value"] == pytest.approx(1 / 10_000)
    assert heads["0.3"]["role_reason"] is None
    lo, hi = heads["0.0"]["interval"]["previous_token"]
    assert lo <= heads["0.0"]["scores"]["previous_token"] <= hi


# ----------------------------------------------------------------------------- wrong definitions


def test_each_head_is_its_own_null(codec, sharp):
    """A null that pools heads fails here. Beside the perfect previous-token heads 0.0 and 1.4,
    the other heads of their layers are not significant for that score (pooling their rows with
    the strong head's would make them so); turning the uniform head 1.5 into a second perfect
    previous-token head changes no other head's p-value, and both previous-token heads of layer 1
    get the role (ranking a head among its layer's heads would give neither)."""
    p_prev = sharp.tests.p_value["previous_token"]
    assert float(p_prev[0, 0]) == float(p_prev[1, 4]) == pytest.approx(1e-4)
    for head in (HeadId(0, 2), HeadId(0, 3), HeadId(0, 4), HeadId(1, 5), HeadId(1, 6)):
        assert float(p_prev[head]) > 0.5, head
    model = planted_model()
    make_prev_token_head_onehot(model, HeadId(1, 5))
    rep = discover_heads(model, codec, DiscoveryOptions(n_seqs=32))
    assert rep.roles[1][5] == rep.roles[1][4] == "previous-token"
    for kind in SCORE_KINDS:
        p, before = rep.tests.p_value[kind].clone(), sharp.tests.p_value[kind].clone()
        p[1, 5] = before[1, 5] = 0.0
        assert torch.equal(p, before), kind


def make_prev_token_head_onehot(model, head: HeadId) -> None:
    from planting import Head

    with torch.no_grad():
        Head(model, head).positional({1: 1.0}, 20.0)


WIDE = ModelConfig(n_layers=8, d_model=96, n_heads=12, d_head=8, n_ctx=32, d_vocab=64, seed=0)


def _lone_head_model():
    """8 x 12 heads that all attend uniformly (W_Q = 0) but one previous-token head, 0.7: the
    only true effect among 8 x 12 x 6 = 576 tests."""
    model = build_model(WIDE)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.q.original_component.weight.zero_()
    make_prev_token_head(model, layer=0, head=7)
    return model


def test_bh_over_every_test_can_find_a_lone_head():
    """Benjamini-Hochberg over 576 tests rejects one alone only if its p <= 0.05 / 576 = 8.7e-5:
    the default number of draws reaches it; a BH on 9,999 draws (smallest p 1e-4), which ignores
    the smallest attainable p, finds nothing and must say so."""
    codec = tiny_codec(WIDE.d_vocab)
    model = _lone_head_model()
    rep = discover_heads(model, codec, DiscoveryOptions(n_seqs=16, fdr=True))
    assert rep.test.n_tests == 576 and rep.tests.smallest_p <= 0.05 / 576
    assert rep.heads_with_role("previous-token") == [HeadId(0, 7)]
    assert sum(r != "none" for row in rep.roles for r in row) == 1
    assert rep.test.warnings == []
    few = discover_heads(model, codec, DiscoveryOptions(n_seqs=16, fdr=True, n_draws=9999))
    assert few.heads_with_role("previous-token") == []
    assert few.test.bh_min_rejections == 2
    assert "cannot reject fewer than 2" in few.test.warnings[0]
    # without BH, 1e-4 <= 0.05: the head is found and nothing is said
    plain = discover_heads(model, codec, DiscoveryOptions(n_seqs=16, n_draws=9999))
    assert plain.heads_with_role("previous-token") == [HeadId(0, 7)]
    assert plain.test.warnings == []


# ----------------------------------------------------------------------------- split heads


@pytest.fixture(scope="module")
def split(codec):
    return discover_heads(split_model(), codec)


def test_split_heads_get_no_role_and_sharp_heads_do(split):
    """A head that splits its attention between the score's key and any other key of the
    context, near or far, gets no role (50/50 with q-4 or q-9, 60/40 with q-2 or q-4, and 64/36:
    ratio 1.8, almost the role);
    one whose key holds more than twice the other (75/25, 80/20) does, on previous-token and
    induction alike, and the other planted heads keep their roles."""
    assert split.roles == split_roles(), split.to_dict()["heads"]
    floor = split.floors
    for h, (what, role) in SPLIT.items():
        kind = split.decides["previous-token" if h.layer == 0 else "induction"]
        assert float(split.scores.get(kind)[h]) >= floor[kind], (h, what)  # the floor would name it
        if role == "none":
            assert float(split.tests.p_value[kind][h]) > 0.5, (h, what)
        else:
            assert float(split.tests.p_value[kind][h]) <= 1e-3, (h, what)


def test_the_window_before_named_the_far_split_heads(codec):
    """The same heads with the rivals cut to the keys within 2 positions of the score's key (the
    window before): the far split heads pass, so the test above fails on that rule."""
    from interp_toolkit.heads.discovery import classify, discovery_batch
    from interp_toolkit.heads.scorer import HeadScores
    from interp_toolkit.heads.specificity import comparisons_of, specificity_tests

    model = split_model()
    batch = discovery_batch(model, codec)
    observed, comps = comparisons_of(model, batch, rival_width=2)
    tests = specificity_tests(comps, 9999)
    scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
    roles = classify(scores, tests.significant(), None, {k: tests.repeat_effect(k) for k in comps})
    named = {str(h) for h in SPLIT if roles[h.layer][h.head] != SPLIT[h][1]}
    assert named == {"0.2", "0.5", "0.6", "1.1", "1.6"}, roles
