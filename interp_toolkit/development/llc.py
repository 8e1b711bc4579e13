"""The local learning coefficient (LLC) of a model at its weights, estimated by SGLD (Lau et al.
2023, "Quantifying degeneracy in singular models via the learning coefficient"; the estimator
Hoogland et al. 2024 read over training).

Model and batches in, :class:`LLCEstimate` out; nothing here knows runs or checkpoints.

The estimator. With ``w*`` the weights given, ``L(w)`` the mean loss over the batches and
``nβ`` the inverse temperature, every chain starts at ``w*`` and takes SGLD steps

    w <- w - (ε/2) (nβ ∇L_b(w) + γ (w - w*)) + sqrt(ε) N(0, I)

on batch ``b`` of step ``t`` (the batches in turn, each chain from its own offset), the update of
devinterp's ``SGLD`` (weight decay 0, noise level 1; ``tests/unit/development/test_llc.py`` checks the two
take the same steps). The loss of the batch each step reads is recorded; after ``burn_in`` steps
the next ``draws`` are the chain's draws, and

    LLC_chain = nβ (mean of the chain's draws - L(w*)),     LLC = mean over chains

(devinterp 2.0.1's ``compute_llc`` averages the burn-in steps too; here they are only in the
traces). The interval is the mean ± 2 standard errors over chains. Diagnostics: every chain's loss
trace (burn-in included), the split-half drift of each chain's draws in LLC units (a trace still
climbing reads large), Gelman-Rubin's R-hat over chains, and whether any step's loss was not
finite (then the estimate is NaN, never a number). The weights are restored afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from jaxtyping import Float

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.seeds import rng

#: ``loss(model, batch)``: a batch's mean loss, a scalar tensor with a graph to the weights.
LossFn = Callable[[torch.nn.Module, Any], Float[torch.Tensor, ""]]


@dataclass(frozen=True)
class SGLDSettings:
    """The estimator's settings (recorded with every estimate). The defaults are the ones
    calibrated on the cpu preset's 2-layer run (docs/stages.md: flat traces after the burn-in, the
    loss within ~0.5 nats of the checkpoint's); :data:`CALIBRATED` holds each preset's.

    ``step_size`` ε, ``gamma`` the localisation γ, ``nbeta`` the inverse temperature nβ (None:
    devinterp's default, rows per batch / log(rows per batch)), ``chains`` independent chains of
    ``burn_in`` + ``draws`` steps each, ``seed`` their noise (``runtime/seeds.py``, "llc_sgld")."""

    step_size: float = 1e-4
    gamma: float = 1000.0
    nbeta: float | None = 50.0
    chains: int = 2
    draws: int = 40
    burn_in: int = 20
    seed: int = 0

    def validate(self) -> None:
        validate.number(self.step_size, "step_size", above=0, below=1)
        validate.number(self.gamma, "gamma", least=0)
        validate.number(self.nbeta, "nbeta", above=0, optional=True)
        validate.count(self.chains, "chains", 2)  # an interval needs two chains
        validate.count(self.draws, "draws", 2)
        validate.count(self.burn_in, "burn_in", 0)
        validate.seed(self.seed)

    def nbeta_for(self, rows: int) -> float:
        """nβ: the setting, or devinterp's ``default_nbeta`` of ``rows`` per batch."""
        if self.nbeta is not None:
            return float(self.nbeta)
        return rows / math.log(rows) if rows > 1 else 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The settings calibrated per training preset (docs/stages.md, "Settings"): the cpu preset's on
#: its 2-layer run; the text preset's on its 2-layer run (seed 0), where the cpu preset's step,
#: localisation and temperature passed the same checks but 20 burn-in steps were too few (the
#: chains' loss still falling at step 20 on checkpoints before step ~100).
CALIBRATED: dict[str, SGLDSettings] = {
    "cpu": SGLDSettings(),
    "text": SGLDSettings(burn_in=50, draws=100),
}


def calibrated_settings(
    preset: str | None, given: Mapping[str, float | int] | None = None
) -> tuple[SGLDSettings, str]:
    """The settings calibrated for ``preset`` (a run's recorded preset) with the fields in
    ``given`` replaced, and where they come from in words (the given ones named as their
    ``--flags``); a run of another preset gets the cpu preset's, said so."""
    if preset in CALIBRATED:
        base, source = CALIBRATED[preset], f"calibrated for the {preset} preset (docs/stages.md)"
    else:
        what = f"preset {preset!r}" if preset else "a run without a preset"
        base, source = CALIBRATED["cpu"], f"the cpu preset's calibration (none was done for {what})"
    if not given:
        return base, source
    flags = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items())
    return replace(base, **given), f"{source}; given: {flags}"


