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


def accuracy(
    probe: LinearProbe, x: Float[torch.Tensor, "m d"], y: Int[torch.Tensor, " m"]
) -> float:
    """Fraction of rows of ``x`` the probe labels ``y`` (NaN for no rows)."""
    return float((probe.predict(x) == y).double().mean()) if len(y) else float("nan")
