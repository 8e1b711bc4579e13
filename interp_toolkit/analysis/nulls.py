"""Null models and the threshold τ: how high a score gets when there is nothing to find.

Everything about the null lives here (a per-head null replaces this module's functions):

- ``shuffled`` (default; works for every model): the same model on ``n_null`` batches laid out
  like the probe but with no token repeated in a row (:func:`~.batches.non_repeating_like`), so
  the repeat stripes carry no signal. A score whose stripe needs no repetition names control lags
  in the registry (``Score.null_lags``): null sample ``i`` reads the stripe at lag
  ``null_lags[i % len]`` instead (previous-token: 2, 3, 4, "attends to a fixed short offset that
  is not the previous token"). A score with neither (current-token, first-token) is read on the
  non-repeating batch as it is: its τ then says "in the top 5% of this model's heads", not
  "above chance".
- ``fresh_init``: ``n_null`` freshly initialised models of the same config on the probe itself.

τ per score: the ``quantile`` of that score pooled over all heads × all null samples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.batches import RepeatedTokens, non_repeating_like
from interp_toolkit.analysis.heads import SCORE_KINDS, SCORES, Stripe
from interp_toolkit.analysis.stripes import HeadScores, head_scores
from interp_toolkit.errors import UserError
from interp_toolkit.models import AttnOnlyConfig, build_model

NULL_MODELS = ("shuffled", "fresh_init")


def check_null(null: str) -> str:
    if null not in NULL_MODELS:
        raise UserError(f"unknown null model {null!r}: use one of {', '.join(NULL_MODELS)}.")
    return null


def control_stripes(sample: int) -> dict[str, Stripe]:
    """The stripes null sample ``sample`` reads instead of the real ones (``Score.null_lags``)."""
    return {
        s.name: dataclasses.replace(s.stripe, lag=s.null_lags[sample % len(s.null_lags)])
        for s in SCORES
        if s.null_lags
    }


def _fresh_models(
    model: TransformerBridge, n: int, model_cfg: AttnOnlyConfig | None = None
) -> list[TransformerBridge]:
    cfg = model.cfg
    if model_cfg is None:
        native = getattr(cfg, "architecture", None) == "TransformerLensNative"
        if not native or cfg.normalization_type or not cfg.attn_only:
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
    model_cfg: AttnOnlyConfig | None = None,
    batch_size: int | None = None,
) -> list[HeadScores]:
    """Scores under the null model, one :class:`HeadScores` per null sample (module docstring)."""
    check_null(null)
    if n_null < 1:
        raise UserError(f"n_null={n_null} cannot work: use at least 1 null sample.")
    if null == "shuffled":
        return [
            head_scores(
                model,
                non_repeating_like(batch, seed=seed + 1 + i),
                batch_size=batch_size,
                stripes=control_stripes(i),
            )
            for i in range(n_null)
        ]
    return [
        head_scores(m, batch, batch_size=batch_size)
        for m in _fresh_models(model, n_null, model_cfg)
    ]


def taus_from_null(samples: Sequence[HeadScores], quantile: float = 0.95) -> dict[str, float]:
    """τ per score: the ``quantile`` of that score pooled over heads × null samples."""
    if not 0.0 < quantile < 1.0:
        raise UserError(f"quantile={quantile} cannot work: use a value between 0 and 1.")
    return {k: float(torch.quantile(pooled(samples, k).double(), quantile)) for k in SCORE_KINDS}


def pooled(samples: Sequence[HeadScores], kind: str) -> torch.Tensor:
    """One score over heads × null samples, flattened (what τ is the quantile of)."""
    return torch.cat([s.get(kind).flatten() for s in samples])


def without_control(null: str) -> list[str]:
    """Scores whose τ under ``null`` is no test against chance: under the shuffled null, those
    whose stripe needs no repeats and that name no control lags (their τ is a quantile over the
    model's own heads on non-repeating tokens)."""
    if null != "shuffled":
        return []
    return [s.name for s in SCORES if s.stripe.queries == "body" and not s.null_lags]
