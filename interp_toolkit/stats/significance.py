"""The statistics every test shares: τ (a null's 95th percentile), empirical p-values,
Benjamini-Hochberg over heads x scores, the expected number of false positives, the smallest
reachable p, a layer's pooled null, and significance per kind.

The tests themselves live with what they test: the specificity test that decides a head's role
(:mod:`~interp_toolkit.heads.specificity`) and the optional second test against untrained models
(:mod:`~interp_toolkit.heads.nulls`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp_toolkit.errors import UserError
from interp_toolkit.stats.thresholds import ALPHA, QUANTILE

# --------------------------------------------------------------------------- statistics


def tau(
    null: Float[Tensor, "sample layer head"], quantile: float = QUANTILE
) -> Float[Tensor, "layer head"]:
    """Each head's τ: the ``quantile`` of its own null values (linear interpolation)."""
    if not 0.0 < quantile < 1.0:
        raise UserError(f"quantile={quantile} cannot work: use a value between 0 and 1.")
    return torch.quantile(null.double(), quantile, dim=0)


def p_values(
    observed: Float[Tensor, "layer head"], null: Float[Tensor, "sample layer head"]
) -> Float[Tensor, "layer head"]:
    """Empirical p-value per head, ``(1 + #{null >= observed}) / (1 + N)``: never 0, and valid
    (P(p <= a) <= a under the null) whenever the observed value is exchangeable with the ``N``
    null values."""
    n = null.shape[0]
    ge = (null.double() >= observed.double()[None]).sum(0)
    return (1.0 + ge.double()) / (1.0 + n)


def benjamini_hochberg(p: Float[Tensor, "..."], alpha: float = ALPHA) -> Bool[Tensor, "..."]:
    """Which p-values (any shape, tested jointly) Benjamini-Hochberg rejects at false-discovery
    rate ``alpha``: the ``k`` smallest, for the largest ``k`` with ``p_(k) <= k * alpha / m``."""
    flat = p.flatten().double()
    m = flat.numel()
    order = torch.argsort(flat, stable=True)
    ok = flat[order] <= alpha * torch.arange(1, m + 1, dtype=torch.float64) / m
    reject = torch.zeros(m, dtype=torch.bool)
    if bool(ok.any()):
        reject[order[: int(torch.nonzero(ok).max()) + 1]] = True
    return reject.view(p.shape)


def check_alpha(alpha: float) -> float:
    """α must lie strictly between 0 and 1 (a one-line UserError otherwise)."""
    real = isinstance(alpha, numbers.Real) and not isinstance(alpha, bool)
    if not real or not 0.0 < alpha < 1.0:
        raise UserError(f"alpha={alpha!r} cannot work: use a value between 0 and 1, e.g. 0.05.")
    return alpha


def expected_false_positives(n_tests: int, alpha: float = ALPHA) -> float:
    """Tests expected to reach ``p <= alpha`` by chance when no head has the property."""
    return alpha * n_tests


def smallest_p(n_null: int) -> float:
    """The smallest p-value ``N`` null values can give, ``1 / (N + 1)``."""
    return 1.0 / (n_null + 1)


def pooled_by_layer(
    values: Float[Tensor, "model layer head"],
) -> Float[Tensor, "sample layer head"]:
    """Each head's null: the ``K x n_heads`` values of its layer over ``K`` untrained models."""
    k, n_layers, n_heads = values.shape
    pool = values.permute(0, 2, 1).reshape(k * n_heads, n_layers)
    return pool[:, :, None].expand(-1, -1, n_heads).contiguous()


# --------------------------------------------------------------------------- null kinds


def significant_by_kind(
    p_value: Mapping[str, Tensor], alpha: float = ALPHA, fdr: bool = False
) -> dict[str, Tensor]:
    """``p <= alpha`` per head and kind; with ``fdr``, Benjamini-Hochberg over every head and
    kind jointly at false-discovery rate ``alpha``."""
    check_alpha(alpha)
    if not fdr:
        return {k: p <= alpha for k, p in p_value.items()}
    mask = benjamini_hochberg(torch.stack(list(p_value.values())), alpha)
    return dict(zip(p_value, mask, strict=True))
