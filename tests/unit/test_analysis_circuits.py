"""QK/OV circuits, copying scores, top-k copy accuracy, composition (tiny models, fast)."""

from __future__ import annotations

import math

import pytest
import torch
from transformer_lens import FactoredMatrix

from interp_toolkit.analysis import circuits as C
from interp_toolkit.errors import UserError


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
    assert acc[0, 1] > acc[1, 2]


def test_topk_accuracy_chunks_equal_dense(tiny_model):
    for k in (1, 5):
        got = C.top_k_copy_accuracy(tiny_model, k=k, chunk=7)
        want = torch.zeros(2, 4)
        with torch.no_grad():
            for layer in range(2):
                for h in range(4):
                    dense = C.full_ov(tiny_model, layer, h).AB
                    top = dense.topk(k, dim=1).indices
                    want[layer, h] = (top == torch.arange(64)[:, None]).any(1).float().mean()
        torch.testing.assert_close(got, want)
    both = C.copy_accuracy(tiny_model, (1, 5), chunk=13)
    assert (both[5] >= both[1]).all()


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
    from interp_toolkit.models import build_model

    model = build_model(tiny_cfg.replace(positional="rotary"))
    with pytest.raises(UserError, match="W_pos"):
        C.pos_qk_pattern(model, 0, 0)


def _comp(w_a, w_b):
    return float((w_a @ w_b).norm() / (w_a.norm() * w_b.norm()))


def test_composition_scores_match_direct(tiny_cfg):
    from interp_toolkit.models import build_model

    model = build_model(tiny_cfg.replace(n_layers=3))
    with torch.no_grad():
        ov = model.W_V @ model.W_O  # [L, H, d, d]
        qk = model.W_Q @ model.W_K.transpose(-1, -2)
        for kind, w_b in (("q", qk), ("k", qk.transpose(-1, -2)), ("v", ov)):
            got = C.composition_scores(model, kind)
            assert got.shape == (3, 4, 3, 4)
            assert torch.isnan(got[1, :, 0]).all() and torch.isnan(got[1, :, 1]).all()
            for la, ha, lb, hb in ((0, 1, 1, 2), (0, 3, 2, 0), (1, 2, 2, 3)):
                want = _comp(ov[la, ha].double(), w_b[lb, hb].double())
                assert float(got[la, ha, lb, hb]) == pytest.approx(want, rel=1e-4)
    base = C.composition_baseline(model, n_samples=50)
    assert 0 < base < 1
    with pytest.raises(UserError):
        C.composition_scores(model, "x")


def test_check_head(tiny_model):
    C.check_head(tiny_model, 1, 3)
    with pytest.raises(UserError, match="head 2.0 does not exist"):
        C.check_head(tiny_model, 2, 0)


def test_head_circuit_summary(tiny_model):
    from analysis_helpers import tiny_codec

    res = C.head_circuit(tiny_model, tiny_codec(64), 0, 1, token_ids=[3, 4], k=3)
    d = res.to_dict()
    assert d["head"] == "0.1" and d["n_rows"] == 64
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
