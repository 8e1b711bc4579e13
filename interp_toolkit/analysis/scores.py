"""Head discovery: score every head on repeated random tokens, set τ from a null model, assign roles.

The scores and their definitions are the registry's (:mod:`~interp_toolkit.analysis.heads`); the
scorer is :func:`~interp_toolkit.analysis.stripes.head_scores` and the null model and τ are
:mod:`~interp_toolkit.analysis.nulls`. This module is the public face of all three:
``head_scores``, ``HeadScores`` and ``SCORE_KINDS`` are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.batches import default_layout, probe_batch
from interp_toolkit.analysis.heads import (
    DEFAULT_FLOORS,
    NO_ROLE,
    ROLE_RULE,
    ROLE_SCORE,
    ROLES,
    SCORE_KINDS,
    SCORES,
    HeadId,
    top_head,
)
from interp_toolkit.analysis.nulls import check_null, null_scores, pooled, taus_from_null
from interp_toolkit.analysis.stripes import HeadScores, head_scores
from interp_toolkit.errors import UserError
from interp_toolkit.models import AttnOnlyConfig
from interp_toolkit.tokenizer import Codec

__all__ = [
    "SCORE_KINDS",
    "HeadReport",
    "HeadScores",
    "classify",
    "discover_heads",
    "head_scores",
]


@dataclass
class HeadReport:
    """Scores, null-model thresholds τ, floors and a role per head."""

    scores: HeadScores
    taus: dict[str, float]
    null: str
    n_null_samples: int
    roles: list[list[str]]
    quantile: float = 0.95
    floors: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_FLOORS))
    probe: dict[str, Any] = field(default_factory=dict)
    null_scores: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def heads_with_role(self, role: str) -> list[HeadId]:
        if role not in ROLES:
            raise KeyError(f"unknown role {role!r}; roles are {ROLES}")
        return [
            HeadId(layer, head)
            for layer, row in enumerate(self.roles)
            for head, r in enumerate(row)
            if r == role
        ]

    def has_role(self, head: tuple[int, int], role: str) -> bool:
        return self.roles[head[0]][head[1]] == role

    def strongest(self, role: str) -> HeadId | None:
        """The head labelled ``role`` with the highest score of the kind that decides the role."""
        return top_head(self.scores.get(ROLE_SCORE[role]), among=self.heads_with_role(role))

    def above(self, kind: str) -> Float[torch.Tensor, "layer head"]:
        """1.0 where the head's ``kind`` score exceeds τ and reaches the floor, else 0.0."""
        score = self.scores.get(kind)
        return ((score > self.taus[kind]) & (score >= self.floors[kind])).float()

    def to_dict(self) -> dict[str, Any]:
        above = {k: self.above(k) for k in SCORE_KINDS}
        heads = []
        for layer, row in enumerate(self.roles):
            for head, role in enumerate(row):
                entry: dict[str, Any] = {
                    "head": str(HeadId(layer, head)),
                    "layer": layer,
                    "index": head,
                }
                for kind in SCORE_KINDS:
                    entry[kind] = float(self.scores.get(kind)[layer, head])
                entry["above_tau"] = {k: bool(above[k][layer, head]) for k in SCORE_KINDS}
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
            "roles": {role: [str(h) for h in self.heads_with_role(role)] for role in ROLES[:-1]},
        }


def classify(
    scores: HeadScores, taus: dict[str, float], floors: dict[str, float] | None = None
) -> list[list[str]]:
    """Roles per head following :data:`~.heads.ROLE_RULE`."""
    floors = floors or DEFAULT_FLOORS
    roles = []
    for layer in range(scores.n_layers):
        row = []
        for head in range(scores.n_heads):
            role = NO_ROLE
            for name, kind in ROLE_SCORE.items():
                val = float(scores.get(kind)[layer, head])
                if val > taus[kind] and val >= floors[kind]:
                    role = name
                    break
            row.append(role)
        roles.append(row)
    return roles


def discover_heads(
    model: TransformerBridge,
    codec: Codec,
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
    model_cfg: AttnOnlyConfig | None = None,
    batch_size: int | None = None,
) -> HeadReport:
    """Score every head on repeated random tokens, set τ from a null model, and assign roles.

    ``period``/``prefix_max`` default to :func:`default_layout` of the model's context; the token
    range defaults to :func:`default_token_range` of the codec. The batch starts with the codec's
    BOS id.
    """
    check_null(null)
    n_ctx = int(model.cfg.n_ctx)
    bos_id = codec.bos_id
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
    batch = probe_batch(
        codec,
        int(model.cfg.d_vocab),
        n_seqs,
        period,
        n_repeats=n_repeats,
        prefix_max=prefix_max,
        seed=seed,
        token_range=token_range,
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
    probe["definitions"] = {s.name: s.definition for s in SCORES}
    return HeadReport(
        scores=scores,
        taus=taus,
        null=null,
        n_null_samples=n_null,
        roles=classify(scores, taus, floors),
        quantile=quantile,
        floors=floors,
        probe=probe,
        null_scores={k: pooled(samples, k).tolist() for k in SCORE_KINDS},
    )
