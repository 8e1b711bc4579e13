"""QK and OV circuits read off the weights, copying scores, and composition scores.

Conventions (TransformerLens row-vector convention, ``x @ W``):

- full OV circuit of head ``L.H``: ``W_E W_V W_O W_U`` — rows are the attended-to (source) token,
  columns the output logit. A :class:`~transformer_lens.FactoredMatrix` of shape [V, V] with inner
  dimension d_head; never materialised.
- full QK circuit: ``W_E W_Q W_K^T W_E^T`` — rows query token, columns key token.
- Models with LayerNorm or RMSNorm (GPT-2, Llama, ...) are read on a ``copy.deepcopy`` put
  through ``enable_compatibility_mode()`` (the norm's scale folded into the weights); the
  caller's model is untouched. The final norm's per-position scale is ignored, as usual.
- Grouped-query attention: ``W_K``/``W_V`` have one entry per K/V head; every reader here takes
  them per query head (:func:`head_weights`), so head ``L.H`` is always query head ``H``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from transformer_lens import FactoredMatrix, TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.heads.repeats import default_token_range
from interp_toolkit.models.activations import per_query_head
from interp_toolkit.runs.folder import Run
from interp_toolkit.runs.target import Target
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


def head_weights(m: TransformerBridge, name: str, layer: int | None = None) -> torch.Tensor:
    """``W_Q``, ``W_K``, ``W_V`` or ``W_O`` with one entry per query head, detached: of every layer
    (``[layer, head, ...]``) or of ``layer`` (``[head, ...]``). Under grouped-query attention a
    query head's ``W_K``/``W_V`` is its K/V head's (``h // (n_heads // n_kv)``)."""
    w = getattr(m if layer is None else m.blocks[layer].attn, name).detach()
    return per_query_head(w, int(m.cfg.n_heads), 0 if layer is not None else 1)


def check_head(model: TransformerBridge, layer: int, head: int) -> None:
    HeadId(layer, head).check(int(model.cfg.n_layers), int(model.cfg.n_heads))


def _head_ov(
    m: TransformerBridge, layer: int, head: int, w_e: torch.Tensor, w_u: torch.Tensor
) -> tuple[Float[torch.Tensor, "v dh"], Float[torch.Tensor, "dh v"]]:
    """``W_E W_V`` and ``W_O W_U`` of one head of the processed model ``m``, computed in IEEE
    float32 on the device of ``w_e`` (``w_e``/``w_u``: that model's W_E/W_U on that device)."""
    dev = w_e.device
    with torch.no_grad(), STRICT_FP32.apply(dev):
        left = w_e @ head_weights(m, "W_V", layer)[head].to(dev)
        right = head_weights(m, "W_O", layer)[head].to(dev) @ w_u
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
        left = m.W_E @ head_weights(m, "W_Q", layer)[head]  # [V, D]
        right = (m.W_E @ head_weights(m, "W_K", layer)[head]).T  # [D, V]
        return FactoredMatrix(left.detach(), right.detach())


def ov_gain(model: TransformerBridge) -> Float[torch.Tensor, "layer head"]:
    """``‖W_E W_V W_O W_U‖_F / (‖W_E‖_F ‖W_U‖_F)`` of every head (float64): how much of the
    embedding the head's full OV circuit carries to the logits. Computed through d x d Gram
    matrices (``‖A B‖² = Σ (AᵀA) ∘ (B Bᵀ)``), never V x V."""
    m = circuit_model(model)
    with torch.no_grad():
        w_e, w_u = m.W_E.double(), m.W_U.double()
        g_e, g_u = w_e.T @ w_e, w_u @ w_u.T  # [d, d]
        w_v, w_o = head_weights(m, "W_V").double(), head_weights(m, "W_O").double()
        left = w_v.transpose(-1, -2) @ g_e @ w_v  # [L, H, D, D]
        right = w_o @ g_u @ w_o.transpose(-1, -2)
        sq = (left * right).sum((-1, -2)).clamp_min(0)
        return (sq.sqrt() / (g_e.trace() * g_u.trace()).sqrt().clamp_min(1e-300)).cpu()


def copying_scores(model: TransformerBridge) -> Float[torch.Tensor, "layer head"]:
    """Σ Re λ / Σ |λ| over the eigenvalues of each head's full OV circuit, in [-1, 1].

    Positive: the head tends to raise the logit of the token it attends to (copying). NaN for a
    head whose OV circuit is empty (:func:`ov_gain` <= :data:`EMPTY_OV_GAIN`): its eigenvalues
    are rounding noise, so there is no score to report. The non-zero eigenvalues of the full OV
    circuit are those of the d_head x d_head product ``W_O (W_U W_E) W_V`` (complex128)."""
    m = circuit_model(model)  # once: an LN model is processed on a copy
    with torch.no_grad():
        ue = (m.W_U @ m.W_E).double()  # [d, d]
        small = head_weights(m, "W_O").double() @ ue @ head_weights(m, "W_V").double()
        ev = torch.linalg.eigvals(small)  # [layer, head, d_head]
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
    dev = m.W_E.device if device is None else resolve_device(device)
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
    dev = m.W_E.device if device is None else resolve_device(device)
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
        w_v, w_o = head_weights(m, "W_V", layer)[head], head_weights(m, "W_O", layer)[head]
        row = (m.W_E[token_id] @ w_v) @ w_o @ m.W_U  # [V]
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
        q = m.W_pos @ head_weights(m, "W_Q", layer)[head]
        k = m.W_pos @ head_weights(m, "W_K", layer)[head]
        scores = (q @ k.T) / math.sqrt(int(m.cfg.d_head))
        n = scores.shape[0]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=scores.device), 1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1).detach()


