"""The local learning coefficient (LLC) of a model at its weights (Lau et al. 2023; read over
training as Hoogland et al. 2024 do): devinterp's SGLD sampler runs the chains
(``devinterp.slt.sampling.sample``, on copies of the model), and this adapter reads them. Model and
token batches in, :class:`LLCEstimate` out; nothing here knows runs or checkpoints.

The reduction is ours: after ``burn_in`` steps the next ``draws`` are a chain's draws,
``LLC_chain = nβ (mean of its draws - L(w*))``, the LLC is their mean and the interval mean ± 2
standard errors over chains (devinterp's own ``compute_llc`` averages the burn-in in too). The
diagnostics: every chain's loss trace (burn-in included), the split-half drift of each chain's
draws in LLC units, Gelman-Rubin's R-hat, and whether every loss was finite (devinterp stops a
chain at a non-finite loss: the estimate is then NaN, never a number). docs/stages.md, "The
estimator", has the update, the seeding and the comparison with the SGLD we wrote before.
"""

from __future__ import annotations

import gc
import math
import random
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

import numpy as np
import torch
from jaxtyping import Float, Int

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, from_json, json_field
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.seeds import derive

#: ``loss(model, tokens)``: the loss of every predicted position of a batch of token rows
#: ``[row, pos]``, ``[row, pos - 1]`` with a graph to the weights (devinterp's ``LossFn``).
LossFn = Callable[[torch.nn.Module, Int[torch.Tensor, "row pos"]], Float[torch.Tensor, "row pred"]]


@dataclass(frozen=True)
class SGLDSettings(Jsonable):
    """The estimator's settings (recorded with every estimate). The defaults are the ones
    calibrated on the cpu preset's 2-layer run (docs/stages.md: flat traces after the burn-in, the
    loss within ~0.5 nats of the checkpoint's); :data:`CALIBRATED` holds each preset's.

    ``step_size`` ε, ``gamma`` the localisation γ, ``nbeta`` the inverse temperature nβ (None:
    devinterp's default, rows per batch / log(rows per batch)), ``chains`` independent chains of
    ``burn_in`` + ``draws`` steps each, ``seed`` their noise (``runtime/seeds.py``, "llc_chains")."""

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


def rounded(x: Any) -> Any:
    """An estimate's number as its JSON holds it: 6 decimals, None where not finite (a stopped
    chain's NaN); a list's element by element."""
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return round(float(x), 6) if math.isfinite(x) else None


def _nan(x: Any) -> Any:
    """:func:`rounded` read back: None as NaN, a list's element by element."""
    return [_nan(v) for v in x] if isinstance(x, list) else float("nan") if x is None else x


_NUM, _GROUPED = json_field(encode=rounded, decode=_nan), json_field(skip=True, decode=_nan)


