"""FLOPs counted from a model config, and the machine's measured matmul rate at those shapes: the
roofline that benchmarks/roofline.py and benchmarks/train_throughput.py compare hot paths with.

A step's matmuls are listed from the config (:func:`forward_matmuls`; a training step is each
forward matmul plus its two backward ones, :func:`training_matmuls`). Each shape is timed with
``torch.matmul`` on the same threads (:func:`measure_rates`), and the roofline time of a path is
``sum(flops_i / rate_i)``: the time its matmuls alone would take at the rate this machine reaches
at their shapes. A path's *fraction of the roofline* is that time over the path's measured time.

Counted: the q/k/v/o projections, the MLP (if any), the unembedding, and attention's two batched
matmuls over the full ``n_ctx x n_ctx`` square (the causal half is not subtracted; SDPA's CPU
kernel skips masked blocks, so attention is over-counted by up to 2x; it is <= 3% of the step at
our shapes). Not counted: embeddings (a gather), softmax, the loss, LayerNorm, the optimizer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: a dimension above this is timed on a slice of this width (the rate per flop is the same)
MAX_TIMED_DIM = 8192
_CLOCK = {"fn": time.perf_counter, "name": "wall"}


def set_clock(threads: int, name: str | None = None) -> str:
    """What :func:`now` reads: ``"cpu"`` (this process's CPU time) or ``"wall"``; by default
    ``cpu`` with one thread, else ``wall``. On a shared machine the CPU share a process gets
    swings from second to second; with one thread its CPU time counts the work alone (what the
    wall clock reads on an idle machine), so side-by-side ratios stop swinging with the share.
    With several threads CPU time adds theirs up, so the wall clock is used."""
    name = name or ("cpu" if threads == 1 else "wall")
    _CLOCK.update(fn=time.process_time if name == "cpu" else time.perf_counter, name=name)
    return name


def now() -> float:
    """Seconds on the clock :func:`set_clock` chose."""
    return _CLOCK["fn"]()


@dataclass(frozen=True)
class Matmul:
    """``batch`` products of [m, k] @ [k, n]."""

    name: str
    m: int
    k: int
    n: int
    batch: int = 1

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.m, self.k, self.n)


def forward_matmuls(
    cfg: Any, n_seqs: int, n_ctx: int | None = None, *, unembed: bool = True
) -> list[Matmul]:
    """The matmuls of one forward pass of ``cfg`` (an ModelConfig) on ``n_seqs`` sequences
    of ``n_ctx`` tokens (default: the config's); ``unembed=False``: a pass that stops before the
    unembedding (head scoring, probes)."""
    t = int(n_ctx or cfg.n_ctx)
    m, d, h, dh = n_seqs * t, int(cfg.d_model), int(cfg.n_heads), int(cfg.d_head)
    out: list[Matmul] = []
    for layer in range(int(cfg.n_layers)):
        out += [Matmul(f"L{layer} {w}", m, d, h * dh) for w in ("q", "k", "v")]
        out += [
            Matmul(f"L{layer} QK^T", t, dh, t, n_seqs * h),
            Matmul(f"L{layer} AV", t, t, dh, n_seqs * h),
            Matmul(f"L{layer} o", m, h * dh, d),
        ]
        d_mlp = int(getattr(cfg, "mlp_width", 0) or 0)
        if d_mlp:
            out += [
                Matmul(f"L{layer} mlp_in", m, d, d_mlp),
                Matmul(f"L{layer} mlp_out", m, d_mlp, d),
            ]
    if unembed:
        out.append(Matmul("unembed", m, d, int(cfg.d_vocab)))
    return out


def training_matmuls(forward: Sequence[Matmul]) -> list[Matmul]:
    """A training step: each forward ``[m,k]@[k,n]``, its input gradient ``[m,n]@[n,k]`` and its
    weight (or second input's) gradient ``[k,m]@[m,n]``: 3x the forward FLOPs."""
    out: list[Matmul] = []
    for f in forward:
        out += [
            f,
            Matmul(f.name + " dX", f.m, f.n, f.k, f.batch),
            Matmul(f.name + " dW", f.k, f.m, f.n, f.batch),
        ]
    return out


def flops(mms: Iterable[Matmul]) -> int:
    return sum(mm.flops for mm in mms)


def _timed(mm: Matmul) -> Matmul:
    m, k, n = (min(x, MAX_TIMED_DIM) for x in (mm.m, mm.k, mm.n))
    return Matmul(mm.name, m, k, n, mm.batch)


def timed_shape(mm: Matmul) -> tuple[int, int, int, int]:
    """The shape ``mm``'s rate is measured (and looked up) at."""
    return _timed(mm).shape


def measure_rate(mm: Matmul, dtype: torch.dtype, seconds: float = 0.25) -> float:
    """FLOP/s of ``torch.matmul`` at ``mm``'s shape (dims over MAX_TIMED_DIM sliced) in
    ``dtype`` on the CPU with the current threads: the best of three timed windows (each at
    least ``seconds``, or two products)."""
    s = _timed(mm)
    shape_a = (s.batch, s.m, s.k) if s.batch > 1 else (s.m, s.k)
    shape_b = (s.batch, s.k, s.n) if s.batch > 1 else (s.k, s.n)
    a, b = torch.randn(shape_a).to(dtype), torch.randn(shape_b).to(dtype)
    torch.matmul(a, b)
    best = 0.0
    for _ in range(3):
        reps, t0 = 0, now()
        while reps < 2 or now() - t0 < seconds:
            torch.matmul(a, b)
            reps += 1
        best = max(best, reps * s.flops / (now() - t0))
    return best


def measure_rates(
    mms: Iterable[Matmul], dtypes: Sequence[torch.dtype], seconds: float = 0.25
) -> dict[torch.dtype, dict[tuple[int, int, int, int], float]]:
    """``{dtype: {shape: FLOP/s}}`` for every distinct (timed) shape in ``mms``."""
    shapes = {_timed(mm).shape: mm for mm in mms}
    return {
        dt: {shape: measure_rate(mm, dt, seconds) for shape, mm in shapes.items()} for dt in dtypes
    }


def roofline_seconds(mms: Iterable[Matmul], rates: dict[tuple[int, int, int, int], float]) -> float:
    """Seconds ``mms`` take at ``rates`` (one dtype's, from :func:`measure_rates`)."""
    return sum(mm.flops / rates[_timed(mm).shape] for mm in mms)


def median_rates(
    runs: Sequence[dict[torch.dtype, dict[tuple[int, int, int, int], float]]],
) -> dict[torch.dtype, dict[tuple[int, int, int, int], float]]:
    """Per dtype and shape, the median rate over several :func:`measure_rates` runs."""
    first = runs[0]
    return {
        dt: {shape: statistics.median(r[dt][shape] for r in runs) for shape in first[dt]}
        for dt in first
    }


def rate_table(
    mms: Sequence[Matmul], rates: dict[torch.dtype, dict[tuple[int, int, int, int], float]]
) -> list[dict[str, Any]]:
    """One row per distinct shape: its GFLOP/s in each dtype (for the docs' table)."""
    rows, seen = [], set()
    for mm in mms:
        shape = _timed(mm).shape
        if shape in seen:
            continue
        seen.add(shape)
        row: dict[str, Any] = {
            "matmul": mm.name,
            "shape": f"{mm.batch}x[{mm.m}x{mm.k}]@[{mm.k}x{mm.n}]",
        }
        for dt, by_shape in rates.items():
            row[f"{str(dt).removeprefix('torch.')}_gflops"] = round(by_shape[shape] / 1e9, 1)
        rows.append(row)
    return rows


def dtype_of(precision: str) -> torch.dtype:
    """The matmul dtype a ``--precision`` name trains in on the CPU."""
    return torch.bfloat16 if precision == "bf16" else torch.float32
