"""QK and OV circuits read off the weights, copying scores, and composition scores.

Conventions (TransformerLens row-vector convention, ``x @ W``):

- full OV circuit of head ``L.H``: ``W_E W_V W_O W_U`` — rows are the attended-to (source) token,
  columns the output logit. A :class:`~transformer_lens.FactoredMatrix` of shape [V, V] with inner
  dimension d_head; never materialised.
- full QK circuit: ``W_E W_Q W_K^T W_E^T`` — rows query token, columns key token.
- Models with LayerNorm (GPT-2) are read on a ``copy.deepcopy`` put through
  ``enable_compatibility_mode()`` (LN folded into the weights); the caller's model is untouched.
  The final LN's scale is ignored, as usual.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from transformer_lens import FactoredMatrix, TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import STRICT_FP32, resolve_device
from interp_toolkit.stats.thresholds import EMPTY_OV_GAIN
from interp_toolkit.text.codecs import Codec
from interp_toolkit.weights.self_ranks import self_ranks

_PROCESSED = "_interp_toolkit_circuit_copy"


def circuit_model(model: TransformerBridge) -> TransformerBridge:
    """``model`` itself when it has no normalisation, else a processed deep copy (compat mode)."""
    if (
        not getattr(model.cfg, "normalization_type", None)
        or getattr(model, _PROCESSED, False)
        or getattr(model, "compatibility_mode", False) is True  # already processed (e.g. gpt2.load)
    ):
        return model
    twin = copy.deepcopy(model)
    twin.enable_compatibility_mode(disable_warnings=True)
    setattr(twin, _PROCESSED, True)
    return twin.eval()


def check_head(model: TransformerBridge, layer: int, head: int) -> None:
    HeadId(layer, head).check(int(model.cfg.n_layers), int(model.cfg.n_heads))


def _head_ov(
    m: TransformerBridge, layer: int, head: int, w_e: torch.Tensor, w_u: torch.Tensor
) -> tuple[Float[torch.Tensor, "v dh"], Float[torch.Tensor, "dh v"]]:
    """``W_E W_V`` and ``W_O W_U`` of one head of the processed model ``m``, computed in IEEE
    float32 on the device of ``w_e`` (``w_e``/``w_u``: that model's W_E/W_U on that device)."""
    attn = m.blocks[layer].attn
    dev = w_e.device
    with torch.no_grad(), STRICT_FP32.apply(dev):
        left = w_e @ attn.W_V[head].detach().to(dev)
        right = attn.W_O[head].detach().to(dev) @ w_u
    return left, right


def full_ov(model: TransformerBridge, layer: int, head: int) -> FactoredMatrix:
    """``W_E W_V W_O W_U`` of one head as a FactoredMatrix [d_vocab, d_vocab] (rank <= d_head)."""
    check_head(model, layer, head)
    m = circuit_model(model)
    return FactoredMatrix(*_head_ov(m, layer, head, m.W_E.detach(), m.W_U.detach()))


def full_qk(model: TransformerBridge, layer: int, head: int) -> FactoredMatrix:
    """``W_E W_Q W_K^T W_E^T`` of one head as a FactoredMatrix [d_vocab, d_vocab] (no biases,
    no 1/sqrt(d_head) scale)."""
    check_head(model, layer, head)
    m = circuit_model(model)
    with torch.no_grad():
        attn = m.blocks[layer].attn
        left = m.W_E @ attn.W_Q[head]  # [V, D]
        right = (m.W_E @ attn.W_K[head]).T  # [D, V]
        return FactoredMatrix(left.detach(), right.detach())


def ov_eigenvalues(model: TransformerBridge) -> torch.Tensor:
    """Non-zero eigenvalues of every head's full OV circuit, [layer, head, d_head] complex128.

    They equal the eigenvalues of the d_head x d_head product ``W_O (W_U W_E) W_V``.
    """
    m = circuit_model(model)
    with torch.no_grad():
        ue = (m.W_U @ m.W_E).double()  # [d, d]
        small = m.W_O.double() @ ue @ m.W_V.double()  # [L, H, D, D]
        return torch.linalg.eigvals(small)


def ov_gain(model: TransformerBridge) -> Float[torch.Tensor, "layer head"]:
    """``‖W_E W_V W_O W_U‖_F / (‖W_E‖_F ‖W_U‖_F)`` of every head (float64): how much of the
    embedding the head's full OV circuit carries to the logits. Computed through d x d Gram
    matrices (``‖A B‖² = Σ (AᵀA) ∘ (B Bᵀ)``), never V x V."""
    m = circuit_model(model)
    with torch.no_grad():
        w_e, w_u = m.W_E.double(), m.W_U.double()
        g_e, g_u = w_e.T @ w_e, w_u @ w_u.T  # [d, d]
        w_v, w_o = m.W_V.double(), m.W_O.double()  # [L, H, d, D], [L, H, D, d]
        left = w_v.transpose(-1, -2) @ g_e @ w_v  # [L, H, D, D]
        right = w_o @ g_u @ w_o.transpose(-1, -2)
        sq = (left * right).sum((-1, -2)).clamp_min(0)
        return (sq.sqrt() / (g_e.trace() * g_u.trace()).sqrt().clamp_min(1e-300)).cpu()


def copying_scores(model: TransformerBridge) -> Float[torch.Tensor, "layer head"]:
    """Σ Re λ / Σ |λ| over the eigenvalues of each head's full OV circuit, in [-1, 1].

    Positive: the head tends to raise the logit of the token it attends to (copying). NaN for a
    head whose OV circuit is empty (:func:`ov_gain` <= :data:`EMPTY_OV_GAIN`): its eigenvalues
    are rounding noise, so there is no score to report."""
    m = circuit_model(model)  # once: an LN model is processed on a copy
    ev = ov_eigenvalues(m)
    score = (ev.real.sum(-1) / ev.abs().sum(-1).clamp_min(1e-30)).float().cpu()
    return score.masked_fill(ov_gain(m) <= EMPTY_OV_GAIN, float("nan"))


def copying_table(model: TransformerBridge) -> dict[str, Any]:
    """Every head's copying score for JSON: ``None`` for an empty OV circuit, whose heads are
    listed under ``empty`` with the reason (no NaN in the file)."""
    scores = copying_scores(model)
    return {
        "copying_score": [
            [None if math.isnan(v) else round(v, 4) for v in row] for row in scores.tolist()
        ],
        "empty": [str(HeadId(*map(int, i))) for i in torch.isnan(scores).nonzero().tolist()],
        "empty_rule": f"empty OV circuit: gain <= {EMPTY_OV_GAIN:g}, no copying score",
    }


def _heads_factors(
    m: TransformerBridge, heads: list[tuple[int, int]], dev: torch.device
) -> Iterator[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """``(layer, head, W_E W_V, W_O W_U)`` of each head, computed on ``dev``."""
    w_e, w_u = m.W_E.detach().to(dev), m.W_U.detach().to(dev)
    for layer, head in heads:
        check_head(m, layer, head)
        yield (layer, head, *_head_ov(m, layer, head, w_e, w_u))


def _device(m: TransformerBridge, device: str | torch.device | None) -> torch.device:
    return m.W_E.device if device is None else resolve_device(device)


def _rows(m: TransformerBridge, rows: torch.Tensor | None, dev: torch.device) -> torch.Tensor:
    d_vocab = int(m.cfg.d_vocab)
    if rows is None:
        return torch.arange(d_vocab, device=dev)
    if len(rows) and not (0 <= int(rows.min()) and int(rows.max()) < d_vocab):
        raise UserError(f"rows must be token ids in 0..{d_vocab - 1}.")
    return rows.to(dev)


def copy_ranks(
    model: TransformerBridge,
    layer: int,
    head: int,
    *,
    rows: Int[torch.Tensor, " n"] | None = None,
    cap: int | None = 5,
    device: str | torch.device | None = None,
    budget: int | None = None,
    candidates: str | None = None,
) -> Int[torch.Tensor, " n"]:
    """For each source token ``t`` (all of the vocabulary, or ``rows``): how many other output
    logits of the full OV circuit row ``t`` are at least the logit of ``t`` itself (ties count
    against ``t``), capped at ``cap`` (``cap=None``: the full count). Rank 0 means the head boosts
    ``t`` strictly more than any other token. Exact (see :mod:`.self_ranks`); runs on ``device``
    (default: the model's), in blocks of ``budget`` bytes (default: from the device's memory);
    ``candidates``: ``"bf16"`` or ``"fp32"`` matmuls find the candidates (default: bf16 where
    it is fast), the ranks are the same."""
    m = circuit_model(model)
    dev = _device(m, device)
    cap = int(m.cfg.d_vocab) if cap is None else cap
    (_, _, left, right) = next(_heads_factors(m, [(layer, head)], dev))
    return self_ranks(left, right, _rows(m, rows, dev), cap, budget, candidates).cpu()


def copy_accuracy(
    model: TransformerBridge,
    ks: tuple[int, ...] = (1, 5),
    *,
    rows: Int[torch.Tensor, " n"] | None = None,
    heads: list[tuple[int, int]] | None = None,
    device: str | torch.device | None = None,
    budget: int | None = None,
    progress: bool = False,
    candidates: str | None = None,
) -> dict[int, Float[torch.Tensor, "layer head"]]:
    """Top-k "does this token boost itself" accuracy for every head and every k in ``ks``:
    the fraction of source tokens whose own logit is among the k largest of their full-OV row,
    ties counted against the token (:func:`copy_ranks` < k). Heads not in ``heads`` are NaN.
    Exact and fast enough for every head over the full vocabulary (:mod:`.self_ranks`;
    ``candidates`` as in :func:`copy_ranks`)."""
    from interp_toolkit.runtime.progress import progress_bar

    if not ks or min(ks) < 1:
        raise UserError(f"ks={ks} cannot work: use k >= 1.")
    m = circuit_model(model)
    dev = _device(m, device)
    n_layers, n_heads = int(m.cfg.n_layers), int(m.cfg.n_heads)
    out = {k: torch.full((n_layers, n_heads), float("nan")) for k in ks}
    wanted = (
        heads if heads is not None else [(la, h) for la in range(n_layers) for h in range(n_heads)]
    )
    idx = _rows(m, rows, dev)
    factors = _heads_factors(m, wanted, dev)
    for layer, head, left, right in progress_bar(
        factors, total=len(wanted), desc="copy accuracy", unit="head", enabled=progress
    ):
        ranks = self_ranks(left, right, idx, max(ks), budget, candidates).tolist()
        for k in ks:
            out[k][layer, head] = sum(r < k for r in ranks) / max(1, len(ranks))
    return out


def top_k_copy_accuracy(
    model: TransformerBridge,
    k: int = 1,
    *,
    rows: Int[torch.Tensor, " n"] | None = None,
    device: str | torch.device | None = None,
) -> Float[torch.Tensor, "layer head"]:
    """Top-k copy accuracy of every head (see :func:`copy_accuracy`)."""
    return copy_accuracy(model, (k,), rows=rows, device=device)[k]


def top_boosted_tokens(
    model: TransformerBridge, layer: int, head: int, token_id: int, k: int = 10
) -> list[tuple[int, float]]:
    """The ``k`` output tokens whose logits the head raises most when it attends to ``token_id``
    (one row of the full OV circuit): ``[(token_id, logit), ...]`` in decreasing order."""
    check_head(model, layer, head)
    d_vocab = int(model.cfg.d_vocab)
    validate.in_vocab([token_id], d_vocab, "token_id")
    validate.count(k, "k")
    m = circuit_model(model)
    with torch.no_grad():
        attn = m.blocks[layer].attn
        row = (m.W_E[token_id] @ attn.W_V[head]) @ attn.W_O[head] @ m.W_U  # [V]
        vals, idx = row.topk(min(k, d_vocab))
    return [(int(i), float(v)) for i, v in zip(idx.tolist(), vals.tolist(), strict=True)]


def pos_qk_pattern(model: TransformerBridge, layer: int, head: int) -> Float[torch.Tensor, "q k"]:
    """Position-position attention of a head from positional embeddings alone:
    ``softmax(mask(W_pos W_Q W_K^T W_pos^T / sqrt(d_head)))`` (no biases, as in ARENA)."""
    check_head(model, layer, head)
    if getattr(model.cfg, "positional_embedding_type", "standard") != "standard":
        raise UserError(
            f"this model uses {model.cfg.positional_embedding_type} positions and has no W_pos: "
            "the position-position QK pattern needs learned absolute positions."
        )
    m = circuit_model(model)
    with torch.no_grad():
        attn = m.blocks[layer].attn
        q = m.W_pos @ attn.W_Q[head]
        k = m.W_pos @ attn.W_K[head]
        scores = (q @ k.T) / math.sqrt(int(m.cfg.d_head))
        n = scores.shape[0]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=scores.device), 1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1).detach()