@dataclass
class LLCEstimate(Jsonable):
    """An LLC estimate with its chains. ``traces``: [chain, burn_in + draws] losses (the first
    ``burn_in`` of each are burn-in; None: written without them); ``init_loss``: L(w*) over every
    batch. Its JSON: numbers :func:`rounded`, the interval and the diagnostics grouped."""

    llc: float = field(metadata=_NUM)
    std: float = field(metadata=_NUM)
    low: float = field(metadata=_GROUPED)
    high: float = field(metadata=_GROUPED)
    per_chain: list[float] = field(metadata=_NUM)
    init_loss: float = field(metadata=_NUM)
    nbeta: float
    traces: Float[torch.Tensor, "chain step"] | None = field(
        metadata=json_field(digits=6, omit_none=True)
    )
    settings: SGLDSettings
    drift: list[float] = field(metadata=_GROUPED)
    r_hat: float = field(metadata=_GROUPED)
    finite: bool = field(metadata=_GROUPED)
    seconds: float = field(metadata=json_field(digits=3))
    n_batches: int
    rows_per_batch: int

    interval_rule: ClassVar[str] = "mean ± 2 standard errors over chains"
    json_extra = ("below_zero", "interval", "interval_rule", "diagnostics")
    json_order = (
        "llc",
        "below_zero",
        "std",
        "interval",
        "interval_rule",
        "per_chain",
        "init_loss",
        "nbeta",
        "settings",
        "diagnostics",
        "seconds",
        "n_batches",
        "rows_per_batch",
        "traces",
    )

    @property
    def below_zero(self) -> bool:
        """The interval lies wholly below 0: the chains found lower loss near the weights, so
        they are not at a local minimum (where the LLC is defined)."""
        return math.isfinite(self.high) and self.high < 0

    @property
    def interval(self) -> list[float | None]:
        return rounded([self.low, self.high])

    @property
    def diagnostics(self) -> dict[str, Any]:
        return {
            "drift": rounded(self.drift),
            "drift_rule": "nβ × (mean of a chain's second half of draws − its first half)",
            "r_hat": rounded(self.r_hat),
            "finite": self.finite,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LLCEstimate:
        """An estimate back from its JSON (None as NaN; no traces: an empty [0, 0] tensor)."""
        flat = {**d, **d["diagnostics"], "low": d["interval"][0], "high": d["interval"][1]}
        flat["traces"] = torch.tensor(d["traces"]).float() if d.get("traces") else torch.empty(0, 0)
        return from_json(cls, flat)  # the interval and the diagnostics hold fields


def estimate_llc(
    model: torch.nn.Module,
    batches: Sequence[Int[torch.Tensor, "row pos"]],
    loss_fn: LossFn,
    settings: SGLDSettings | None = None,
) -> LLCEstimate:
    """The LLC of ``model`` at its current weights on ``batches`` (token rows, all of one shape;
    each read whole by one SGLD step, in turn), by devinterp's sampler (module doc).

    The rows per batch set the default nβ. The model is not changed (devinterp samples on
    copies)."""
    from devinterp.slt import sampler
    from devinterp.slt.sampling import sample
    from tqdm.auto import trange

    settings = settings or SGLDSettings()
    settings.validate()
    if not batches:
        raise UserError("the LLC needs at least one batch.")
    shape = tuple(batches[0].shape)
    if len(shape) != 2 or any(tuple(b.shape) != shape for b in batches):
        raise ValueError("the LLC's batches must be token rows [row, pos], all of one shape")
    rows = shape[0]
    nbeta = settings.nbeta_for(rows)
    through = _Through(model, loss_fn)

    def token_loss(m: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        if m is model:  # L(w*)
            return loss_fn(model, tokens)
        # devinterp steps a deep copy of the model; its weights are run through the model itself
        # (a TransformerBridge's capture hooks still point at the model they were wired on: a
        # copy's forward would leave its graph on the original, and the next copy would fail)
        weights = {f"model.{n}": t for n, t in [*m.named_parameters(), *m.named_buffers()]}
        return torch.func.functional_call(through, weights, (tokens,))

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, _global_streams_kept(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a failed chain's warning: its NaN trace says it
        with mock.patch.object(sampler, "trange", partial(trange, disable=True)):  # our bars
            out = sample(
                model,
                [{"input_ids": row} for b in batches for row in b],  # a map-style dataset
                {},
                lr=settings.step_size,
                n_beta=nbeta,
                param_masks={n: None for n, p in model.named_parameters() if p.requires_grad},
                num_chains=settings.chains,
                num_draws=settings.draws,
                num_burnin_steps=settings.burn_in,
                batch_size=rows,
                num_init_loss_batches=len(batches),
                init_seed=derive(settings.seed, "llc_chains"),
                localization=settings.gamma,
                shuffle=False,
                device=str(next(model.parameters()).device),
                output_path=Path(tmp) / "samples.zarr",
                loss_fn=token_loss,
            )
        losses = out.dataset.sampling_loss_micro.values  # [chain, step, row, pred], NaN if unrun
        init = float(np.mean(out.dataset.init_loss.values, dtype=np.float64))
    traces = torch.from_numpy(losses.astype(np.float64).mean(axis=(2, 3))).float()
    return _summarise(traces, init, nbeta, settings, time.perf_counter() - t0, len(batches), rows)


class _Through(torch.nn.Module):
    """``loss_fn(model, tokens)`` as a module, so that another copy's weights can run through it
    (``torch.func.functional_call``)."""

    def __init__(self, model: torch.nn.Module, loss_fn: LossFn) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, tokens: Int[torch.Tensor, "row pos"]) -> Float[torch.Tensor, "row pred"]:
        return self.loss_fn(self.model, tokens)


@contextmanager
def _global_streams_kept() -> Iterator[None]:
    """devinterp seeds torch's, numpy's and Python's global generators for its chains: the
    caller's streams are as they were afterwards."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    np_state, py_state = np.random.get_state(), random.getstate()
    gc.freeze()  # devinterp collects garbage around every chain: only its own is looked at
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        gc.unfreeze()
        np.random.set_state(np_state)
        random.setstate(py_state)


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