@dataclass
class LLCEstimate:
    """An LLC estimate with its chains. ``traces``: [chain, burn_in + draws] losses (the first
    ``burn_in`` of each are burn-in); ``init_loss``: L(w*) over every batch."""

    llc: float
    std: float
    low: float
    high: float
    per_chain: list[float]
    init_loss: float
    nbeta: float
    traces: Float[torch.Tensor, "chain step"]
    settings: SGLDSettings
    drift: list[float]
    r_hat: float
    finite: bool
    seconds: float
    n_batches: int
    rows_per_batch: int

    @property
    def below_zero(self) -> bool:
        """The interval lies wholly below 0: the chains found lower loss near the weights, so
        they are not at a local minimum (where the LLC is defined)."""
        return math.isfinite(self.high) and self.high < 0

    def to_dict(self, traces: bool = True) -> dict[str, Any]:
        """JSON-safe fields (NaN as None); ``traces``: with the per-chain loss traces."""
        out: dict[str, Any] = {
            "llc": _num(self.llc),
            "below_zero": self.below_zero,
            "std": _num(self.std),
            "interval": [_num(self.low), _num(self.high)],
            "interval_rule": "mean ± 2 standard errors over chains",
            "per_chain": [_num(v) for v in self.per_chain],
            "init_loss": _num(self.init_loss),
            "nbeta": self.nbeta,
            "settings": self.settings.to_dict(),
            "diagnostics": {
                "drift": [_num(v) for v in self.drift],
                "drift_rule": "nβ × (mean of a chain's second half of draws − its first half)",
                "r_hat": _num(self.r_hat),
                "finite": self.finite,
            },
            "seconds": round(self.seconds, 3),
            "n_batches": self.n_batches,
            "rows_per_batch": self.rows_per_batch,
        }
        if traces:
            out["traces"] = [[round(float(v), 6) for v in row] for row in self.traces]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLCEstimate:
        """An estimate back from :meth:`to_dict` (None as NaN; no traces: an empty tensor)."""
        nan = float("nan")

        def num(x: float | None) -> float:
            return nan if x is None else float(x)

        diag = d["diagnostics"]
        return cls(
            llc=num(d["llc"]),
            std=num(d["std"]),
            low=num(d["interval"][0]),
            high=num(d["interval"][1]),
            per_chain=[num(v) for v in d["per_chain"]],
            init_loss=num(d["init_loss"]),
            nbeta=float(d["nbeta"]),
            traces=torch.tensor(d.get("traces") or [], dtype=torch.float32),
            settings=SGLDSettings(**d["settings"]),
            drift=[num(v) for v in diag["drift"]],
            r_hat=num(diag["r_hat"]),
            finite=bool(diag["finite"]),
            seconds=float(d["seconds"]),
            n_batches=int(d["n_batches"]),
            rows_per_batch=int(d["rows_per_batch"]),
        )


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(float(x), 6)


