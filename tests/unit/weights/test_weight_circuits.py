"""QK/OV circuits, copying scores, top-k copy accuracy, composition (tiny models, fast)."""

from __future__ import annotations

import math

import pytest
import torch
from transformer_lens import FactoredMatrix

from interp_toolkit.errors import UserError
from interp_toolkit.stats.thresholds import EMPTY_OV_GAIN
from interp_toolkit.weights import circuits as C
from interp_toolkit.weights import composition as CO


def _set_ov(model, layer, head, w_v, w_o):
    """Write a head's W_V [d, D] and W_O [D, d] into the live nn.Linear weights."""
    d_head = model.cfg.d_head
    rows = slice(head * d_head, (head + 1) * d_head)
    with torch.no_grad():
        model.blocks[layer].attn.v.original_component.weight[rows] = w_v.T
        model.blocks[layer].attn.o.original_component.weight[:, rows] = w_o.T


def _identity_on_embeddings(model):
    """Tie W_U = W_E^T and set W_V = U, W_O = U^T with U the top-d_head right singular vectors of
    W_E: the full OV circuit becomes W_E U U^T W_E^T, positive semi-definite (identity-like on
    the embeddings' main subspace)."""
    d_head = model.cfg.d_head
    with torch.no_grad():
        w_e = model.W_E.detach()
        model.unembed.original_component.weight.copy_(w_e)  # W_U = W_E^T
        _, _, vh = torch.linalg.svd(w_e, full_matrices=False)
        u = vh[:d_head].T  # [d, D], orthonormal columns
    return u, u.T


