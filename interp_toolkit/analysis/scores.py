"""Per-head attention scores on repeated random tokens, a null-model threshold τ, and head roles.

Definitions (``Δ`` = the batch's period; ``s`` = a row's first repeated position; ``A`` = the
head's attention pattern ``hook_pattern[q, k]``):

- ``previous_token``: mean of ``A[q, q-1]`` over every query ``q`` from the first non-BOS key
  (``q >= 2`` with BOS, ``q >= 1`` without) up to the last repeated position (filler excluded).
- ``duplicate_token``: mean of ``A[q, q-Δ]`` (the earlier occurrence of the same token) over the
  queries of the 2nd and later repeats, ``q = s+Δ … s+n·Δ-1``.
- ``induction``: mean of ``A[q, q-Δ+1]`` (the token after the earlier occurrence) over the same
  queries.
- ``induction_vw``: value-weighted induction. With ``w[q,k] = A[q,k]·‖v_k‖`` (``hook_v``), the row
  is renormalised, ``ŵ[q,k] = w[q,k] / Σ_k' w[q,k']``, and the score is the mean of
  ``ŵ[q, q-Δ+1]`` over the induction queries. It lies in [0, 1] like the plain score, and it
  discounts attention to keys whose value vectors are small (e.g. an attention sink on BOS).

The forward pass only hooks ``hook_v`` and ``hook_pattern`` (a names filter); each pattern is
reduced to these four sums as it is produced and then dropped, and the pass stops after the last
layer, so the unembedding is never computed. Rows are processed in chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.batches import (
    RepeatedTokens,
    default_layout,
    default_token_range,
    non_repeating_like,
    repeated_tokens,
)
from interp_toolkit.errors import UserError

SCORE_KINDS = ("previous_token", "duplicate_token", "induction", "induction_vw")
ROLES = ("previous-token", "induction", "duplicate-token", "none")
#: Which score decides each role, in precedence order (the first role a head qualifies for wins).
ROLE_SCORE = {
    "induction": "induction",
    "previous-token": "previous_token",
    "duplicate-token": "duplicate_token",
}
#: Absolute floors (ARENA's detectors use 0.4): a head needs score > τ AND score >= floor.
DEFAULT_FLOORS = {
    "previous_token": 0.4,
    "duplicate_token": 0.4,
    "induction": 0.4,
    "induction_vw": 0.4,
}
NULL_MODELS = ("shuffled", "fresh_init")
#: Control offsets for the previous-token score under the shuffled null (see :func:`null_scores`).
SHUFFLED_PREV_OFFSETS = (2, 3, 4)
CHUNK_BYTES = 256 * 2**20


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


@dataclass
class HeadScores:
    """Every head's scores, each a ``[layer, head]`` tensor (float32, CPU)."""

    previous_token: Float[torch.Tensor, "layer head"]
    duplicate_token: Float[torch.Tensor, "layer head"]
    induction: Float[torch.Tensor, "layer head"]
    induction_vw: Float[torch.Tensor, "layer head"]

    def get(self, kind: str) -> Float[torch.Tensor, "layer head"]:
        if kind not in SCORE_KINDS:
            raise KeyError(kind)
        return getattr(self, kind)

    @property
    def n_layers(self) -> int:
        return int(self.induction.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.induction.shape[1])

    def to_dict(self) -> dict[str, list[list[float]]]:
        return {k: [[float(x) for x in row] for row in self.get(k).tolist()] for k in SCORE_KINDS}


class _Stop(Exception):
    """Raised by the last hook to end the forward pass before the unembedding."""