def estimate_llc(
    model: torch.nn.Module,
    batches: Sequence[Any],
    loss_fn: LossFn,
    settings: SGLDSettings | None = None,
    *,
    rows_per_batch: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> LLCEstimate:
    """The LLC of ``model`` at its current weights on ``batches`` (each passed to ``loss_fn``).

    ``rows_per_batch`` (default: ``len(batches[0])``) sets the default nβ. ``progress(done,
    total)`` is called after every SGLD step. The model's weights and train/eval mode are
    restored (it is evaluated in eval mode: no dropout here anyway)."""
    import time

    settings = settings or SGLDSettings()
    settings.validate()
    if not batches:
        raise UserError("the LLC needs at least one batch.")
    rows = int(rows_per_batch if rows_per_batch is not None else len(batches[0]))
    nbeta = settings.nbeta_for(rows)
    params = [p for p in model.parameters() if p.requires_grad]
    center = [p.detach().clone() for p in params]
    was_training = model.training
    model.eval()
    t0 = time.perf_counter()
    gen = rng(settings.seed, "llc_sgld")
    n_steps = settings.burn_in + settings.draws
    traces = torch.full((settings.chains, n_steps), float("nan"))
    try:
        with torch.no_grad():
            init = sum(float(loss_fn(model, b)) for b in batches) / len(batches)
        for chain in range(settings.chains):
            offset = (chain * len(batches)) // settings.chains
            for t in range(n_steps):
                loss = _sgld_step(
                    model, params, center, batches[(offset + t) % len(batches)], loss_fn,
                    settings, nbeta, gen,
                )  # fmt: skip
                traces[chain, t] = loss
                if not math.isfinite(loss):
                    break
                if progress is not None:
                    progress(chain * n_steps + t + 1, settings.chains * n_steps)
            _restore(params, center)
    finally:
        _restore(params, center)
        model.train(was_training)
    return _summarise(traces, init, nbeta, settings, time.perf_counter() - t0, len(batches), rows)


def _sgld_step(
    model: torch.nn.Module,
    params: list[torch.nn.Parameter],
    center: list[torch.Tensor],
    batch: Any,
    loss_fn: LossFn,
    settings: SGLDSettings,
    nbeta: float,
    gen: torch.Generator,
) -> float:
    """One SGLD step (devinterp's update, in its order); the loss read before it."""
    for p in params:
        p.grad = None
    loss = loss_fn(model, batch)
    loss.backward()
    eps = settings.step_size
    with torch.no_grad():
        for p, w0 in zip(params, center, strict=True):
            dw = p.grad * nbeta if p.grad is not None else torch.zeros_like(p)
            if settings.gamma:
                dw.add_(p - w0, alpha=settings.gamma)
            noise = torch.normal(0.0, 1.0, size=tuple(p.shape), generator=gen).to(p.device)
            p.add_(dw, alpha=-0.5 * eps)
            p.add_(noise, alpha=eps**0.5)
            p.grad = None
    return float(loss.detach())


def _restore(params: list[torch.nn.Parameter], center: list[torch.Tensor]) -> None:
    with torch.no_grad():
        for p, w0 in zip(params, center, strict=True):
            p.copy_(w0)
            p.grad = None


def _summarise(
    traces: Float[torch.Tensor, "chain step"],
    init: float,
    nbeta: float,
    settings: SGLDSettings,
    seconds: float,
    n_batches: int,
    rows: int,
) -> LLCEstimate:
    draws = traces[:, settings.burn_in :].double()
    finite = bool(torch.isfinite(traces).all()) and math.isfinite(init)
    nan = float("nan")
    if finite:
        per_chain = (nbeta * (draws.mean(dim=1) - init)).tolist()
        mean = sum(per_chain) / len(per_chain)
        std = float(torch.tensor(per_chain).std())
        half = 2 * std / math.sqrt(len(per_chain))
        mid = draws.shape[1] // 2
        drift = (nbeta * (draws[:, mid:].mean(1) - draws[:, :mid].mean(1))).tolist()
        r_hat = gelman_rubin(draws)
    else:
        per_chain, mean, std, half = [nan] * settings.chains, nan, nan, nan
        drift, r_hat = [nan] * settings.chains, nan
    return LLCEstimate(
        llc=mean,
        std=std,
        low=mean - half,
        high=mean + half,
        per_chain=per_chain,
        init_loss=init,
        nbeta=nbeta,
        traces=traces,
        settings=settings,
        drift=drift,
        r_hat=r_hat,
        finite=finite,
        seconds=seconds,
        n_batches=n_batches,
        rows_per_batch=rows,
    )


def gelman_rubin(draws: Float[torch.Tensor, "chain draw"]) -> float:
    """Gelman-Rubin's potential scale reduction R-hat of ``draws`` (near 1: the chains agree;
    BDA3 eq. 11.4, without splitting chains)."""
    m, n = draws.shape
    if m < 2 or n < 2:
        return float("nan")
    x = draws.double()
    within = float(x.var(dim=1, unbiased=True).mean())
    between = n * float(x.mean(dim=1).var(unbiased=True))
    if within == 0:
        return 1.0 if between == 0 else float("inf")
    var_plus = (n - 1) / n * within + between / n
    return math.sqrt(var_plus / within)
