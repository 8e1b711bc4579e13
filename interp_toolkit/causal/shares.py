"""Shares of a task's clean-corrupt gap, with percentile bootstrap intervals over prompts."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.causal.routes import Estimate
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.thresholds import CONFIDENCE, N_BOOT


def resamples(n: int, *, n_boot: int = N_BOOT, seed: int = 0) -> Tensor:
    """``[n_boot, n]`` prompt indices drawn with replacement (seeded; shared by every edge of
    one measurement, so their intervals are comparable)."""
    gen = rng(seed, "prompt_bootstrap")
    return torch.randint(0, n, (n_boot, n), generator=gen)


def _interval(point: Tensor, boot: Tensor) -> list[Estimate]:
    lo = torch.quantile(boot, (1 - CONFIDENCE) / 2, dim=0)
    hi = torch.quantile(boot, 1 - (1 - CONFIDENCE) / 2, dim=0)
    return [
        Estimate(round(float(p), 4), round(float(a), 4), round(float(b), 4))
        for p, a, b in zip(point.reshape(-1), lo.reshape(-1), hi.reshape(-1), strict=True)
    ]


def removed_share(
    clean: Float[Tensor, " batch"],
    corrupt: Float[Tensor, " batch"],
    patched: Float[Tensor, "n batch"],
    idx: Tensor,
) -> list[Estimate]:
    """For each row of ``patched``: ``(mean clean - mean patched) / (mean clean - mean corrupt)``,
    the share of the gap an intervention removes (1: down to the corrupt run, 0: no effect),
    with its bootstrap interval over the prompt resamples ``idx``."""
    c, x, p = clean.double(), corrupt.double(), patched.double()
    point = (c.mean() - p.mean(-1)) / (c.mean() - x.mean())
    cb, xb, pb = c[idx].mean(-1), x[idx].mean(-1), p[:, idx].mean(-1)  # [boot], [n, boot]
    boot = ((cb - pb) / (cb - xb)).T  # [boot, n]
    return _interval(point, boot)


def gap(clean: Float[Tensor, " batch"], corrupt: Float[Tensor, " batch"], idx: Tensor) -> Estimate:
    """The mean clean-minus-corrupt metric with its bootstrap interval."""
    d = (clean - corrupt).double()
    return _interval(d.mean()[None], d[idx].mean(-1)[:, None])[0]