def _chunk_rows(model: TransformerBridge, seq_len: int) -> int:
    cfg = model.cfg
    per_row = 4 * seq_len * (cfg.n_heads * seq_len + 8 * cfg.d_model) * 2
    return max(1, CHUNK_BYTES // max(per_row, 1))


def _sums(
    model: TransformerBridge,
    batch: RepeatedTokens,
    fwd_hooks: Sequence[tuple[Any, Callable[..., Any]]] = (),
    batch_size: int | None = None,
    prev_offset: int = 1,
) -> dict[str, torch.Tensor]:
    """Stripe sums [layer, head] (float64) and their counts over all rows of ``batch``."""
    cfg = model.cfg
    n_layers, n_heads = int(cfg.n_layers), int(cfg.n_heads)
    tokens = batch.tokens
    seq_len = tokens.shape[1]
    if seq_len > int(cfg.n_ctx):
        raise UserError(
            f"the probe has {seq_len} tokens but the model's context is {cfg.n_ctx}: "
            "use a shorter --period."
        )
    period, n_rep = batch.period, batch.n_repeats
    first_key = 1 if batch.has_bos else 0
    if prev_offset < 1 or prev_offset >= seq_len - first_key:
        raise ValueError(f"prev_offset={prev_offset} does not fit a sequence of {seq_len}")
    sums = {k: torch.zeros(n_layers, n_heads, dtype=torch.float64) for k in SCORE_KINDS}
    counts = {"prev": 0, "rep": 0}
    rows = batch_size or _chunk_rows(model, seq_len)

    for lo in range(0, tokens.shape[0], rows):
        n_prev, n_repq = _reduce_chunk(
            model,
            tokens[lo : lo + rows],
            batch.starts[lo : lo + rows],
            sums,
            period=period,
            n_rep=n_rep,
            prev_offset=prev_offset,
            first_key=first_key,
            fwd_hooks=fwd_hooks,
        )
        counts["prev"] += n_prev
        counts["rep"] += n_repq
    sums["_prev_count"] = torch.tensor(float(max(counts["prev"], 1)))
    sums["_rep_count"] = torch.tensor(float(max(counts["rep"], 1)))
    return sums


def _reduce_chunk(
    model: TransformerBridge,
    toks: torch.Tensor,
    starts: torch.Tensor,
    sums: dict[str, torch.Tensor],
    *,
    period: int,
    n_rep: int,
    prev_offset: int,
    first_key: int,
    fwd_hooks: Sequence[tuple[Any, Callable[..., Any]]],
) -> tuple[int, int]:
    """Run one chunk of rows, adding its stripe sums into ``sums``; return the query counts."""
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    device = next(model.parameters()).device
    b, seq_len = toks.shape
    n_q = (n_rep - 1) * period
    q_idx = starts[:, None] + period + torch.arange(n_q)[None, :]  # [b, n_q]
    bidx = torch.arange(b)[:, None].expand(b, n_q)
    # previous-token queries: key q-d is not BOS, and q is before the end of the repeats;
    # diagonal(-d)[i] is the entry (q = i + d, k = i)
    q_all = torch.arange(prev_offset, seq_len)
    prev_mask = (q_all[None, :] - prev_offset >= first_key) & (
        q_all[None, :] < (starts + n_rep * period)[:, None]
    )
    pending: dict[int, dict[str, torch.Tensor]] = {}
    done: set[int] = set()

    def add(kind: str, layer: int, val: torch.Tensor) -> None:
        sums[kind][layer] += val.detach().to("cpu", torch.float64)

    def finish(layer: int) -> None:
        item = pending.pop(layer)
        pat = item["pattern"].detach().float()  # [b, H, P, P]
        vnorm = item["v"].detach().float().norm(dim=-1)  # [b, P, H]
        dev = pat.device
        qi, bi, pm = q_idx.to(dev), bidx.to(dev), prev_mask.to(dev)
        diag = pat.diagonal(offset=-prev_offset, dim1=-2, dim2=-1)  # [b, H, P-d]
        add("previous_token", layer, (diag * pm[:, None, :]).sum((0, 2)))
        rows_q = pat[bi, :, qi]  # [b, n_q, H, P]
        k_ind = (qi - period + 1)[:, :, None, None].expand(b, n_q, n_heads, 1)
        k_dup = (qi - period)[:, :, None, None].expand(b, n_q, n_heads, 1)
        add("induction", layer, rows_q.gather(-1, k_ind)[..., 0].sum((0, 1)))
        add("duplicate_token", layer, rows_q.gather(-1, k_dup)[..., 0].sum((0, 1)))
        w = rows_q * vnorm.permute(0, 2, 1)[:, None, :, :]  # [b, n_q, H, P]
        total = w.sum(-1).clamp_min(1e-30)
        add("induction_vw", layer, (w.gather(-1, k_ind)[..., 0] / total).sum((0, 1)))
        done.add(layer)
        if len(done) == n_layers:
            raise _Stop

    def on_act(act: torch.Tensor, hook: Any) -> None:
        layer = hook.layer()
        key = "pattern" if hook.name.endswith("hook_pattern") else "v"
        pending.setdefault(layer, {})[key] = act
        if len(pending[layer]) == 2:
            finish(layer)

    hooks = list(fwd_hooks) + [(lambda n: n.endswith(("attn.hook_pattern", "attn.hook_v")), on_act)]
    try:
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            model(toks.to(device))
    except _Stop:
        pass
    if len(done) != n_layers:  # pragma: no cover - a model whose hooks never fired
        raise RuntimeError(f"only layers {sorted(done)} reported hook_pattern/hook_v")
    return int(prev_mask.sum()), b * n_q


def head_scores(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    batch_size: int | None = None,
    fwd_hooks: Sequence[tuple[Any, Callable[..., Any]]] = (),
    prev_offset: int = 1,
) -> HeadScores:
    """Previous-token, duplicate-token, induction and value-weighted induction scores of every head
    (definitions in the module docstring). ``fwd_hooks`` run alongside (e.g. ablations).
    ``prev_offset`` moves the previous-token stripe to ``k = q - prev_offset`` (the shuffled null
    uses 2, 3, 4 as control offsets)."""
    s = _sums(model, batch, fwd_hooks=fwd_hooks, batch_size=batch_size, prev_offset=prev_offset)
    n_prev, n_rep = s["_prev_count"], s["_rep_count"]
    return HeadScores(
        previous_token=(s["previous_token"] / n_prev).float(),
        duplicate_token=(s["duplicate_token"] / n_rep).float(),
        induction=(s["induction"] / n_rep).float(),
        induction_vw=(s["induction_vw"] / n_rep).float(),
    )


@dataclass
class HeadReport:
    """Scores, null-model thresholds and a role per head."""

    scores: HeadScores
    taus: dict[str, float]
    null: str
    n_null_samples: int
    roles: list[list[str]]
    quantile: float = 0.95
    floors: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_FLOORS))
    probe: dict[str, Any] = field(default_factory=dict)
    null_scores: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def heads_with_role(self, role: str) -> list[tuple[int, int]]:
        if role not in ROLES:
            raise KeyError(f"unknown role {role!r}; roles are {ROLES}")
        return [
            (layer, head)
            for layer, row in enumerate(self.roles)
            for head, r in enumerate(row)
            if r == role
        ]

    def above(self, kind: str) -> Float[torch.Tensor, "layer head"]:
        """1.0 where the head's ``kind`` score exceeds τ and the floor, else 0.0."""
        score = self.scores.get(kind)
        return ((score > self.taus[kind]) & (score >= self.floors[kind])).float()

    def to_dict(self) -> dict[str, Any]:
        heads = []
        for layer, row in enumerate(self.roles):
            for head, role in enumerate(row):
                entry: dict[str, Any] = {
                    "head": head_name(layer, head),
                    "layer": layer,
                    "index": head,
                }
                for kind in SCORE_KINDS:
                    entry[kind] = float(self.scores.get(kind)[layer, head])
                entry["above_tau"] = {k: bool(self.above(k)[layer, head]) for k in SCORE_KINDS}
                entry["role"] = role
                heads.append(entry)
        return {
            "probe": self.probe,
            "null": {
                "model": self.null,
                "n_samples": self.n_null_samples,
                "n_values": self.n_null_samples * self.scores.n_layers * self.scores.n_heads,
                "quantile": self.quantile,
            },
            "taus": {k: float(v) for k, v in self.taus.items()},
            "floors": {k: float(v) for k, v in self.floors.items()},
            "rule": ROLE_RULE,
            "heads": heads,
            "roles": {
                role: [head_name(*lh) for lh in self.heads_with_role(role)] for role in ROLES[:-1]
            },
        }


