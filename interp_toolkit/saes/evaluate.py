"""An SAE measured the way SAELens measures one (``sae_lens/evals.py``), on held-out rows.

- ``l0``: mean number of latents with a nonzero activation per token.
- ``explained_variance``: ``1 - E‖x - x̂‖² / Var(x)``, ``Var(x) = E‖x‖² - ‖E x‖²`` summed over
  dimensions (SAELens's ``ExplainedVarianceCalculator``: the fraction of variance explained).
- ``ce_loss_score`` (CE loss recovered): ``(CE_ablation - CE_sae) / (CE_ablation - CE_clean)``,
  the language-model loss with the SAE's reconstruction spliced in at its hook, between
  zero-ablating the hook (0) and the clean model (1).
- ``kl_div_with_sae`` / ``kl_div_with_ablation``: ``KL(clean ‖ spliced)`` per token, mean;
  ``kl_div_score = (KL_ablation - KL_sae) / KL_ablation``.
- ``feature_density`` per latent: the share of tokens it fires on; ``dead``: latents that fire on
  none of the evaluation tokens; ``dense``: latents firing on at least :data:`DENSE` of them.

Every token of every row counts (the rows have no BOS); losses read every position but the last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.runtime.progress import progress_bar
from interp_toolkit.saes.sae import SparseAutoencoder

#: A latent firing on at least this share of tokens is "dense".
DENSE = 0.1
#: Bytes of logits one evaluation chunk may hold (three runs of it at once).
LOGIT_BYTES = 96 * 2**20
#: Edges of the log10 density histogram: -6, -5.5, ..., 0.
HIST_EDGES = [x / 2 for x in range(-12, 1)]


def splice(sae: SparseAutoencoder, hook: str, record: Callable[[Tensor, Tensor, Tensor], None]):
    """A forward hook replacing the activation at ``hook`` by the SAE's reconstruction (heads
    flattened for ``hook_z`` and put back); ``record(x, f, x_hat)`` sees each chunk."""

    def fn(act: Tensor, hook: Any = None) -> Tensor:
        shape = act.shape
        x = act.reshape(shape[0] * shape[1], -1).float()
        f = sae.encode(x)
        x_hat = sae.decode(f)
        record(x, f, x_hat)
        return x_hat.reshape(shape).to(act.dtype)

    return fn


def _zero(act: Tensor, hook: Any = None) -> Tensor:
    return torch.zeros_like(act)


def _ce(logits: Tensor, tokens: Tensor) -> Tensor:
    logp = logits[:, :-1].float().log_softmax(-1)
    return -logp.gather(-1, tokens[:, 1:, None].to(logp.device))[..., 0]


def _kl(clean: Tensor, other: Tensor) -> Tensor:
    p = clean.float().log_softmax(-1)
    q = other.float().log_softmax(-1)
    return (p.exp() * (p - q)).sum(-1)


@dataclass
class SAEMetrics:
    """SAELens's metrics of one SAE on ``n_tokens`` held-out tokens (module docstring)."""

    n_tokens: int
    l0: float
    explained_variance: float
    mse: float
    ce_loss_without_sae: float
    ce_loss_with_sae: float
    ce_loss_with_ablation: float
    kl_div_with_sae: float
    kl_div_with_ablation: float
    feature_density: Float[Tensor, " d_sae"]

    @property
    def ce_loss_score(self) -> float:
        gap = self.ce_loss_with_ablation - self.ce_loss_without_sae
        return (self.ce_loss_with_ablation - self.ce_loss_with_sae) / gap if gap else float("nan")

    @property
    def kl_div_score(self) -> float:
        k = self.kl_div_with_ablation
        return (k - self.kl_div_with_sae) / k if k else float("nan")

    @property
    def dead(self) -> int:
        return int((self.feature_density == 0).sum())

    @property
    def dense(self) -> int:
        return int((self.feature_density >= DENSE).sum())

    def histogram(self) -> tuple[list[str], list[int]]:
        """(bin labels, latent counts) of log10 feature density: dead, below -6, then bins of
        half a decade up to 0 (a latent firing on every token falls in the last)."""
        live = self.feature_density[self.feature_density > 0].log10()
        edges = HIST_EDGES
        labels, counts = ["dead", f"< {edges[0]:g}"], [self.dead, int((live < edges[0]).sum())]
        for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
            last = i == len(edges) - 2
            inside = (live >= lo) & ((live <= hi) if last else (live < hi))
            labels.append(f"{lo:g}..{hi:g}")
            counts.append(int(inside.sum()))
        return labels, counts

    def to_dict(self) -> dict[str, Any]:
        """SAELens's metric names and groups, plus our latent counts and the histogram."""
        labels, counts = self.histogram()
        r = lambda v: round(float(v), 6)  # noqa: E731
        return {
            "model_behavior_preservation": {
                "kl_div_score": r(self.kl_div_score),
                "kl_div_with_ablation": r(self.kl_div_with_ablation),
                "kl_div_with_sae": r(self.kl_div_with_sae),
            },
            "model_performance_preservation": {
                "ce_loss_score": r(self.ce_loss_score),
                "ce_loss_with_ablation": r(self.ce_loss_with_ablation),
                "ce_loss_with_sae": r(self.ce_loss_with_sae),
                "ce_loss_without_sae": r(self.ce_loss_without_sae),
            },
            "reconstruction_quality": {
                "explained_variance": r(self.explained_variance),
                "mse": r(self.mse),
            },
            "sparsity": {"l0": r(self.l0)},
            "latents": {
                "d_sae": int(self.feature_density.numel()),
                "dead": self.dead,
                "dense": self.dense,
                "dense_threshold": DENSE,
                "density_histogram": {"log10_density": labels, "latents": counts},
            },
            "token_stats": {"total_tokens_eval": self.n_tokens},
        }


