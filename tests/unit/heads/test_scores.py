"""The probe, head scores of hand-built heads with known answers, and the heads JSON (fast)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from analysis_helpers import _position_only, make_offset_head, make_prev_token_head, tiny_codec

from interp_toolkit.errors import UserError
from interp_toolkit.heads.discovery import SCORE_KINDS, discover_heads, head_scores
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.heads.repeats import (
    default_probe,
    default_token_range,
    non_repeating_like,
    repeated_tokens,
)
from interp_toolkit.text.codecs import GPT2Codec


def test_repeated_tokens_layout():
    b = repeated_tokens(6, 7, n_repeats=3, low=0, high=40, bos_id=0, prefix_max=5, seed=3)
    assert b.tokens.shape == (6, 1 + 5 + 3 * 7)
    assert (b.tokens[:, 0] == 0).all()
    assert not (b.tokens[:, 1:] == 0).any()  # BOS id never drawn
    assert ((b.tokens >= 0) & (b.tokens < 40)).all()
    for i in range(6):
        s = int(b.starts[i])
        seg = b.tokens[i, s : s + 7]
        for r in range(1, 3):
            assert torch.equal(b.tokens[i, s + r * 7 : s + (r + 1) * 7], seg)
        row = b.tokens[i, 1:].tolist()
        assert len(set(row)) == 5 + 7  # only the planted repeats repeat
    assert len(set(b.starts.tolist())) > 1  # offsets vary
    again = repeated_tokens(6, 7, n_repeats=3, low=0, high=40, bos_id=0, prefix_max=5, seed=3)
    assert torch.equal(again.tokens, b.tokens)
    null = non_repeating_like(b, seed=9)
    assert null.tokens.shape == b.tokens.shape and not null.repeats
    for row in null.tokens[:, 1:].tolist():
        assert len(set(row)) == len(row)


def test_default_token_range():
    assert default_token_range(tiny_codec(64)) == (0, 63)
    low, high = default_token_range(GPT2Codec())
    assert 0 < low < high <= 50257


def test_bad_batch_args():
    with pytest.raises(UserError):
        repeated_tokens(4, 1, low=0, high=10, bos_id=None)
    with pytest.raises(UserError):
        repeated_tokens(4, 5, n_repeats=1, low=0, high=10, bos_id=None)


def _uniform_head_reading_position(model, layer: int, head: int) -> None:
    """``layer.head`` attends uniformly to every key (its queries are zero) and its value vector
    at position k is (k, 0, ...), so ``|v_k| = k`` (0 on BOS). Layer 0 reads exact positions
    (:func:`analysis_helpers._position_only`)."""
    _position_only(model)
    d_head = int(model.cfg.d_head)
    rows = slice(head * d_head, (head + 1) * d_head)
    attn = model.blocks[layer].attn
    with torch.no_grad():
        attn.q.original_component.weight[rows] = 0.0
        attn.v.original_component.weight[rows] = 0.0
        attn.v.original_component.weight[head * d_head, 0] = 1.0  # v_k[0] = position k


def test_scores_of_hand_built_heads():
    """Every score of heads whose attention is known (planting.circuits.stripes_model): a wrong
    stripe, query set or value weighting moves at least one of these numbers."""
    from planting import BLOCK, letters_codec
    from planting.circuits import BOS_VALUE_NORM, stripes_model

    b = default_probe(letters_codec(), BLOCK, n_seqs=32, seed=5)
    with torch.no_grad():
        got = head_scores(stripes_model(), b, batch_size=7)
    # body queries are 1 .. end-1 of each row; only query 1's previous key is BOS
    n_body = float((b.starts + b.n_repeats * b.period - 1).sum())  # to the last repeated token
    n_repeat = b.n_seqs * b.period  # the 2nd repeat's queries
    half_on_bos = (n_body - n_repeat / 2) / n_body  # 1.1: all on BOS, half in the 2nd repeat
    want = {
        # 0.0 previous key; 0.1 half previous, half itself; 1.0 BOS; 1.1 BOS (+ induction key)
        "previous_token": [[1.0, 0.5], [0.0, 0.0]],
        "current_token": [[0.0, 0.5], [0.0, 0.0]],
        "first_token": [[b.n_seqs / n_body, b.n_seqs / n_body / 2], [1.0, half_on_bos]],
        "duplicate_token": [[0.0, 0.0], [0.0, 0.0]],
        "induction": [[0.0, 0.0], [0.0, 0.5]],
        # value-weighted: half the attention on a value of norm 1, half on BOS's
        "induction_vw": [[0.0, 0.0], [0.0, 1 / (1 + BOS_VALUE_NORM)]],
    }
    assert set(want) == set(SCORE_KINDS)
    for kind, value in want.items():
        torch.testing.assert_close(got.get(kind), torch.tensor(value), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kind", ["k", "q"])
def test_scores_of_the_hand_built_circuits(kind):
    """The planted layer-0 head scores 1 on its own stripe, the induction head 1 on both induction
    scores (its value vectors all have norm 1); the empty head 1.1 attends uniformly."""
    from planting import BLOCK, letters_codec
    from planting.circuits import CIRCUITS

    b = default_probe(letters_codec(), BLOCK, n_seqs=16, seed=2)
    with torch.no_grad():
        got = head_scores(CIRCUITS[kind][0](), b)
    own = "previous_token" if kind == "k" else "duplicate_token"
    assert float(got.get(own)[0, 0]) == pytest.approx(1.0, abs=1e-6)
    other = "duplicate_token" if kind == "k" else "previous_token"
    assert float(got.get(other)[0, 0]) < 0.1
    for k in ("induction", "induction_vw"):
        assert float(got.get(k)[1, 0]) == pytest.approx(1.0, abs=1e-6)
    # uniform attention over keys 0..q: the induction key gets 1/(q+1) on average
    qs = (b.starts[:, None] + b.period + torch.arange(b.period)[None, :]).float()
    assert float(got.induction[1, 1]) == pytest.approx(float((1 / (qs + 1)).mean()), rel=1e-5)


def test_scores_of_a_uniform_head_reading_position(tiny_cfg):
    """Known answers, from the layout alone. A uniform head with |v_k| = k: at query q the plain
    stripes read 1/(q+1); the value-weighted induction score reads (q-D+1) / sum_{k<=q} k. Offset
    heads attend to q-D (duplicate-token) and q-D+1 (induction) only."""
    from interp_toolkit.models.build import build_model

    period = 6
    b = repeated_tokens(8, period, low=0, high=63, bos_id=0, prefix_max=4, seed=1)
    model = build_model(tiny_cfg)
    _uniform_head_reading_position(model, layer=0, head=0)
    make_offset_head(model, layer=0, head=1, offset=period)
    make_offset_head(model, layer=0, head=2, offset=period - 1)
    with torch.no_grad():
        s = head_scores(model, b)
    repeat_q, body_q = [], []
    for start in b.starts.tolist():
        end = start + 2 * period
        repeat_q += range(start + period, end)
        body_q += range(1, end)
    repeats = torch.tensor(repeat_q, dtype=torch.float64)
    body = torch.tensor(body_q, dtype=torch.float64)
    plain = float((1 / (repeats + 1)).mean())
    vw = float(((repeats - period + 1) / (repeats * (repeats + 1) / 2)).mean())
    uniform = s.get  # head 0.0
    assert float(uniform("induction")[0, 0]) == pytest.approx(plain, rel=1e-4)
    assert float(uniform("duplicate_token")[0, 0]) == pytest.approx(plain, rel=1e-4)
    assert float(uniform("induction_vw")[0, 0]) == pytest.approx(vw, rel=1e-4)
    assert vw > 1.05 * plain  # the two answers differ by more than the tolerance: swapped fails
    # previous-token reads queries 2.. (key 1 is the first non-BOS key); the others queries 1..
    prev_q = body[body >= 2]
    assert float(uniform("previous_token")[0, 0]) == pytest.approx(
        float((1 / (prev_q + 1)).mean()), rel=1e-4
    )
    for kind in ("current_token", "first_token"):
        assert float(uniform(kind)[0, 0]) == pytest.approx(float((1 / (body + 1)).mean()), rel=1e-4)
    # offset heads: all attention on one key
    assert s.duplicate_token[0, 1] > 0.99 and s.induction[0, 1] < 0.01
    assert (
        s.induction[0, 2] > 0.99 and s.induction_vw[0, 2] > 0.99 and s.duplicate_token[0, 2] < 0.01
    )


def test_heads_json_per_head_fields(tiny_cfg):
    from interp_toolkit.models.build import build_model

    model = build_model(tiny_cfg)
    make_prev_token_head(model, layer=0, head=0)
    report = discover_heads(model, tiny_codec(tiny_cfg.d_vocab), DiscoveryOptions(n_seqs=16))
    d = json.loads(json.dumps(report.to_dict()))
    assert d["roles"]["previous-token"] == ["0.0"]
    first = d["heads"][0]
    assert first["head"] == "0.0" and first["role"] == "previous-token"
    fields = ("scores", "interval", "tau", "p_value", "decided_by", "comparisons")
    for field in (*fields, "significant", "passes"):
        assert set(first[field]) == set(SCORE_KINDS), field
    # a head far above its rivals in every row: no draw reaches it, p = 1 / (N + 1)
    assert d["test"]["n_draws"] == 9999 and d["test"]["smallest_p"] == pytest.approx(1e-4)
    assert first["p_value"]["previous_token"] == pytest.approx(1e-4)
    assert first["comparisons"]["previous_token"].keys() == {"vs the strongest other key"}
    assert first["comparisons"]["induction"].keys() == {
        "vs the strongest other key",
        "vs no-repeat control",
    }
    assert first["significant"]["previous_token"] is True and first["passes"]["previous_token"]
    assert first["role_reason"]["score"] == "previous_token"
    assert d["test"]["n_tests"] == 8 * 6 and d["test"]["warnings"] == []
    assert d["test"]["expected_false_positives"]["per_score"] == pytest.approx(0.05 * 8)
    assert d["effect_size_floor"] == {k: 0.4 for k in SCORE_KINDS}
    assert d["decides"]["induction"] == "induction_vw"
    assert d["probe"]["period"] >= 2 and d["probe"]["bos"] is True
    assert list(d["probe"])[-1] == "definitions" and list(d)[0] == "probe"
    assert "vs_untrained" not in first and d["test"]["untrained"] is None


def test_a_batch_is_described_in_the_json_written_before_it_was_declared():
    """The batch's JSON (heads.json's ``probe``), key for key as ``describe()`` wrote it."""
    batch = repeated_tokens(3, 4, n_repeats=2, low=5, high=40, bos_id=0, seed=9, prefix_max=2)
    old = '{"n_seqs": 3, "seq_len": 11, "period": 4, "n_repeats": 2, "prefix_max": 2, "bos": true, '
    old += '"token_range": [5, 40], "seed": 9, "repeats": true}'
    assert json.dumps(batch.to_dict()) == old


@pytest.mark.parametrize("kind", ["k", "q"])
def test_specificity_labels_the_planted_heads(kind):
    """Each score's specificity test against the head itself: discovery names exactly the planted
    heads of a hand-built circuit, and no induction head in its control."""
    from planting import letters_codec
    from planting.circuits import CIRCUITS, control_model

    codec = letters_codec()
    builder, layer0_role = CIRCUITS[kind]
    report = discover_heads(builder(), codec, DiscoveryOptions(n_seqs=16))
    assert report.test.name == "specificity"
    assert report.roles == [[layer0_role, "none"], ["induction", "none"]], report.to_dict()
    control = discover_heads(control_model(kind), codec, DiscoveryOptions(n_seqs=16))
    assert control.roles == [[layer0_role, "none"], ["none", "none"]], control.to_dict()


def test_discover_errors(tiny_model):
    with pytest.raises(UserError, match="induction score"):
        discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(induction_score="bogus"))
    with pytest.raises(UserError, match="n_untrained"):
        discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(n_untrained=0))
    with pytest.raises(UserError, match="n_draws"):
        discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(n_draws=0))
    with pytest.raises(UserError, match="context"):
        discover_heads(tiny_model, tiny_codec(64), DiscoveryOptions(period=40))


_TEST_JSON = """{"name": "specificity", "comparisons": {"previous_token": ["vs the strongest other key"],
"induction": ["vs the strongest other key", "vs no-repeat control"]}, "statistic": "per comparison, a
one-sided test over rows of the per-row difference: the score's key minus the ratio times the head's
strongest attention at any other key, query by query (a studentized bootstrap of the rows), or the
probe minus a no-repeat control (a paired sign flip); p = the largest over the comparisons
(intersection-union test)", "rivals": "every other key a query can attend to (BOS excepted for a
relative key)", "rival_ratio": 2.0, "n_draws": 99, "smallest_p": 0.01, "quantile": 0.95, "tau": "the
0.95 quantile of the deciding comparison's null, in score units", "p_value": "(1 + #{draw >= observed})
/ (1 + N), per comparison (a draw: a sign flip or a resample's studentized mean); max over
comparisons", "alpha": 0.05, "correction": "benjamini-hochberg over heads x scores", "n_tests": 48,
"bh_min_rejections": 10, "warnings": ["Benjamini-Hochberg over 48 tests cannot reject fewer than 10 at
once: the smallest attainable p, 0.01, is above alpha/m = 0.00104; use at least 9999 draws"],
"expected_false_positives": {"per_score": 0.4, "all_scores": 2.4000000000000004}, "interval": "95%,
rows as independent units (ratio estimator, normal approximation)", "untrained": {"null": {"induction":
"untrained"}, "n_null": {"induction": 20}, "smallest_p": {"induction": 0.047619047619047616},
"n_models": 5, "rows": 8, "seeds": [1, 2], "decides": "nothing: did training raise this stripe above
untrained heads of its layer?"}}"""


def test_heads_json_test_account_is_written_as_before():
    """heads.json's ``test`` (the typed account of :func:`describe_tests`), pinned to the JSON the
    hand-written dict wrote: same keys, order and numbers (line breaks in the text are spaces)."""
    from interp_toolkit.files.serialize import to_json
    from interp_toolkit.heads.nulls import NullTests
    from interp_toolkit.heads.specificity import SpecificityTests, describe_tests

    z, names = torch.zeros(2, 12), ("vs the strongest other key", "vs no-repeat control")
    kinds = {"previous_token": names[:1], "induction": names}
    p = {k: z for k in kinds}  # 2 scores x 24 heads: 48 tests; 99 draws: smallest p 0.01
    comparisons = {k: dict.fromkeys(named, z) for k, named in kinds.items()}
    tests = SpecificityTests(p, p, {k: [] for k in kinds}, comparisons, 99, 0.95)
    null = {"induction": "untrained"}, {"induction": 20}
    untrained = NullTests({}, {}, *null, n_models=5, rows=8, seeds=[1, 2])
    account = describe_tests(tests, 0.05, True, 8, untrained)
    assert json.dumps(to_json(account)) == json.dumps(json.loads(_TEST_JSON.replace("\n", " ")))


def test_heads_json_head_entry_is_written_as_before():
    """One head's entry of heads.json, hand-made, pinned key for key (``vs_untrained`` left out
    when the second test did not run, as the hand-written dict did)."""
    from interp_toolkit.files.serialize import to_json
    from interp_toolkit.heads.discovery import HeadEntry, RoleReason

    p = {"previous_token": 0.5}
    reason = RoleReason(
        score="previous_token", value=0.5, repeat_effect=None, floor=0.4, p_value=1e-4,
        decided_by="vs the strongest other key", significance="p <= 0.05",
    )  # fmt: skip
    entry = HeadEntry(
        HeadId(1, 2), 1, 2, p, {"previous_token": [0.25, 0.75]}, {"previous_token": 0.125},
        {"previous_token": 1e-4}, {"previous_token": "vs the strongest other key"},
        {"previous_token": {"vs the strongest other key": 0.375}}, {}, {"previous_token": True},
        {"previous_token": True}, "previous-token", reason, {"p_value": p, "tau": p},
    )  # fmt: skip
    expected = {
        "head": "1.2", "layer": 1, "index": 2, "scores": p,
        "interval": {"previous_token": [0.25, 0.75]}, "tau": {"previous_token": 0.125},
        "p_value": {"previous_token": 1e-4},
        "decided_by": {"previous_token": "vs the strongest other key"},
        "comparisons": {"previous_token": {"vs the strongest other key": 0.375}},
        "repeat_effect": {}, "significant": {"previous_token": True},
        "passes": {"previous_token": True}, "role": "previous-token",
        "role_reason": {
            "score": "previous_token", "value": 0.5, "repeat_effect": None, "floor": 0.4,
            "test": "specificity", "p_value": 1e-4, "decided_by": "vs the strongest other key",
            "significance": "p <= 0.05",
        },
        "vs_untrained": {"p_value": p, "tau": p},
    }  # fmt: skip
    assert json.dumps(to_json(entry)) == json.dumps(expected)
    bare = dataclasses.replace(entry, role="none", role_reason=None, vs_untrained=None)
    expected |= {"role": "none", "role_reason": None}
    del expected["vs_untrained"]
    assert json.dumps(to_json(bare)) == json.dumps(expected)