ROLE_RULE = (
    "a head's role is the first of induction, previous-token, duplicate-token whose score "
    "(induction, previous_token, duplicate_token) is > tau and >= floor; otherwise none"
)


def classify(
    scores: HeadScores, taus: dict[str, float], floors: dict[str, float] | None = None
) -> list[list[str]]:
    """Roles per head following :data:`ROLE_RULE`."""
    floors = floors or DEFAULT_FLOORS
    roles = []
    for layer in range(scores.n_layers):
        row = []
        for head in range(scores.n_heads):
            role = "none"
            for name, kind in ROLE_SCORE.items():
                val = float(scores.get(kind)[layer, head])
                if val > taus[kind] and val >= floors[kind]:
                    role = name
                    break
            row.append(role)
        roles.append(row)
    return roles


def _fresh_models(
    model: TransformerBridge, n: int, model_cfg: Any = None
) -> list[TransformerBridge]:
    from interp_toolkit.models import AttnOnlyConfig, build_model

    cfg = model.cfg
    if model_cfg is None:
        if getattr(cfg, "architecture", None) != "TransformerLensNative" or cfg.normalization_type:
            raise UserError(
                "the fresh_init null needs a toy model built by interp-toolkit (this one cannot be "
                "re-initialised the same way): use --null shuffled."
            )
        model_cfg = AttnOnlyConfig(
            n_layers=int(cfg.n_layers),
            d_model=int(cfg.d_model),
            n_heads=int(cfg.n_heads),
            d_head=int(cfg.d_head),
            n_ctx=int(cfg.n_ctx),
            d_vocab=int(cfg.d_vocab),
            positional=cfg.positional_embedding_type,
            seed=int(cfg.seed or 0),
        )
    device = next(model.parameters()).device
    return [
        build_model(model_cfg.replace(seed=model_cfg.seed + 7919 * (i + 1)), device=str(device))
        for i in range(n)
    ]


