"""A known answer for dictionaries: activations built from planted sparse features, more
features than dimensions (superposition), and the score of a dictionary against them.

:class:`PlantedFeatures`: ``n_features`` random unit directions in ``d`` dimensions; a sample
switches each feature on independently with probability ``p`` (so ``n_features * p`` are on at a
time, on average) at a magnitude uniform in ``[0.5, 1.5]``, and is the sum of the switched-on
features' directions times their magnitudes. Block ``b`` of samples is a pure function of
(seed, ``b``), so it feeds :func:`~.train.fit_sae` directly.

:func:`mmcs` (mean max cosine similarity; Sharkey et al. 2022): for every planted feature, the
largest cosine similarity between its direction and any decoder row, averaged over features.
1 means every feature has a latent pointing exactly its way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp_toolkit.runtime.seeds import rng


@dataclass(frozen=True)
class PlantedFeatures:
    """``n_features`` sparse features in ``d`` dimensions (module docstring)."""

    d: int = 32
    n_features: int = 96
    p: float = 3 / 96
    samples_per_block: int = 8192
    seed: int = 0

    @property
    def directions(self) -> Float[Tensor, "feature d"]:
        gen = rng(self.seed, "planted_directions")  # not an SAE's init stream
        dirs = torch.randn(self.n_features, self.d, generator=gen)
        return dirs / dirs.norm(dim=-1, keepdim=True)

    def block(self, b: int) -> Float[Tensor, "n d"]:
        """Samples of block ``b``."""
        gen = rng(self.seed, "planted_samples", block=b)
        n, f = self.samples_per_block, self.n_features
        on = torch.rand(n, f, generator=gen) < self.p
        mag = 0.5 + torch.rand(n, f, generator=gen)
        return (on * mag) @ self.directions


def mmcs(
    features: Float[Tensor, "feature d"], decoder: Float[Tensor, "latent d"]
) -> Float[Tensor, ""]:
    """Mean over ``features`` of the largest cosine similarity with any row of ``decoder``."""
    a = features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b = decoder / decoder.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (a @ b.T).max(dim=1).values.mean()