def pos_prev_token_score(model: TransformerBridge, layer: int, head: int) -> float:
    """Mean of the sub-diagonal of :func:`pos_qk_pattern` (ARENA's "avg lower-diagonal value")."""
    return float(pos_qk_pattern(model, layer, head).diagonal(-1).mean())


@dataclass
class HeadCircuit:
    """Summary of one head's circuits (what ``interp-toolkit circuits`` prints)."""

    head: str
    copying_score: float | None
    copying_note: str | None
    top1_accuracy: float
    top5_accuracy: float
    pos_prev_token: float | None
    boosted: list[dict[str, Any]]
    n_rows: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "copying_score": self.copying_score,
            "copying_note": self.copying_note,
            "top1_accuracy": self.top1_accuracy,
            "top5_accuracy": self.top5_accuracy,
            "pos_prev_token": self.pos_prev_token,
            "n_rows": self.n_rows,
            "boosted": self.boosted,
        }


def head_circuit(
    model: TransformerBridge,
    codec: Codec,
    layer: int,
    head: int,
    *,
    token_ids: list[int],
    k: int = 10,
    rows: Int[torch.Tensor, " n"] | None = None,
) -> HeadCircuit:
    """Copying score, top-1/top-5 copy accuracy, the pos-QK previous-token value (when the model
    has W_pos), and the top ``k`` boosted tokens of each of ``token_ids``. An empty OV circuit has
    no copying score (None) and says so in ``copying_note``."""
    check_head(model, layer, head)
    validate.in_vocab(token_ids, int(model.cfg.d_vocab), "token_ids")
    validate.count(k, "k")
    m = circuit_model(model)
    gain = float(ov_gain(m)[layer, head])
    score: float | None = float(copying_scores(m)[layer, head])
    note = None
    if gain <= EMPTY_OV_GAIN:
        score = None
        note = f"empty OV circuit: gain {gain:.1e} <= {EMPTY_OV_GAIN:g}, no copying score"
    ranks = copy_ranks(m, layer, head, rows=rows)
    pos = None
    if getattr(m.cfg, "positional_embedding_type", "standard") == "standard":
        pos = pos_prev_token_score(m, layer, head)
    boosted = []
    for tid in token_ids:
        top = top_boosted_tokens(m, layer, head, int(tid), k)
        strs = codec.str_tokens([t for t, _ in top])
        boosted.append(
            {
                "token": codec.str_tokens([int(tid)])[0],
                "token_id": int(tid),
                "top": [
                    {"token": s, "token_id": t, "logit": v}
                    for s, (t, v) in zip(strs, top, strict=True)
                ],
            }
        )
    return HeadCircuit(
        head=str(HeadId(layer, head)),
        copying_score=score,
        copying_note=note,
        top1_accuracy=float((ranks < 1).float().mean()),
        top5_accuracy=float((ranks < 5).float().mean()),
        pos_prev_token=pos,
        boosted=boosted,
        n_rows=int(len(ranks)),
    )