def null_scores(
    model: TransformerBridge,
    batch: RepeatedTokens,
    *,
    null: str = "shuffled",
    n_null: int = 4,
    seed: int = 0,
    model_cfg: Any = None,
    batch_size: int | None = None,
) -> list[HeadScores]:
    """Scores under the null model, one :class:`HeadScores` per null sample.

    ``shuffled``: the same model on ``n_null`` batches laid out like ``batch`` but with no token
    repeated (:func:`non_repeating_like`). The previous-token stripe needs no repetition, so
    there the null reads a control offset instead: sample ``i`` scores ``A[q, q-d]`` with
    ``d = SHUFFLED_PREV_OFFSETS[i % 3]`` (2, 3, 4), i.e. "attends to a fixed short offset that is
    not the previous token". ``fresh_init``: ``n_null`` freshly initialised models of
    the same config (different seeds) on ``batch`` itself.
    """
    if null not in NULL_MODELS:
        raise UserError(f"unknown null model {null!r}: use one of {', '.join(NULL_MODELS)}.")
    if n_null < 1:
        raise UserError(f"n_null={n_null} cannot work: use at least 1 null sample.")
    if null == "shuffled":
        return [
            head_scores(
                model,
                non_repeating_like(batch, seed=seed + 1 + i),
                batch_size=batch_size,
                prev_offset=SHUFFLED_PREV_OFFSETS[i % len(SHUFFLED_PREV_OFFSETS)],
            )
            for i in range(n_null)
        ]
    return [
        head_scores(m, batch, batch_size=batch_size)
        for m in _fresh_models(model, n_null, model_cfg)
    ]


