"""The statistics shared by the tests (p-values, τ, Benjamini-Hochberg), role classification, and
the second, named test against untrained models (``vs_untrained``, which decides no role): its
untrained models, its arithmetic on exchangeable untrained models (it holds by construction
there), and that it runs beside the specificity test without changing a role."""

from __future__ import annotations

import math

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec

from interp_toolkit.errors import UserError
from interp_toolkit.heads import nulls, untrained
from interp_toolkit.heads.discovery import classify, discover_heads, discovery_batch
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import SCORE_KINDS, SCORES
from interp_toolkit.heads.scorer import HeadScores, head_scores, row_pairs, row_scores
from interp_toolkit.models.build import ModelConfig, build_model, reinitialise
from interp_toolkit.stats import significance

# ----------------------------------------------------------------------------- statistics


def test_p_values_by_hand():
    null = torch.tensor([0.1, 0.2, 0.3, 0.4])[:, None, None].expand(4, 1, 3)
    obs = torch.tensor([[0.3, 0.5, 0.0]])
    # 0.3: two null values >= it -> (1 + 2) / 5; 0.5: none -> 1/5; 0.0: all four -> 5/5
    assert significance.p_values(obs, null).tolist() == [[0.6, 0.2, 1.0]]


def test_tau_is_each_heads_own_quantile():
    # head 0's null is 1..20, head 1's 101..120: linear interpolation at 0.95 * 19 = 18.05
    null = torch.stack([torch.arange(1.0, 21.0), torch.arange(101.0, 121.0)], -1)[:, None, :]
    assert significance.tau(null, 0.95)[0].tolist() == pytest.approx([19.05, 119.05])
    with pytest.raises(UserError, match="quantile"):
        significance.tau(null, 1.0)


def test_benjamini_hochberg_by_hand():
    p = torch.tensor([0.01, 0.04, 0.03, 0.005, 0.2])
    # sorted .005 .01 .03 .04 .2 against k * .05 / 5 = .01 .02 .03 .04 .05: the 4 smallest pass
    assert significance.benjamini_hochberg(p, 0.05).tolist() == [True, True, True, True, False]
    # step-up: p(1) = .02 > .0125 fails alone, but p(3) = .03 <= .0375, so the 3 smallest pass
    p = torch.tensor([[0.9, 0.025], [0.02, 0.03]])
    assert significance.benjamini_hochberg(p, 0.05).tolist() == [[False, True], [True, True]]
    assert not significance.benjamini_hochberg(torch.tensor([0.5, 0.06]), 0.05).any()


def test_expected_false_positives_smallest_p_and_alpha():
    assert significance.expected_false_positives(144, 0.05) == pytest.approx(7.2)
    assert significance.smallest_p(99) == pytest.approx(0.01)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(UserError, match="alpha"):
            significance.check_alpha(bad)


def test_significance_with_and_without_fdr():
    p = {"a": torch.tensor([[0.01, 0.04]]), "b": torch.tensor([[0.03, 0.5]])}
    plain = significance.significant_by_kind(p, 0.05)
    assert plain["a"].tolist() == [[True, True]] and plain["b"].tolist() == [[True, False]]
    # BH over the 4 tests: .01 <= .0125, .03 > .025, .04 > .0375 -> only the smallest passes
    bh = significance.significant_by_kind(p, 0.05, fdr=True)
    assert bh["a"].tolist() == [[True, False]] and bh["b"].tolist() == [[False, False]]


def test_pooled_by_layer():
    values = torch.arange(12.0).view(2, 2, 3)  # [model, layer, head]
    pooled = significance.pooled_by_layer(values)
    assert pooled.shape == (6, 2, 3)
    for head in range(3):
        assert sorted(pooled[:, 0, head].tolist()) == [0, 1, 2, 6, 7, 8]
        assert sorted(pooled[:, 1, head].tolist()) == [3, 4, 5, 9, 10, 11]


