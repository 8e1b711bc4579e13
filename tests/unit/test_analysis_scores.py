"""Head scores, null-model tau and roles on tiny models (fast)."""

from __future__ import annotations

import json

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec

from interp_toolkit.analysis.batches import (
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


def _direct_scores(model, b):
    """Independent per-row loops over cached patterns and values."""
    _, cache = model.run_with_cache(
        b.tokens, names_filter=lambda n: n.endswith(("hook_pattern", "hook_v"))
    )
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    out = {k: torch.zeros(n_layers, n_heads) for k in SCORE_KINDS}
    for layer in range(n_layers):
        pat = cache[f"blocks.{layer}.attn.hook_pattern"]
        vn = cache[f"blocks.{layer}.attn.hook_v"].norm(dim=-1)  # [b, pos, head]
        for h in range(n_heads):
            prev, dup, ind, vw, cur, first = [], [], [], [], [], []
            for i in range(b.tokens.shape[0]):
                s, end = int(b.starts[i]), int(b.starts[i]) + b.n_repeats * b.period
                for q in range(2, end):
                    prev.append(pat[i, h, q, q - 1])
                for q in range(1, end):
                    cur.append(pat[i, h, q, q])
                    first.append(pat[i, h, q, 0])
                for q in range(s + b.period, end):
                    dup.append(pat[i, h, q, q - b.period])
                    ind.append(pat[i, h, q, q - b.period + 1])
                    w = pat[i, h, q] * vn[i, :, h]
                    vw.append(w[q - b.period + 1] / w.sum())
            out["previous_token"][layer, h] = torch.stack(prev).mean()
            out["duplicate_token"][layer, h] = torch.stack(dup).mean()
            out["induction"][layer, h] = torch.stack(ind).mean()
            out["induction_vw"][layer, h] = torch.stack(vw).mean()
            out["current_token"][layer, h] = torch.stack(cur).mean()
            out["first_token"][layer, h] = torch.stack(first).mean()
    return out


def test_scores_match_direct_computation(tiny_model):
    b = repeated_tokens(5, 6, low=0, high=63, bos_id=0, prefix_max=4, seed=1)
    with torch.no_grad():
        got = head_scores(tiny_model, b, batch_size=2)
        want = _direct_scores(tiny_model, b)
    for k in SCORE_KINDS:
        torch.testing.assert_close(got.get(k), want[k], atol=1e-5, rtol=1e-4)


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


def test_fresh_init_null(tiny_model):
    report = discover_heads(tiny_model, tiny_codec(64), n_seqs=8, null="fresh_init", n_null=2)
    assert report.null == "fresh_init" and report.n_null_samples == 2
    assert all(0 <= t <= 1 for t in report.taus.values())


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
