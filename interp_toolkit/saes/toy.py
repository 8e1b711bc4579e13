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

:func:`encoder_recovery` (recovery *through the encoder*, which MMCS does not read): a latent
"detects" a feature on a sample when it fires (activation > 0) and the feature is on. For each
planted feature, its best latent is the one with the largest F1 (``2·both / (fires + on)``) on
one held-out block of samples (:meth:`PlantedFeatures.heldout`, a stream no training block uses);
that latent's **precision** (of the samples it fires on, the share with the feature on) and
**recall** (of the samples with the feature on, the share it fires on) are then read on a second
held-out block, so the choice of latent is not scored on the samples it was chosen on.
A decoder can point exactly along a feature (MMCS 1) while its encoder fires on other features'
samples too (a TopK SAE with ``k`` above the number of features on fires ``k`` latents anyway).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
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
        return self._draw(rng(self.seed, "planted_samples", block=b))[1]

    def heldout(self, b: int) -> tuple[Bool[Tensor, "n feature"], Float[Tensor, "n d"]]:
        """(which features are on, the samples) of held-out block ``b``: drawn like a training
        block from a stream that no training block reads."""
        return self._draw(rng(self.seed, "planted_heldout", block=b))

    def _draw(self, gen: torch.Generator) -> tuple[Bool[Tensor, "n feature"], Float[Tensor, "n d"]]:
        n, f = self.samples_per_block, self.n_features
        on = torch.rand(n, f, generator=gen) < self.p
        mag = 0.5 + torch.rand(n, f, generator=gen)
        return on, (on * mag) @ self.directions


def mmcs(
    features: Float[Tensor, "feature d"], decoder: Float[Tensor, "latent d"]
) -> Float[Tensor, ""]:
    """Mean over ``features`` of the largest cosine similarity with any row of ``decoder``."""
    a = features / features.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    b = decoder / decoder.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (a @ b.T).max(dim=1).values.mean()


@dataclass(frozen=True)
class EncoderRecovery:
    """Per planted feature: its best latent (chosen on one held-out block) and that latent's
    precision and recall on another (module docstring)."""

    latent: Int[Tensor, " feature"]
    precision: Float[Tensor, " feature"]
    recall: Float[Tensor, " feature"]

    def summary(self) -> dict[str, Any]:
        r = lambda v: round(float(v), 4)  # noqa: E731
        p, q = self.precision, self.recall
        return {
            "features": len(p),
            "distinct_latents": len(set(self.latent.tolist())),
            "precision": {"mean": r(p.mean()), "min": r(p.min()), "max": r(p.max())},
            "recall": {"mean": r(q.mean()), "min": r(q.min()), "max": r(q.max())},
            "both_at_least_0.9": int(((p >= 0.9) & (q >= 0.9)).sum()),
        }


def _counts(
    fires: Bool[Tensor, "n latent"], on: Bool[Tensor, "n feature"]
) -> tuple[Tensor, Tensor, Tensor]:
    """(both [latent, feature], fires [latent], on [feature]) sample counts."""
    both = fires.T.double() @ on.double()
    return both, fires.double().sum(0), on.double().sum(0)


def encoder_recovery(encode: Callable[[Tensor], Tensor], toy: PlantedFeatures) -> EncoderRecovery:
    """Precision and recall of each planted feature's best latent (module docstring: chosen on
    held-out block 0, scored on block 1); ``encode`` maps samples ``[n, d]`` to latent
    activations ``[n, latent]``."""
    with torch.no_grad():
        on, x = toy.heldout(0)
        both, fires, n_on = _counts(encode(x) > 0, on)
        f1 = 2 * both / (fires[:, None] + n_on[None, :]).clamp_min(1)
        best = f1.argmax(0)  # [feature]
        on, x = toy.heldout(1)
        both, fires, n_on = _counts(encode(x) > 0, on)
    cols = torch.arange(len(best))
    hit = both[best, cols]
    precision = hit / fires[best].clamp_min(1)
    recall = hit / n_on.clamp_min(1)
    return EncoderRecovery(best, precision.float(), recall.float())