def test_classify_precedence_significance_and_floor():
    kinds = dict.fromkeys(SCORE_KINDS, torch.zeros(1, 4))
    scores = HeadScores(
        {
            **kinds,
            "induction_vw": torch.tensor([[0.9, 0.3, 0.9, 0.9]]),
            "previous_token": torch.full((1, 4), 0.9),
        }
    )
    sig = {k: torch.zeros(1, 4, dtype=torch.bool) for k in SCORE_KINDS}
    sig["induction_vw"] = torch.tensor([[True, True, False, True]])
    sig["previous_token"] = torch.tensor([[True, True, True, False]])
    roles = classify(scores, sig)
    # 0: induction first; 1: induction significant but under the floor -> previous-token;
    # 2: induction not significant -> previous-token; 3: previous-token not significant either
    assert roles == [["induction", "previous-token", "previous-token", "induction"]]
    plain = classify(scores, sig, {"induction": "induction", "previous-token": "previous_token"})
    assert plain == [["previous-token", "previous-token", "previous-token", "none"]]
    # a repeat score whose repeat explains less than the floor decides nothing (head 0: 0.9 on
    # the probe, 0.6 on its no-repeat control)
    effects = {"induction_vw": torch.tensor([[0.3, 0.3, 0.9, 0.9]])}
    assert classify(scores, sig, repeat_effects=effects) == [
        ["previous-token", "previous-token", "previous-token", "induction"]
    ]


def test_every_registry_null_exists():
    assert {s.untrained_null for s in SCORES} <= set(nulls.NULLS)


def test_unknown_null_is_one_line(tiny_model):
    batch = discovery_batch(tiny_model, tiny_codec(64), DiscoveryOptions(n_seqs=4))
    ctx = nulls.NullContext(tiny_model, batch, row_scores(tiny_model, batch))
    with pytest.raises(UserError, match="unknown null 'bogus'"):
        nulls.draw_nulls(ctx, {"induction": "bogus"})


def test_row_scores_do_not_depend_on_chunking(tiny_model):
    batch = discovery_batch(tiny_model, tiny_codec(64), DiscoveryOptions(n_seqs=6))
    chunked = row_scores(tiny_model, batch, batch_size=4)
    whole = row_scores(tiny_model, batch, batch_size=6)
    scores = head_scores(tiny_model, batch)
    for kind in SCORE_KINDS:
        assert chunked[kind].sums.shape == (6, 2, 4)
        assert torch.allclose(chunked[kind].sums, whole[kind].sums, atol=1e-6)
        assert torch.equal(chunked[kind].counts, whole[kind].counts)
        assert torch.allclose(chunked[kind].mean().float(), scores.get(kind), atol=1e-6)
    # the rival pairs too, and each pair's queries are a subset of the score's
    _, a = row_pairs(tiny_model, batch, batch_size=4)
    _, b = row_pairs(tiny_model, batch, batch_size=6)
    for kind in SCORE_KINDS:
        for name, pair in a[kind].items():
            assert torch.allclose(pair.target, b[kind][name].target, atol=1e-6)
            assert torch.allclose(pair.rival, b[kind][name].rival, atol=1e-6)
            assert (pair.counts <= whole[kind].counts).all()


# ----------------------------------------------------------------------------- untrained models

TINY = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64, seed=0)


def test_reinitialise_gives_the_model_of_that_seed():
    want = build_model(TINY.replace(seed=3))
    got = reinitialise(build_model(TINY.replace(seed=9)), TINY.replace(seed=3))
    for (name, a), (_, b) in zip(want.named_parameters(), got.named_parameters(), strict=True):
        assert torch.equal(a, b), name


def test_untrained_models_are_made_once_per_seed_and_batch(monkeypatch):
    made = []
    models = untrained.toy_untrained(TINY, (123_001, 123_002))
    make = models.make
    models.make = lambda seed: made.append(seed) or make(seed)
    batch = discovery_batch(build_model(TINY), tiny_codec(64), DiscoveryOptions(n_seqs=4, seed=77))
    first = models.scores([batch])
    assert made == [123_001, 123_002]
    again = models.scores([batch])
    assert made == [123_001, 123_002]  # cached: no model made again
    assert again[1][0]["induction"] is first[1][0]["induction"]
    fresh = build_model(TINY.replace(seed=123_002))
    want = row_scores(fresh, batch)["previous_token"].sums
    assert torch.allclose(first[1][0]["previous_token"].sums, want, atol=1e-6)