def pos_prev_token_score(model: TransformerBridge, layer: int, head: int) -> float:
    """Mean of the sub-diagonal of :func:`pos_qk_pattern` (ARENA's "avg lower-diagonal value")."""
    return float(pos_qk_pattern(model, layer, head).diagonal(-1).mean())


@dataclass(kw_only=True)
class HeadCircuit(Jsonable):
    """Summary of one head's circuits (what ``interp-toolkit circuits`` prints), its fields in
    its JSON's order."""

    head: str
    copying_score: float | None
    copying_note: str | None
    top1_accuracy: float
    top5_accuracy: float
    accuracy_over: str = field(init=False)  # the ids the accuracies are over, in words
    # over the ids the model was trained on
    trained_top1: float | None = field(
        default=None, metadata=json_field(key="trained_top1_accuracy")
    )
    trained_top5: float | None = field(
        default=None, metadata=json_field(key="trained_top5_accuracy")
    )
    trained_rows: int | None = None
    trained_ids: str | None = None  # which ids those are, in words
    pos_prev_token: float | None
    n_rows: int
    boosted: list[dict[str, Any]]

    def __post_init__(self) -> None:
        self.accuracy_over = f"all {self.n_rows} ids of the vocabulary"


def head_circuit(
    model: TransformerBridge,
    codec: Codec,
    layer: int,
    head: int,
    *,
    token_ids: list[int],
    k: int = 10,
    rows: Int[torch.Tensor, " n"] | None = None,
    trained: tuple[list[int], str] | None = None,
) -> HeadCircuit:
    """Copying score, top-1/top-5 copy accuracy (over ``rows``, default every id; and over the
    ``trained`` ids, ``(ids, in words)``, when given: :func:`trained_token_ids`), the pos-QK
    previous-token value (when the model has W_pos), and the top ``k`` boosted tokens of each of
    ``token_ids``. An empty OV circuit has
    no copying score (None) and says so in ``copying_note``."""
    check_head(model, layer, head)
    validate.in_vocab(token_ids, int(model.cfg.d_vocab), "token_ids")
    validate.count(k, "k")
    m = circuit_model(model)
    gain = float(ov_gain(m)[layer, head])
    score: float | None = None
    note = f"empty OV circuit: gain {gain:.1e} <= {EMPTY_OV_GAIN:g}, no copying score"
    if gain > EMPTY_OV_GAIN:
        score, note = float(copying_scores(m)[layer, head]), None
    ranks = copy_ranks(m, layer, head, rows=rows)
    standard = getattr(m.cfg, "positional_embedding_type", "standard") == "standard"
    pos = pos_prev_token_score(m, layer, head) if standard else None
    boosted = []
    for tid in map(int, token_ids):
        top = top_boosted_tokens(m, layer, head, tid, k)
        strs = codec.str_tokens([t for t, _ in top])
        logits = [
            {"token": s, "token_id": t, "logit": v} for s, (t, v) in zip(strs, top, strict=True)
        ]
        boosted.append({"token": codec.str_tokens([tid])[0], "token_id": tid, "top": logits})
    seen: dict[str, Any] = {}
    if trained is not None and rows is None:
        sub = ranks[torch.as_tensor(trained[0], dtype=torch.long)]
        seen = {
            "trained_top1": float((sub < 1).float().mean()),
            "trained_top5": float((sub < 5).float().mean()),
            "trained_rows": len(sub),
            "trained_ids": trained[1],
        }
    return HeadCircuit(
        head=str(HeadId(layer, head)),
        copying_score=score,
        copying_note=note,
        top1_accuracy=float((ranks < 1).float().mean()),
        top5_accuracy=float((ranks < 5).float().mean()),
        pos_prev_token=pos,
        boosted=boosted,
        n_rows=int(len(ranks)),
        **seen,
    )


def trained_token_ids(target: Target) -> tuple[list[int], str]:
    """The token ids the model was trained on, as far as the toolkit can tell, and in words.

    A run: every id its training split holds, and the curriculum's random-token range when its
    batches had repeated random spans. A Hugging Face model: its tokenizer's ids (ids past the
    tokenizer's length are padding no text reaches). GPT-2's BPE: all of them."""
    d_vocab = int(target.model.cfg.d_vocab)
    if isinstance(target.source, Run):
        from interp_toolkit.text.stream import tokenize_corpus

        data = target.source.settings.get("data", {})
        codec = target.codec
        split = tokenize_corpus(
            str(data.get("corpus", "stdlib")),
            float(data.get("val_fraction", 0.02)),
            data.get("max_tokens"),
            progress=False,
            store=codec.store,
        )
        ids = np.asarray(codec.from_store(np.asarray(split.train_ids)), dtype=np.int64)
        seen = np.bincount(ids[(ids >= 0) & (ids < d_vocab)], minlength=d_vocab) > 0
        words = f"the {int(seen.sum())} ids its training text holds"
        if float(data.get("repeat_fraction", 0.0)) > 0:
            low, high = default_token_range(codec)
            seen[low : min(high, d_vocab)] = True
            words += f" and its random spans' ids {low}..{min(high, d_vocab) - 1}"
        return [int(i) for i in np.flatnonzero(seen)], words
    n = int(getattr(target.codec, "n_tokens", d_vocab))
    if n < d_vocab:
        return list(range(n)), f"its tokenizer's {n} ids ({d_vocab - n} padding ids past them)"
    return list(range(d_vocab)), f"all {d_vocab} ids (its tokenizer's)"
