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

**Per row family.** A curriculum run's held-out rows mix two families, text windows and
synthetic repeated-span windows (:meth:`~.activations.TokenSource.heldout_families`); the pooled
metrics mix them in the run's proportion (90% synthetic for the curriculum preset), so every
metric is also given on each family's rows alone (``by_family``), from the same forward passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime.progress import progress_bar
from interp_toolkit.saes.sae import SparseAutoencoder
from interp_toolkit.stats.thresholds import DENSE

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
    #: The same metrics on each row family (``"text"``, ``"synthetic"``), when asked for.
    by_family: dict[str, SAEMetrics] = field(default_factory=dict)

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
        bins = torch.bucketize(live, torch.tensor(edges), right=True).clamp(max=len(edges) - 1)
        counts = torch.bincount(bins, minlength=len(edges)).tolist()
        labels = [f"{lo:g}..{hi:g}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
        return ["dead", f"< {edges[0]:g}", *labels], [self.dead, *counts]

    def evals(self, histogram: bool = True) -> SAEEvals:
        """evals.json's record: the metrics to 6 digits, the latent counts, the histogram
        (``histogram``: the pooled rows'; a family has none) and each family's."""
        ours = ("latents", "token_stats", None)  # the rest are SAELens's metrics, as computed
        metrics = [f.name for f in fields(SAEEvals) if f.metadata["json"].group not in ours]
        return SAEEvals(
            **{name: round(float(getattr(self, name)), 6) for name in metrics},
            d_sae=int(self.feature_density.numel()),
            dead=self.dead,
            dense=self.dense,
            dense_threshold=DENSE,
            density_histogram=DensityHistogram(*self.histogram()) if histogram else None,
            total_tokens_eval=self.n_tokens,
            by_family={k: v.evals(histogram=False) for k, v in self.by_family.items()},
        )


def _in(group: str, **choices: Any) -> Any:
    return field(metadata=json_field(group=group, **choices))


@dataclass(frozen=True)
class DensityHistogram:
    log10_density: list[str]
    latents: list[int]


@dataclass(frozen=True)
class SAEEvals(Jsonable):
    """An SAE's evals.json (:meth:`SAEMetrics.evals`; :meth:`from_dict` reads one back):
    SAELens's metrics in its groups (``sae_lens/evals.py``, each key in its order there), our
    latent counts, and each row family's (``by_family``)."""

    kl_div_score: float = _in("model_behavior_preservation")
    kl_div_with_ablation: float = _in("model_behavior_preservation")
    kl_div_with_sae: float = _in("model_behavior_preservation")
    ce_loss_score: float = _in("model_performance_preservation")
    ce_loss_with_ablation: float = _in("model_performance_preservation")
    ce_loss_with_sae: float = _in("model_performance_preservation")
    ce_loss_without_sae: float = _in("model_performance_preservation")
    explained_variance: float = _in("reconstruction_quality")
    mse: float = _in("reconstruction_quality")
    l0: float = _in("sparsity")
    d_sae: int = _in("latents")
    dead: int = _in("latents")
    dense: int = _in("latents")
    dense_threshold: float = _in("latents")
    density_histogram: DensityHistogram | None = _in("latents", omit_none=True)
    total_tokens_eval: int = _in("token_stats")
    by_family: dict[str, SAEEvals] = field(
        default_factory=dict, metadata=json_field(encode=lambda f: f or None, omit_none=True)
    )


def evaluate_sae(
    model: TransformerBridge,
    sae: SparseAutoencoder,
    tokens: Int[Tensor, "n pos"],
    *,
    families: Mapping[str, Tensor] | None = None,
    progress: bool = False,
) -> SAEMetrics:
    """Every metric of the module docstring on ``tokens`` (three forward passes per chunk:
    clean, SAE spliced in, hook zero-ablated); with ``families`` (name -> which rows belong to
    it) the same metrics on each family's rows too (:attr:`SAEMetrics.by_family`), from the same
    passes. A family's explained variance is against its own variance."""
    hook = sae.cfg.hook_name
    n, seq = tokens.shape
    rows = max(1, LOGIT_BYTES // (4 * seq * int(model.cfg.d_vocab)))
    acc = _RowSums(n, sae.cfg.d_in, sae.cfg.d_sae)
    dev = next(model.parameters()).device
    sae = sae.to(dev)
    bar = progress_bar(total=n, enabled=progress, desc="evaluate", unit="row")
    with torch.no_grad():
        for lo in range(0, n, rows):
            t = tokens[lo : lo + rows].to(dev)
            clean = model(t)
            record = partial(acc.activations, lo, seq)
            spliced = model.run_with_hooks(t, fwd_hooks=[(hook, splice(sae, hook, record))])
            ablated = model.run_with_hooks(t, fwd_hooks=[(hook, _zero)])
            acc.losses(lo, t, clean, spliced, ablated)
            bar.update(len(t))
    bar.close()
    pooled = acc.metrics(torch.ones(n, dtype=torch.bool))
    for name, mask in (families or {}).items():
        mask = torch.as_tensor(mask, dtype=torch.bool).cpu()
        if len(mask) != n:
            raise ValueError(f"family {name!r} marks {len(mask)} rows, the tokens have {n}")
        if bool(mask.any()):
            pooled.by_family[name] = acc.metrics(mask)
    return pooled


class _RowSums:
    """Per evaluation row: the sums every metric is made of, so any set of rows (all of them, a
    family) gives its metrics from one pass."""

    def __init__(self, n: int, d_in: int, d_sae: int) -> None:
        z = lambda *shape: torch.zeros(*shape, dtype=torch.float64)  # noqa: E731
        self.ce, self.ce_sae, self.ce_abl, self.kl_sae, self.kl_abl = (z(n) for _ in range(5))
        self.n_ce, self.sq, self.res, self.l0, self.n = (z(n) for _ in range(5))
        self.sum_x, self.fired = z(n, d_in), z(n, d_sae)

    def activations(self, lo: int, seq: int, x: Tensor, f: Tensor, x_hat: Tensor) -> None:
        x, x_hat = x.double().cpu(), x_hat.double().cpu()
        b = len(x) // seq
        fired = (f > 0).cpu().double().reshape(b, seq, -1)
        x3, r3 = x.reshape(b, seq, -1), (x - x_hat).reshape(b, seq, -1)
        sl = slice(lo, lo + b)
        self.sum_x[sl] += x3.sum(1)
        self.sq[sl] += x3.pow(2).sum((1, 2))
        self.res[sl] += r3.pow(2).sum((1, 2))
        self.l0[sl] += fired.sum((1, 2))
        self.n[sl] += seq
        self.fired[sl] += fired.sum(1)

    def losses(self, lo: int, t: Tensor, clean: Tensor, spliced: Tensor, ablated: Tensor) -> None:
        sl = slice(lo, lo + len(t))
        self.ce[sl] += _ce(clean, t).double().sum(1).cpu()
        self.ce_sae[sl] += _ce(spliced, t).double().sum(1).cpu()
        self.ce_abl[sl] += _ce(ablated, t).double().sum(1).cpu()
        self.kl_sae[sl] += _kl(clean[:, :-1], spliced[:, :-1]).double().sum(1).cpu()
        self.kl_abl[sl] += _kl(clean[:, :-1], ablated[:, :-1]).double().sum(1).cpu()
        self.n_ce[sl] += t.shape[1] - 1

    def metrics(self, rows: Tensor) -> SAEMetrics:
        s = lambda v: float(v[rows].sum())  # noqa: E731
        m, total = max(1.0, s(self.n)), max(1.0, s(self.n_ce))
        mean_x = self.sum_x[rows].sum(0) / m
        variance = s(self.sq) / m - float(mean_x.pow(2).sum())
        mse = s(self.res) / m
        return SAEMetrics(
            n_tokens=int(s(self.n)),
            l0=s(self.l0) / m,
            explained_variance=1.0 - mse / variance if variance > 1e-10 else float(mse < 1e-10),
            mse=mse,
            ce_loss_without_sae=s(self.ce) / total,
            ce_loss_with_sae=s(self.ce_sae) / total,
            ce_loss_with_ablation=s(self.ce_abl) / total,
            kl_div_with_sae=s(self.kl_sae) / total,
            kl_div_with_ablation=s(self.kl_abl) / total,
            feature_density=(self.fired[rows].sum(0) / m).float(),
        )