def test_full_ov_and_qk_are_factored_and_correct(tiny_model):
    with torch.no_grad():
        ov = C.full_ov(tiny_model, 1, 2)
        qk = C.full_qk(tiny_model, 0, 3)
        m = tiny_model
        dense_ov = m.W_E @ m.W_V[1, 2] @ m.W_O[1, 2] @ m.W_U
        dense_qk = m.W_E @ m.W_Q[0, 3] @ m.W_K[0, 3].T @ m.W_E.T
    assert isinstance(ov, FactoredMatrix) and isinstance(qk, FactoredMatrix)
    assert ov.shape == (64, 64) and ov.mdim == tiny_model.cfg.d_head
    torch.testing.assert_close(ov.AB, dense_ov, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(qk.AB, dense_qk, atol=1e-4, rtol=1e-4)


def test_copying_score_identity_positive_negative(tiny_model):
    w_v, w_o = _identity_on_embeddings(tiny_model)
    _set_ov(tiny_model, 0, 1, w_v, w_o)
    _set_ov(tiny_model, 1, 2, w_v, -w_o)
    scores = C.copying_scores(tiny_model)
    assert scores.shape == (2, 4)
    assert scores[0, 1] > 0.99
    assert scores[1, 2] < -0.99
    # agrees with the eigenvalues of the dense V x V circuit (non-zero ones)
    with torch.no_grad():
        dense = C.full_ov(tiny_model, 0, 1).AB.double()
    ev = torch.linalg.eigvals(dense)
    assert float(ev.real.sum() / ev.abs().sum()) == pytest.approx(float(scores[0, 1]), abs=1e-3)
    acc = C.top_k_copy_accuracy(tiny_model, k=1)
    assert acc[0, 1] > 0.5 and acc[1, 2] == 0.0


def _dense_ranks(model, layer, head):
    """Naive dense full-OV ranks in float64: #{j != t : L[t, j] >= L[t, t]}."""
    ov = C.full_ov(model, layer, head)
    full = ov.A.double() @ ov.B.double()
    return (full >= full.diagonal()[:, None]).sum(1) - 1


def test_copy_accuracy_equals_the_dense_computation(tiny_model):
    want = {k: torch.zeros(2, 4) for k in (1, 5)}
    for layer in range(2):
        for h in range(4):
            ranks = _dense_ranks(tiny_model, layer, h)
            for k in (1, 5):
                want[k][layer, h] = (ranks < k).float().mean()
            torch.testing.assert_close(
                C.copy_ranks(tiny_model, layer, h, cap=None), ranks, rtol=0, atol=0
            )
    for budget in (None, 4096):  # a tiny budget: many row chunks per column block
        got = C.copy_accuracy(tiny_model, (1, 5), budget=budget, device="cpu")
        for k in (1, 5):
            torch.testing.assert_close(got[k], want[k], rtol=0, atol=0)
    assert torch.equal(C.top_k_copy_accuracy(tiny_model, k=5), want[5])
    rows = torch.tensor([3, 9, 40])
    some = C.copy_accuracy(tiny_model, (5,), rows=rows, heads=[(1, 2)])[5]
    assert torch.isnan(some[0]).all() and torch.isnan(some[1, :2]).all()
    assert float(some[1, 2]) == float((_dense_ranks(tiny_model, 1, 2)[rows] < 5).float().mean())
    with pytest.raises(UserError, match="k >= 1"):
        C.top_k_copy_accuracy(tiny_model, k=0)
    with pytest.raises(UserError, match="token ids"):
        C.copy_accuracy(tiny_model, rows=torch.tensor([64]))


def _unit_tokens_in_head_space(model, head_sign: dict[tuple[int, int], float]):
    """Every token embedding a distinct unit vector inside residual dims 0..d_head-1, W_U = W_E^T,
    and the listed heads' OV = ±(projector onto those dims), the others' OV = 0. Then the full OV
    row of token t is ±(e_t . e_j): +: t's own logit (1) is strictly the largest -> copy accuracy
    1; -: it is strictly the smallest -> 0; empty heads: every logit ties -> 0."""
    d_head, d_model = int(model.cfg.d_head), int(model.cfg.d_model)
    gen = torch.Generator().manual_seed(0)
    e = torch.zeros(int(model.cfg.d_vocab), d_model)
    e[:, :d_head] = torch.randn(e.shape[0], d_head, generator=gen)
    e = e / e.norm(dim=1, keepdim=True)
    eye = torch.eye(d_model)
    with torch.no_grad():
        model.embed.original_component.weight.copy_(e)
        model.unembed.original_component.weight.copy_(e)  # W_U = W_E^T
        model.unembed.original_component.bias.zero_()
        for layer in range(int(model.cfg.n_layers)):
            for h in range(int(model.cfg.n_heads)):
                sign = head_sign.get((layer, h), 0.0)
                _set_ov(model, layer, h, eye[:, :d_head], sign * eye[:d_head])


def test_hand_built_copying_heads_have_known_accuracy(tiny_model):
    _unit_tokens_in_head_space(tiny_model, {(0, 1): 1.0, (1, 2): -1.0})
    acc = C.copy_accuracy(tiny_model, (1, 5))
    want = torch.zeros(2, 4)
    want[0, 1] = 1.0  # copies every token; (1, 2) anti-copies and the empty heads tie: 0
    torch.testing.assert_close(acc[1], want, rtol=0, atol=0)
    torch.testing.assert_close(acc[5], want, rtol=0, atol=0)
    ranks = C.copy_ranks(tiny_model, 1, 2, cap=None)
    assert ranks.tolist() == [63] * 64  # own logit -1 is strictly the smallest of the row
    scores = C.copying_scores(tiny_model)
    assert float(scores[0, 1]) == pytest.approx(1.0, abs=1e-5)
    assert float(scores[1, 2]) == pytest.approx(-1.0, abs=1e-5)
    empty = torch.ones(2, 4, dtype=torch.bool)
    empty[0, 1] = empty[1, 2] = False
    assert torch.equal(torch.isnan(scores), empty)  # empty OV circuits have no score


def test_empty_ov_circuit_says_empty(tiny_model):
    from analysis_helpers import tiny_codec

    d_head, d_model = int(tiny_model.cfg.d_head), int(tiny_model.cfg.d_model)
    _set_ov(tiny_model, 0, 3, torch.randn(d_model, d_head), torch.zeros(d_head, d_model))
    w_o = tiny_model.W_O[1, 1].detach().clone()
    _set_ov(tiny_model, 1, 1, tiny_model.W_V[1, 1].detach().clone(), w_o * 1e-8)  # near-empty
    gain = C.ov_gain(tiny_model)
    assert float(gain[0, 3]) == 0.0 and float(gain[1, 1]) < EMPTY_OV_GAIN
    assert float(gain[0, 0]) > 1e3 * EMPTY_OV_GAIN  # a random head is far from empty
    scores = C.copying_scores(tiny_model)
    assert torch.isnan(scores[0, 3]) and torch.isnan(scores[1, 1])
    assert int(torch.isnan(scores).sum()) == 2
    res = C.head_circuit(tiny_model, tiny_codec(64), 0, 3, token_ids=[3], k=2).to_dict()
    assert res["copying_score"] is None and "empty OV circuit" in res["copying_note"]
    assert res["top1_accuracy"] == 0.0  # every logit ties, and ties count against the token
    live = C.head_circuit(tiny_model, tiny_codec(64), 0, 0, token_ids=[3], k=2).to_dict()
    assert live["copying_note"] is None and -1 <= live["copying_score"] <= 1


def test_ov_gain_matches_the_dense_circuit(tiny_model):
    gain = C.ov_gain(tiny_model)
    m = tiny_model
    with torch.no_grad():
        for layer, h in ((0, 0), (1, 3)):
            dense = C.full_ov(m, layer, h).AB.double()
            want = dense.norm() / (m.W_E.double().norm() * m.W_U.double().norm())
            assert float(gain[layer, h]) == pytest.approx(float(want), rel=1e-5)


def test_copy_accuracy_refuses_an_absent_device(tiny_model):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(UserError, match="--device cuda: no CUDA GPU"):
        C.copy_accuracy(tiny_model, device="cuda")


def test_top_boosted_tokens(tiny_model):
    top = C.top_boosted_tokens(tiny_model, 1, 0, token_id=5, k=4)
    with torch.no_grad():
        row = C.full_ov(tiny_model, 1, 0).AB[5]
    assert [t for t, _ in top] == row.topk(4).indices.tolist()
    with pytest.raises(UserError):
        C.top_boosted_tokens(tiny_model, 1, 0, token_id=64, k=4)


def test_pos_qk_pattern(tiny_model):
    pat = C.pos_qk_pattern(tiny_model, 0, 1)
    m = tiny_model
    with torch.no_grad():
        s = m.W_pos @ m.W_Q[0, 1] @ m.W_K[0, 1].T @ m.W_pos.T / math.sqrt(m.cfg.d_head)
        s = torch.where(torch.tril(torch.ones_like(s)).bool(), s, torch.tensor(-1e6)).softmax(-1)
    torch.testing.assert_close(pat, s, atol=1e-5, rtol=1e-5)
    assert torch.allclose(pat.sum(-1), torch.ones(m.cfg.n_ctx))


def test_pos_qk_refuses_rotary(tiny_cfg):
    from interp_toolkit.models.build import build_model

    model = build_model(tiny_cfg.replace(positional="rotary"))
    with pytest.raises(UserError, match="W_pos"):
        C.pos_qk_pattern(model, 0, 0)


def _comp(w_a, w_b):
    return float((w_a @ w_b).norm() / (w_a.norm() * w_b.norm()))


def test_composition_scores_match_direct(tiny_cfg):
    from interp_toolkit.models.build import build_model

    model = build_model(tiny_cfg.replace(n_layers=3))
    with torch.no_grad():
        ov = model.W_V @ model.W_O  # [L, H, d, d]
        qk = model.W_Q @ model.W_K.transpose(-1, -2)
        for kind, w_b in (("q", qk), ("k", qk.transpose(-1, -2)), ("v", ov)):
            got = CO.composition_scores(model, kind)
            assert got.shape == (3, 4, 3, 4)
            assert torch.isnan(got[1, :, 0]).all() and torch.isnan(got[1, :, 1]).all()
            for la, ha, lb, hb in ((0, 1, 1, 2), (0, 3, 2, 0), (1, 2, 2, 3)):
                want = _comp(ov[la, ha].double(), w_b[lb, hb].double())
                assert float(got[la, ha, lb, hb]) == pytest.approx(want, rel=1e-4)
    base = CO.composition_baseline(model, n_samples=50)
    assert 0 < base < 1
    with pytest.raises(UserError):
        CO.composition_scores(model, "x")


def test_check_head(tiny_model):
    C.check_head(tiny_model, 1, 3)
    with pytest.raises(UserError, match="head 2.0 does not exist"):
        C.check_head(tiny_model, 2, 0)


def test_head_circuit_summary(tiny_model):
    from analysis_helpers import tiny_codec

    res = C.head_circuit(tiny_model, tiny_codec(64), 0, 1, token_ids=[3, 4], k=3)
    d = res.to_dict()
    assert d["head"] == "0.1" and d["n_rows"] == 64 and d["copying_note"] is None
    assert -1 <= d["copying_score"] <= 1 and 0 <= d["top1_accuracy"] <= d["top5_accuracy"] <= 1
    assert len(d["boosted"]) == 2 and len(d["boosted"][0]["top"]) == 3
    assert d["pos_prev_token"] is not None


def test_ln_models_are_read_on_a_processed_copy():
    from transformer_lens import TransformerBridge, TransformerBridgeConfig

    cfg = TransformerBridgeConfig(
        d_model=32,
        d_head=8,
        n_heads=4,
        n_layers=2,
        n_ctx=16,
        d_vocab=40,
        attn_only=True,
        normalization_type="LN",
        seed=0,
    )
    model = TransformerBridge.boot_native(cfg, device="cpu", dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    twin = C.circuit_model(model)
    assert twin is not model and C.circuit_model(twin) is twin
    C.copying_scores(model)
    C.full_ov(model, 0, 0)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
