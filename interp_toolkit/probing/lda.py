"""The linear probe: linear discriminant analysis with a shrunk shared covariance, in closed form.

``fit_probe(x, y)`` fits scores ``s_c(x) = (x − x̄) Σ⁻¹ μ_c − ½ μ_c Σ⁻¹ μ_c + log π_c`` (class
means μ_c of the centred rows, priors π_c, within-class covariance Σ shrunk towards
``tr(Σ)/d · I`` by the Ledoit-Wolf intensity) in float64; ``predict`` is the argmax. A linear
classifier with no learning rate, epochs or initialisation: deterministic, and one d x d solve
however many classes there are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int

from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.thresholds import CONFIDENCE


@dataclass
class LinearProbe:
    """A fitted LDA probe: ``predict(x) = classes[argmax(x @ weight + bias)]``."""

    classes: Int[torch.Tensor, " c"]
    weight: Float[torch.Tensor, "d c"]
    bias: Float[torch.Tensor, " c"]
    center: Float[torch.Tensor, " d"]
    shrinkage: float

    def predict(self, x: Float[torch.Tensor, "m d"]) -> Int[torch.Tensor, " m"]:
        out = torch.empty(x.shape[0], dtype=torch.long)
        for lo in range(0, x.shape[0], 1024):
            scores = (x[lo : lo + 1024].double() - self.center) @ self.weight + self.bias
            out[lo : lo + 1024] = self.classes[scores.argmax(-1)]
        return out


def ledoit_wolf(xc: Float[torch.Tensor, "m d"]) -> float:
    """Ledoit-Wolf shrinkage intensity of the covariance ``xcᵀxc / m`` of centred rows ``xc``
    towards ``tr/d · I`` (as sklearn's ``ledoit_wolf``), in [0, 1]."""
    m, d = xc.shape
    cov = xc.T @ xc / m
    mu = float(cov.trace()) / d
    delta = float(((cov - mu * torch.eye(d, dtype=cov.dtype)) ** 2).sum()) / d
    beta = (float((xc.pow(2).sum(1) ** 2).sum()) / m - float((cov**2).sum())) / (m * d)
    return 1.0 if delta <= 0 else min(max(beta, 0.0), delta) / delta


def fit_probe(x: Float[torch.Tensor, "m d"], y: Int[torch.Tensor, " m"]) -> LinearProbe:
    """Linear discriminant analysis with a shared, Ledoit-Wolf-shrunk covariance (float64)."""
    xd = x.double()
    center = xd.mean(0)
    xd = xd - center
    classes, yi = torch.unique(y, return_inverse=True)
    counts = torch.bincount(yi, minlength=len(classes)).double()
    means = torch.zeros(len(classes), xd.shape[1], dtype=torch.float64).index_add_(0, yi, xd)
    means /= counts[:, None]
    within = xd - means[yi]
    alpha = ledoit_wolf(within)
    d = xd.shape[1]
    cov = within.T @ within / len(xd)
    scale = float(cov.trace()) / d
    cov = (1 - alpha) * cov + alpha * max(scale, 1e-12) * torch.eye(d, dtype=torch.float64)
    weight = torch.linalg.solve(cov, means.T)  # [d, c]
    bias = -0.5 * (means * weight.T).sum(-1) + (counts / counts.sum()).log()
    return LinearProbe(classes, weight, bias, center, alpha)


# --------------------------------------------------------------------------- scoring


def stratified_weights(
    strata: Int[torch.Tensor, " unit"], n_boot: int, seed: int
) -> Float[torch.Tensor, "boot unit"]:
    """How often each unit is drawn in each of ``n_boot`` resamples **within its stratum**: each
    stratum's units drawn with replacement, as many as it has (seeded). Row 0 is the sample. With
    a class as the stratum every class keeps its number of units in every resample, so a balanced
    accuracy is over the same classes each time (a row resample drops rare classes from the
    resamples it misses, and the mean over the classes left then is not the sample's)."""
    n = len(strata)
    order = torch.argsort(strata, stable=True)
    _, counts = torch.unique_consecutive(strata[order], return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    size, first = counts.repeat_interleave(counts), starts.repeat_interleave(counts)
    gen = rng(seed, "probe_bootstrap")
    u = torch.rand(n_boot, n, generator=gen, dtype=torch.float64)
    offset = torch.minimum((u * size).long(), size - 1)
    picks = order[first + offset]
    weights = torch.zeros(n_boot + 1, n, dtype=torch.float64)
    weights[0] = 1.0
    weights[1:].scatter_add_(1, picks, torch.ones_like(picks, dtype=torch.float64))
    return weights


def class_units(
    y: Int[torch.Tensor, " m"], row_of: Int[torch.Tensor, " m"]
) -> tuple[Int[torch.Tensor, " m"], Int[torch.Tensor, " unit"]]:
    """The resampling units of a stratified bootstrap: each (row, label) cell of the held-out
    positions. Returns each position's unit and each unit's label (its stratum). A cell keeps a
    row's positions of one label together, so positions of a row are not treated as
    independent within a class."""
    _, yi = torch.unique(y, return_inverse=True)
    cells, unit_of = torch.unique(row_of * (int(yi.max()) + 1) + yi, return_inverse=True)
    unit_label = torch.empty(len(cells), dtype=y.dtype)
    unit_label[unit_of] = y
    return unit_of, unit_label


def balanced_accuracy(
    pred: Int[torch.Tensor, " m"],
    y: Int[torch.Tensor, " m"],
    row_of: Int[torch.Tensor, " m"],
    weights: Float[torch.Tensor, "boot row"],
) -> Float[torch.Tensor, " boot"]:
    """Balanced accuracy (the mean over the labels present of the share of that label's
    positions predicted right) on the sample (entry 0) and on each bootstrap resample of its
    units (``weights``: :func:`stratified_weights` over :func:`class_units`, or any resample
    of rows; ``row_of``: each position's unit). A predictor that
    ignores its input scores ``1 / n_labels`` on average (chance)."""
    classes, yi = torch.unique(y, return_inverse=True)
    n_classes = len(classes)
    # the (unit, label) cells that hold positions: sparse, so many units cost no dense product
    cells, cell_of = torch.unique(row_of * n_classes + yi, return_inverse=True)
    total = torch.bincount(cell_of, minlength=len(cells)).double()
    right = torch.bincount(cell_of, weights=(pred == y).double(), minlength=len(cells))
    unit, label = cells // n_classes, cells % n_classes
    drawn = weights[:, unit]  # [boot, cell]
    totals = torch.zeros(weights.shape[0], n_classes, dtype=torch.float64)
    rights = torch.zeros_like(totals)
    totals.index_add_(1, label, drawn * total)
    rights.index_add_(1, label, drawn * right)
    present = totals > 0
    recall = torch.where(present, rights / totals.clamp_min(1.0), torch.zeros_like(totals))
    return recall.sum(1) / present.sum(1).clamp_min(1)


def interval(draws: Float[torch.Tensor, " boot"]) -> tuple[float, float]:
    """The :data:`~interp_toolkit.stats.thresholds.CONFIDENCE` (95%) percentile interval of
    bootstrap draws (entry 0, the sample, left out)."""
    tails = torch.tensor([(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2], dtype=torch.float64)
    lo, hi = torch.quantile(draws[1:].double(), tails)
    return round(float(lo), 4) + 0.0, round(float(hi), 4) + 0.0  # + 0.0: no -0.0