def taus_from_null(samples: Sequence[HeadScores], quantile: float = 0.95) -> dict[str, float]:
    """τ per score kind: the ``quantile`` of that score pooled over heads × null samples."""
    if not 0.0 < quantile < 1.0:
        raise UserError(f"quantile={quantile} cannot work: use a value between 0 and 1.")
    out = {}
    for kind in SCORE_KINDS:
        pooled = torch.cat([s.get(kind).flatten() for s in samples]).double()
        out[kind] = float(torch.quantile(pooled, quantile))
    return out


def discover_heads(
    model: TransformerBridge,
    codec: Any,
    *,
    n_seqs: int = 64,
    period: int | None = None,
    seed: int = 0,
    null: str = "shuffled",
    n_null: int = 4,
    quantile: float = 0.95,
    n_repeats: int = 2,
    prefix_max: int | None = None,
    token_range: tuple[int, int] | None = None,
    floors: dict[str, float] | None = None,
    model_cfg: Any = None,
    batch_size: int | None = None,
) -> HeadReport:
    """Score every head on repeated random tokens, set τ from a null model, and assign roles.

    ``period``/``prefix_max`` default to :func:`default_layout` of the model's context; the token
    range defaults to :func:`default_token_range` of the codec. The batch starts with the codec's
    BOS id.
    """
    if null not in NULL_MODELS:
        raise UserError(f"unknown null model {null!r}: use one of {', '.join(NULL_MODELS)}.")
    n_ctx = int(model.cfg.n_ctx)
    bos_id = getattr(codec, "bos_id", None)
    auto_period, auto_prefix = default_layout(
        n_ctx, n_repeats=n_repeats, has_bos=bos_id is not None
    )
    prefix_max = auto_prefix if prefix_max is None else prefix_max
    if period is None:
        period = min(auto_period, (n_ctx - int(bos_id is not None) - prefix_max) // n_repeats)
    need = int(bos_id is not None) + prefix_max + n_repeats * period
    if need > n_ctx:
        raise UserError(
            f"period {period} x {n_repeats} repeats (+{prefix_max} prefix) needs {need} tokens but the "
            f"model's context is {n_ctx}: use --period {max(2, (n_ctx - 1 - prefix_max) // n_repeats)} or less."
        )
    low, high = token_range or default_token_range(codec)
    high = min(high, int(model.cfg.d_vocab))
    batch = repeated_tokens(
        n_seqs,
        period,
        n_repeats=n_repeats,
        low=low,
        high=high,
        bos_id=bos_id,
        prefix_max=prefix_max,
        seed=seed,
    )
    scores = head_scores(model, batch, batch_size=batch_size)
    samples = null_scores(
        model,
        batch,
        null=null,
        n_null=n_null,
        seed=seed,
        model_cfg=model_cfg,
        batch_size=batch_size,
    )
    taus = taus_from_null(samples, quantile)
    floors = dict(floors or DEFAULT_FLOORS)
    probe = batch.describe()
    probe["definitions"] = SCORE_DEFINITIONS
    return HeadReport(
        scores=scores,
        taus=taus,
        null=null,
        n_null_samples=n_null,
        roles=classify(scores, taus, floors),
        quantile=quantile,
        floors=floors,
        probe=probe,
        null_scores={
            k: torch.cat([s.get(k).flatten() for s in samples]).tolist() for k in SCORE_KINDS
        },
    )


SCORE_DEFINITIONS = {
    "previous_token": "mean A[q, q-1] over q from the first non-BOS key to the end of the repeats",
    "duplicate_token": "mean A[q, q-period] over queries in the 2nd and later repeats",
    "induction": "mean A[q, q-period+1] over queries in the 2nd and later repeats",
    "induction_vw": (
        "mean over the same queries of A[q,k]*|v_k| / sum_k' A[q,k']*|v_k'| at k = q-period+1"
    ),
}
