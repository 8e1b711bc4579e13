"""Head scores, null-model tau and roles on tiny models (fast)."""

from __future__ import annotations

import json

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec

from interp_toolkit.analysis.batches import (
    default_probe,
    default_token_range,
    non_repeating_like,
    repeated_tokens,
)
from interp_toolkit.analysis.scores import (
    SCORE_KINDS,
    discover_heads,
    head_scores,
    taus_from_null,
)
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import GPT2Codec


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


def test_scores_of_hand_built_heads():
    """Every score of heads whose attention is known (circuits_helpers.stripes_model): a wrong
    stripe, query set or value weighting moves at least one of these numbers."""
    from circuits_helpers import BLOCK, BOS_VALUE_NORM, letters_codec, stripes_model

    b = default_probe(letters_codec(), BLOCK, n_seqs=32, seed=5)
    with torch.no_grad():
        got = head_scores(stripes_model(), b, batch_size=7)
    # body queries are 1 .. end-1 of each row; only query 1's previous key is BOS
    n_body = float((b.ends - 1).sum())
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
    from circuits_helpers import BLOCK, CIRCUITS, letters_codec

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


def test_prev_token_head_is_found(tiny_cfg):
    from interp_toolkit.models import build_model

    model = build_model(tiny_cfg)
    make_prev_token_head(model, layer=0, head=0)
    report = discover_heads(model, tiny_codec(tiny_cfg.d_vocab), n_seqs=16, n_null=3)
    assert report.scores.previous_token[0, 0] > 0.9
    assert report.heads_with_role("previous-token") == [(0, 0)]
    assert report.heads_with_role("induction") == []
    assert report.heads_with_role("duplicate-token") == []
    assert report.taus["previous_token"] < 0.5
    d = json.loads(json.dumps(report.to_dict()))
    assert d["roles"]["previous-token"] == ["0.0"]
    assert d["null"] == {"model": "shuffled", "n_samples": 3, "n_values": 24, "quantile": 0.95}
    assert set(d["taus"]) == set(SCORE_KINDS)
    first = d["heads"][0]
    assert first["head"] == "0.0" and first["role"] == "previous-token"
    assert first["above_tau"]["previous_token"] is True
    assert d["probe"]["period"] >= 2 and d["probe"]["bos"] is True


@pytest.mark.parametrize("kind", ["k", "q"])
def test_fresh_init_null_labels_the_planted_heads(kind):
    """Against freshly initialised models of the same architecture, discovery names exactly the
    planted heads of a hand-built circuit, and no induction head in its control."""
    from circuits_helpers import CIRCUITS, control_model, letters_codec

    codec = letters_codec()
    builder, layer0_role = CIRCUITS[kind]
    report = discover_heads(builder(), codec, n_seqs=16, null="fresh_init", n_null=2)
    assert report.null == "fresh_init" and report.n_null_samples == 2
    assert report.roles == [[layer0_role, "none"], ["induction", "none"]], report.to_dict()
    control = discover_heads(control_model(kind), codec, n_seqs=16, null="fresh_init", n_null=2)
    assert control.roles == [[layer0_role, "none"], ["none", "none"]], control.to_dict()


def test_fresh_init_refuses_foreign_models(tiny_model):
    tiny_model.cfg.normalization_type = "LN"  # pretend: not an interp-toolkit toy
    try:
        with pytest.raises(UserError, match="fresh_init"):
            discover_heads(tiny_model, tiny_codec(64), n_seqs=4, null="fresh_init", n_null=1)
    finally:
        tiny_model.cfg.normalization_type = None


def test_discover_errors(tiny_model):
    with pytest.raises(UserError, match="null"):
        discover_heads(tiny_model, tiny_codec(64), null="bogus")
    with pytest.raises(UserError, match="context"):
        discover_heads(tiny_model, tiny_codec(64), period=40)


def test_taus_are_quantiles(tiny_model):
    b = repeated_tokens(4, 6, low=0, high=63, bos_id=0, seed=0)
    s = head_scores(tiny_model, b)
    taus = taus_from_null([s, s], quantile=0.5)
    assert taus["induction"] == pytest.approx(float(s.induction.flatten().median()), abs=0.02)
