"""Composition scores: how much an earlier head's OV output feeds a later head's Q, K or V.

Row-vector convention (as in ARENA): ``W_A = W_OV`` of the earlier head; ``W_B`` is the later
head's ``W_QK`` (Q-composition), ``W_QK^T`` (K-composition) or ``W_OV`` (V-composition); the score
is ``‖W_A W_B‖_F / (‖W_A‖_F ‖W_B‖_F)``, compared with the mean for random matrices of the same
shapes (:func:`composition_baseline`). Models with LayerNorm are read on folded weights
(:func:`~interp_toolkit.weights.circuits.circuit_model`).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.weights.circuits import circuit_model, head_weights

COMPOSITION_KINDS = ("q", "k", "v")


def _factors(m: TransformerBridge, kind: str, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Left/right factors [L, H, d, D], [L, H, D, d] of every head's W_OV, W_QK or W_QK^T."""
    with torch.no_grad():
        w_q, w_k, w_v, w_o = (head_weights(m, n).double() for n in ("W_Q", "W_K", "W_V", "W_O"))
        if side == "a" or kind == "v":
            return w_v, w_o
        if kind == "q":  # W_QK = W_Q W_K^T
            return w_q, w_k.transpose(-1, -2)
        # kind == "k": W_QK^T = W_K W_Q^T
        return w_k, w_q.transpose(-1, -2)


def _comp(a1: torch.Tensor, a2: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """‖(a1 a2)(b1 b2)‖_F / (‖a1 a2‖_F ‖b1 b2‖_F) for all pairs: a* [n, ...], b* [m, ...] -> [n, m].

    Uses Gram matrices so everything is d_head x d_head: ‖A1 M B2‖² = Σ (G_A M) ∘ (M G_B) with
    G_A = A1ᵀA1, G_B = B2 B2ᵀ, M = A2 B1."""
    ga = a1.transpose(-1, -2) @ a1  # [n, D, D]
    gb = b2 @ b2.transpose(-1, -2)  # [m, D, D]
    na = (a2 * (ga @ a2)).sum((-1, -2)).clamp_min(0).sqrt()  # ‖a1 a2‖
    gb1 = b1.transpose(-1, -2) @ b1  # for ‖b1 b2‖
    nb = (b2 * (gb1 @ b2)).sum((-1, -2)).clamp_min(0).sqrt()
    mm = torch.einsum("nie,mej->nmij", a2, b1)  # [n, m, D, D]
    left = torch.einsum("nik,nmkj->nmij", ga, mm)
    right = torch.einsum("nmik,mkj->nmij", mm, gb)
    nab = (left * right).sum((-1, -2)).clamp_min(0).sqrt()
    return nab / (na[:, None] * nb[None, :]).clamp_min(1e-30)


def composition_scores(
    model: TransformerBridge, kind: str
) -> Float[torch.Tensor, "layer_a head_a layer_b head_b"]:
    """Q-, K- or V-composition of every earlier head A with every later head B.

    ``score[la, ha, lb, hb] = ‖W_A W_B‖_F / (‖W_A‖_F ‖W_B‖_F)`` with ``W_A = W_OV`` of A and
    ``W_B`` = ``W_QK`` (q), ``W_QK^T`` (k) or ``W_OV`` (v) of B (row convention, as in ARENA);
    NaN where ``lb <= la``. Computed through d_head x d_head Gram matrices (never d_model²·pairs).
    """
    kind = kind.lower()
    if kind not in COMPOSITION_KINDS:
        raise UserError(f"composition kind {kind!r} is unknown: use q, k or v.")
    m = circuit_model(model)
    n_layers, n_heads = int(m.cfg.n_layers), int(m.cfg.n_heads)
    out = torch.full((n_layers, n_heads, n_layers, n_heads), float("nan"))
    a1, a2 = _factors(m, kind, "a")
    b1, b2 = _factors(m, kind, "b")
    for la in range(n_layers):
        for lb in range(la + 1, n_layers):
            out[la, :, lb, :] = _comp(a1[la], a2[la], b1[lb], b2[lb]).float()
    return out


def composition_baseline(model: TransformerBridge, n_samples: int = 200, seed: int = 0) -> float:
    """Mean composition score of random low-rank matrices of the same shapes (ARENA: factors
    [d_model, d_head] drawn with ``kaiming_uniform_(a=sqrt(5))``). Subtract it, or compare."""
    d_model, d_head = int(model.cfg.d_model), int(model.cfg.d_head)
    gen = rng(seed, "composition_baseline")
    # kaiming_uniform(a=sqrt(5)) on [d_model, d_head]: U(±1/sqrt(fan_in))
    bound = 1.0 / math.sqrt(d_head)

    def draw() -> torch.Tensor:
        uniform = torch.rand(n_samples, d_model, d_head, generator=gen, dtype=torch.float64)
        return (uniform * 2 - 1) * bound

    a1, a2, b1, b2 = draw(), draw().transpose(-1, -2), draw(), draw().transpose(-1, -2)
    scores = torch.stack(
        [
            _comp(a1[i : i + 1], a2[i : i + 1], b1[i : i + 1], b2[i : i + 1])[0, 0]
            for i in range(n_samples)
        ]
    )
    return float(scores.mean())