def test_a_model_that_cannot_be_rebuilt_is_one_line(tiny_model):
    tiny_model.cfg.normalization_type = "LN"  # pretend: not an interp-toolkit toy
    try:
        assert untrained.untrained_models(tiny_model) is None
        with pytest.raises(UserError, match="cannot be rebuilt"):
            discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(n_seqs=4, n_untrained=2))
        # the specificity test needs no untrained model
        assert (
            discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(n_seqs=4)).vs_untrained
            is None
        )
    finally:
        tiny_model.cfg.normalization_type = None


# ----------------------------------------------------------------------------- calibration

N_MODELS = 30


@pytest.fixture(scope="module")
def leave_one_out():
    """p-values of ``N_MODELS`` untrained tiny models, each tested by the registry's nulls with
    the other 29 as its untrained models (so each model's null pools 29 x 4 = 116 values)."""
    codec = tiny_codec(TINY.d_vocab)
    seeds = [1000 + i for i in range(N_MODELS)]
    models = [build_model(TINY.replace(seed=s)) for s in seeds]
    batch = discovery_batch(models[0], codec, DiscoveryOptions(n_seqs=16))
    null_of = {s.name: s.untrained_null for s in SCORES}
    ps = []
    for i, model in enumerate(models):
        others = untrained.toy_untrained(TINY, seeds[:i] + seeds[i + 1 :])
        ctx = nulls.NullContext(model, batch, row_scores(model, batch), others)
        tests = nulls.run_tests(nulls.draw_nulls(ctx, null_of), null_of)
        ps.append(torch.stack([tests.p_value[k] for k in SCORE_KINDS]))
    return torch.stack(ps)  # [model, kind, layer, head]


def _band(n: int, alpha: float, z: float = 3.29) -> tuple[float, float]:
    """Two-sided 99.9% normal band of Binomial(n, alpha): the count of p <= alpha among n valid
    tests."""
    sd = math.sqrt(n * alpha * (1 - alpha))
    return n * alpha - z * sd, n * alpha + z * sd


def test_untrained_nulls_arithmetic_on_exchangeable_models(leave_one_out):
    """The second test's arithmetic. Untrained heads of one layer are exchangeable, so a head's
    statistic ranks uniformly among its null and p <= a comes out for a share a of the 240 heads
    of each kind: the count must lie in the Binomial(240, a) 99.9% band ([1, 23] at a = 0.05,
    [95, 145] at a = 0.5). This holds by construction for a correct implementation (it is not a
    calibration of a role: that is experiments/null_calibration.py on trained and planted heads);
    a head compared with another statistic than its null's (e.g. its probe score against
    untrained repeat effects without its own control) lands far outside."""
    for alpha in (0.05, 0.5):
        lo, hi = _band(leave_one_out[:, 0].numel(), alpha)
        counts = (leave_one_out <= alpha).sum((0, 2, 3))  # per kind
        assert all(lo <= c <= hi for c in counts.tolist()), (alpha, counts)


# ----------------------------------------------------------------------------- beside the roles


def test_the_untrained_test_runs_beside_and_decides_nothing():
    """With ``n_untrained`` the report carries the second test (a planted previous-token head is
    above every untrained head of its layer: the smallest p its null allows), and the roles are
    those of the specificity test alone."""
    codec = tiny_codec(TINY.d_vocab)
    model = build_model(TINY.replace(seed=7))
    make_prev_token_head(model, layer=0, head=2)
    plain = discover_heads(
        model, codec, DiscoveryOptions(n_seqs=16), model_cfg=TINY.replace(seed=7)
    )
    both = discover_heads(
        model, codec, DiscoveryOptions(n_seqs=16, n_untrained=25), model_cfg=TINY.replace(seed=7)
    )
    assert plain.vs_untrained is None and both.vs_untrained is not None
    n_null = both.vs_untrained.n_null["previous_token"]
    assert n_null == 25 * 4
    p = float(both.vs_untrained.p_value["previous_token"][0, 2])
    assert p == pytest.approx(significance.smallest_p(n_null))
    assert both.roles == plain.roles
    assert both.heads_with_role("previous-token") == [(0, 2)]
    head = both.to_dict()["heads"][2]
    assert head["vs_untrained"]["p_value"]["previous_token"] == pytest.approx(p)
    assert both.to_dict()["test"]["untrained"]["n_models"] == 25
