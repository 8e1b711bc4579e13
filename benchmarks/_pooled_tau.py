"""The pooled τ that head discovery used before the per-head nulls (main at aaf08de), kept as the
reference the benchmarks compare against (no longer in the package).

``shuffled`` null: the model on ``n_null`` batches with the probe's layout and no repeated token;
the previous-token stripe read at control lags 2, 3, 4 instead (cycling); τ per score = the 0.95
quantile pooled over heads x null samples; a head's role is the first of induction (the plain
score), previous-token, duplicate-token whose score is > τ and >= 0.4.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from interp_toolkit.analysis.batches import non_repeating_like
from interp_toolkit.analysis.heads import DEFAULT_FLOORS, NO_ROLE, SCORE, SCORE_KINDS
from interp_toolkit.analysis.scores import discovery_probe
from interp_toolkit.analysis.stripes import head_scores

CONTROL_LAGS = {"previous_token": (2, 3, 4)}
OLD_DECIDERS = {
    "induction": "induction",
    "previous-token": "previous_token",
    "duplicate-token": "duplicate_token",
}


def pooled_tau_discovery(
    model: Any, codec: Any, *, n_seqs: int = 64, n_null: int = 4, seed: int = 0
) -> dict[str, Any]:
    """Scores, pooled τ per score, which heads exceed τ, and roles, as the old ``heads`` did."""
    batch = discovery_probe(model, codec, n_seqs=n_seqs, seed=seed)
    scores = head_scores(model, batch)
    samples = []
    for i in range(n_null):
        stripes = {
            k: dataclasses.replace(SCORE[k].stripe, lag=lags[i % len(lags)])
            for k, lags in CONTROL_LAGS.items()
        }
        samples.append(
            head_scores(model, non_repeating_like(batch, seed=seed + 1 + i), stripes=stripes)
        )
    taus = {
        k: float(torch.quantile(torch.cat([s.get(k).flatten() for s in samples]).double(), 0.95))
        for k in SCORE_KINDS
    }
    above = {k: scores.get(k) > taus[k] for k in SCORE_KINDS}
    roles = [
        [
            next(
                (
                    role
                    for role, k in OLD_DECIDERS.items()
                    if above[k][layer, head] and scores.get(k)[layer, head] >= DEFAULT_FLOORS[k]
                ),
                NO_ROLE,
            )
            for head in range(scores.n_heads)
        ]
        for layer in range(scores.n_layers)
    ]
    return {"scores": scores, "taus": taus, "above": above, "roles": roles, "probe": batch}