def evaluate_sae(
    model: TransformerBridge,
    sae: SparseAutoencoder,
    tokens: Int[Tensor, "n pos"],
    *,
    progress: bool = False,
) -> SAEMetrics:
    """Every metric of the module docstring on ``tokens`` (three forward passes per chunk:
    clean, SAE spliced in, hook zero-ablated)."""
    hook = sae.cfg.hook_name
    n, seq = tokens.shape
    rows = max(1, LOGIT_BYTES // (4 * seq * int(model.cfg.d_vocab)))
    acc = {"ce": 0.0, "ce_sae": 0.0, "ce_abl": 0.0, "kl_sae": 0.0, "kl_abl": 0.0, "n_ce": 0}
    sum_x = torch.zeros(sae.cfg.d_in, dtype=torch.float64)
    stats = {"sq": 0.0, "res": 0.0, "l0": 0.0, "n": 0}
    fired = torch.zeros(sae.cfg.d_sae, dtype=torch.float64)
    sae = sae.to(next(model.parameters()).device)

    def record(x: Tensor, f: Tensor, x_hat: Tensor) -> None:
        nonlocal sum_x, fired
        x, f, x_hat = x.double().cpu(), (f > 0).cpu(), x_hat.double().cpu()
        sum_x += x.sum(0)
        stats["sq"] += float(x.pow(2).sum())
        stats["res"] += float((x - x_hat).pow(2).sum())
        stats["l0"] += float(f.sum())
        stats["n"] += len(x)
        fired += f.sum(0).double()

    dev = next(model.parameters()).device
    bar = progress_bar(total=n, enabled=progress, desc="evaluate", unit="row")
    with torch.no_grad():
        for lo in range(0, n, rows):
            t = tokens[lo : lo + rows].to(dev)
            clean = model(t)
            spliced = model.run_with_hooks(t, fwd_hooks=[(hook, splice(sae, hook, record))])
            ablated = model.run_with_hooks(t, fwd_hooks=[(hook, _zero)])
            acc["ce"] += float(_ce(clean, t).sum())
            acc["ce_sae"] += float(_ce(spliced, t).sum())
            acc["ce_abl"] += float(_ce(ablated, t).sum())
            acc["kl_sae"] += float(_kl(clean[:, :-1], spliced[:, :-1]).sum())
            acc["kl_abl"] += float(_kl(clean[:, :-1], ablated[:, :-1]).sum())
            acc["n_ce"] += t.shape[0] * (t.shape[1] - 1)
            bar.update(len(t))
    bar.close()
    m, total = stats["n"], acc["n_ce"]
    mean_x = sum_x / max(1, m)
    variance = stats["sq"] / max(1, m) - float(mean_x.pow(2).sum())
    mse = stats["res"] / max(1, m)
    return SAEMetrics(
        n_tokens=int(m),
        l0=stats["l0"] / max(1, m),
        explained_variance=1.0 - mse / variance if variance > 1e-10 else float(mse < 1e-10),
        mse=mse,
        ce_loss_without_sae=acc["ce"] / total,
        ce_loss_with_sae=acc["ce_sae"] / total,
        ce_loss_with_ablation=acc["ce_abl"] / total,
        kl_div_with_sae=acc["kl_sae"] / total,
        kl_div_with_ablation=acc["kl_abl"] / total,
        feature_density=(fired / max(1, m)).float(),
    )
