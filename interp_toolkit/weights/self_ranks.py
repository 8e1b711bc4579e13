"""Exact self-ranks in a low-rank square matrix ``L = A B`` that is never materialised.

For each row ``t`` asked for, :func:`self_ranks` returns ``min(cap, r_t)`` with

    r_t = #{ j != t : L[t, j] >= L[t, t] }

(the columns that beat **or tie** the row's own entry), where ``L`` is the exact real-number
product of the factors ``A`` [V, D] and ``B`` [D, V] (taken as float32). A head's full OV circuit
``W_E W_V · W_O W_U`` is such a product (V = 50,257, D = d_head); ``r_t < k`` is "token ``t`` is
among the ``k`` largest logits of its own row".

Algorithm. Columns are sorted by falling ‖b_j‖ and visited in blocks whose width grows 4x
(256, 1024, ...); a row leaves as soon as it is decided:

1. *Cauchy–Schwarz*: ``L[t, j] <= ‖a_t‖‖b_j‖``; once ``L[t, t]`` exceeds ``‖a_t‖`` times the
   largest remaining column norm, no remaining column can reach it and the row is finished. When
   that bound is exactly 0 every remaining entry is exactly 0, decided by the sign of ``L[t, t]``.
2. Each block is one float32 matmul of the live rows. An entry is a *certain* beater when it is
   above ``L[t, t] + ε_t`` and certainly not one when below ``L[t, t] − ε_t``, with
   ``ε_t = 2(D+2)·2⁻²⁴·‖a_t‖·max_j ‖b_j‖ + D·2⁻¹²⁴``: at least twice the worst float32 error of a
   D-term dot product (|error| ≤ γ_D Σ|a_i b_ji| ≤ γ_D ‖a_t‖‖b_j‖ for any summation order, γ_D ≈
   D·2⁻²⁴) plus the rounding of the threshold and of underflow. A row is finished once it has
   ``cap`` beaters: a head that does not copy has most of its rows finished by the first block.
   From the second block on, a row chunk is first reduced to the rows whose block maximum reaches
   ``L[t, t] − ε_t`` (rows that copy rarely have any).
3. Entries inside the band are re-checked in float64 (each product of two float32 numbers is
   exact in float64, so only the D-term sum rounds, with a bound of the same form); the rare pairs
   that float64 cannot separate are bitwise-equal columns (an exact tie) or are summed exactly
   with :func:`math.fsum`.

**bf16 candidates** (``candidates="bf16"``, the default where bf16 matmuls are fast:
:func:`~interp_toolkit.runtime.devices.fast_bf16`). Step 2 first runs on bf16 copies of the factors, with
a band wide enough for bf16: ``ε16_t = 2(3·2⁻⁸ + (D+2)·2⁻²⁴)·‖a_t‖·max_j ‖b_j‖`` plus underflow
slack, at least twice the worst error of a bf16 entry (each factor rounded to bf16: ≤ 2·2⁻⁸ of
``Σ|a_i b_ji|``; float32 accumulation: γ_D; the bf16 output rounded: 2⁻⁸), with thresholds rounded
outwards to bf16. A row whose bf16 entries all lie outside its band, or that has ``cap`` certain
beaters, is decided by them; every other row of the block (its candidates: entries inside the
bf16 band) is re-checked by the float32 step 2 and 3 above, so each decision is still the exact
one. The bound assumes what oneDNN (CPUs) and cuBLAS (GPUs) do: bf16 products accumulated in
float32 (tests/unit/weights/test_self_ranks.py checks the observed error against the band on this machine).

So every decision is the exact one for the given factors; nothing is sampled or approximated.
Matmuls run under :data:`~interp_toolkit.runtime.devices.STRICT_FP32` (IEEE float32, no autocast, no TF32)
so the error bound holds on every device; the work stays on the factors' device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from jaxtyping import Float, Int

from interp_toolkit.runtime.devices import STRICT_FP32, fast_bf16, rows_per_chunk

FIRST_WIDTH = 256
GROWTH = 4
CANDIDATES = ("bf16", "fp32")
_U16 = 2.0**-8
_U32 = 2.0**-24
_U64 = 2.0**-53
_ABS32 = 4 * 2.0**-126  # absolute slack per term for float32 underflow (flush-to-zero included)
_GROUP = 256  # a sum of up to 256 zeros and ones is exact in bf16


def self_ranks(
    a: Float[torch.Tensor, "v d"],
    b: Float[torch.Tensor, "d v"],
    rows: Int[torch.Tensor, " n"],
    cap: int,
    budget: int | None = None,
    candidates: str | None = None,
) -> Int[torch.Tensor, " n"]:
    """``min(cap, #{j != t : (AB)[t, j] >= (AB)[t, t]})`` for each ``t`` in ``rows`` (exact; see
    the module docstring). ``budget``: bytes for one block (default: the device's memory budget).
    ``candidates``: ``"bf16"`` (bf16 matmuls, undecided rows re-checked exactly) or ``"fp32"``
    (default: bf16 where the device multiplies bf16 fast); the ranks are the same.
    Returns an int64 tensor on the factors' device."""
    if candidates is None:
        candidates = "bf16" if fast_bf16(a.device) else "fp32"
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates={candidates!r}: use one of {CANDIDATES}")
    threads = torch.get_num_threads()
    with torch.no_grad(), STRICT_FP32.apply(a.device), _cpu_threads(1):
        return _Scan(a, b, rows, budget, threads, candidates == "bf16").run(cap)


@contextmanager
def _cpu_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` intra-op CPU threads. The bookkeeping here is many small ops on
    vectors of V entries; with 2+ threads each op waits until every thread is scheduled, which on
    a busy machine costs milliseconds per op (measured 20x slower than one thread on the shared
    2-core machine). Only the matmuls use the caller's threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class _Scan:
    """State of one :func:`self_ranks` call (factors, norms, thresholds, counts) and its steps."""

    def __init__(
        self,
        a: torch.Tensor,
        b: torch.Tensor,
        rows: torch.Tensor,
        budget: int | None,
        threads: int,
        bf16: bool = False,
    ) -> None:
        dev = a.device
        self.dev, self.budget, self.threads = dev, budget, threads
        self.d, self.n_cols = int(a.shape[1]), int(b.shape[1])
        self.rows = rows.to(dev)
        every = len(self.rows) == self.n_cols and bool(
            (self.rows == torch.arange(self.n_cols, device=dev)).all()
        )
        self.a = a.float().contiguous() if every else a.float()[self.rows]  # [n, D]
        b_t = b.float().T.contiguous()  # [V, D]
        b_norm = _norms(b_t)
        self.order = b_norm.argsort(descending=True)
        self.pos = torch.empty_like(self.order)
        self.pos[self.order] = torch.arange(self.n_cols, device=dev)
        self.bt = b_t[self.order]  # [V, D]: column j of B at row pos[j], by falling norm
        self.norm_sorted = b_norm[self.order]
        self.own_pos = self.pos[self.rows]
        self.own = _dot64(self.a, b_t if every else b_t[self.rows])
        self.a_norm = _norms(self.a)
        # |float64 error of own| <= γ_D Σ|a_i b_i| <= γ_D ‖a‖‖b_t‖ (doubled for safety)
        self.own_err = 2 * (self.d + 2) * _U64 * self.a_norm * b_norm[self.rows]
        # float32 band around own: twice the worst error of a float32 entry or threshold
        eps = 2 * (self.d + 2) * _U32 * self.a_norm * self.norm_sorted[0] + _ABS32 * self.d
        self.above = (self.own + eps).float()[:, None]
        self.below = (self.own - eps).float()[:, None]
        self.count = torch.zeros(len(self.rows), dtype=torch.long, device=dev)
        self.bf16 = bf16
        if bf16:  # bf16 copies and a band wide enough for bf16 (module docstring)
            self.a16, self.bt16 = self.a.bfloat16(), self.bt.bfloat16()
            rel = 2 * (3 * _U16 + (self.d + 2) * _U32)
            top = self.norm_sorted[0]
            eps16 = rel * self.a_norm * top + _ABS32 * self.d * (1 + self.a_norm + top)
            self.above16 = _to_bf16(self.own + eps16, up=True)[:, None]
            self.below16 = _to_bf16(self.own - eps16, up=False)[:, None]

    def run(self, cap: int) -> torch.Tensor:
        live = torch.arange(len(self.rows), device=self.dev)
        lo, width = 0, FIRST_WIDTH
        while lo < self.n_cols and len(live):
            live = self._settle(live, lo)
            hi = min(self.n_cols, lo + width)
            # the block, a float32 work buffer and up to two copies of some of its rows
            per_row = 16 * (hi - lo)
            block = self._block16 if self.bf16 else self._block
            for idx in live.split(rows_per_chunk(self.dev, per_row, self.budget)):
                block(idx, lo, hi, cap)
            live = live[self.count[live] < cap]
            lo, width = hi, width * GROWTH
        return self.count.clamp_max(cap)

    def _settle(self, live: torch.Tensor, lo: int) -> torch.Tensor:
        """Drop rows that no column from position ``lo`` on can tie or beat (Cauchy–Schwarz);
        rows whose bound is exactly 0 get every remaining column counted when ``L[t,t] <= 0``."""
        bound = self.a_norm[live] * self.norm_sorted[lo]
        beyond = self.own[live] - self.own_err[live] > bound * (1 + 1e-12)
        zero = (bound == 0) & ~beyond
        if zero.any():
            z = live[zero]
            left = self.n_cols - lo - (self.own_pos[z] >= lo).long()
            zero_col = torch.zeros(len(z), self.d, dtype=torch.float64, device=self.dev)
            self.count[z] += left * self._beats(z, zero_col).long()
        return live[~(beyond | zero)]

    def _scores(
        self,
        a: torch.Tensor,
        bt: torch.Tensor,
        below: torch.Tensor,
        idx: torch.Tensor,
        lo: int,
        hi: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``idx`` of ``a`` against sorted columns ``lo:hi`` of ``bt`` ([c, w], each row's own
        entry -inf); past the first block, only the rows whose maximum reaches ``below``."""
        with _cpu_threads(self.threads):
            s = _take(a, idx) @ bt[lo:hi].T  # [c, w]
        p = self.own_pos[idx] - lo
        own_here = (p >= 0) & (p < hi - lo)
        s[own_here.nonzero().squeeze(1), p[own_here]] = float("-inf")
        if lo > 0:  # rows left after the first block mostly copy: few reach the band at all
            hot = (s.amax(1, keepdim=True) >= below[idx]).squeeze(1).nonzero().squeeze(1)
            if len(hot) < len(idx):
                idx, s = idx[hot], s[hot]
        return idx, s

    def _block(self, idx: torch.Tensor, lo: int, hi: int, cap: int) -> None:
        """Count the beaters of rows ``idx`` among sorted columns ``lo:hi``."""
        idx, s = self._scores(self.a, self.bt, self.below, idx, lo, hi)  # float32
        above, below = _take(self.above, idx), _take(self.below, idx)
        work = torch.empty_like(s)
        certain = torch.gt(s, above, out=work).sum(1).long()
        self.count[idx] += certain
        open_rows = (self.count[idx] < cap).nonzero().squeeze(1)
        if not len(open_rows):
            return
        sub = s if len(open_rows) == len(idx) else s[open_rows]
        not_below = torch.ge(sub, below[open_rows], out=work[: len(open_rows)]).sum(1).long()
        band_rows = open_rows[not_below > certain[open_rows]]
        if not len(band_rows):
            return
        sub = s[band_rows]
        i, j = ((sub >= below[band_rows]) & (sub <= above[band_rows])).nonzero().unbind(1)
        which, cols = idx[band_rows[i]], lo + j
        for part in torch.arange(len(which), device=self.dev).split(2**22 // self.d):
            w = which[part]
            self.count.index_add_(0, w, self._beats(w, self.bt[cols[part]].double()).long())

    def _block16(self, idx: torch.Tensor, lo: int, hi: int, cap: int) -> None:
        """Rows ``idx`` against sorted columns ``lo:hi`` in bf16: rows the bf16 band decides are
        counted here; the rest go through :meth:`_block` (float32, then exact)."""
        idx, s = self._scores(self.a16, self.bt16, self.below16, idx, lo, hi)  # bf16
        if not len(idx):
            return
        work = torch.empty_like(s)
        certain = _count(torch.gt(s, _take(self.above16, idx), out=work))
        done = self.count[idx] + certain >= cap
        open_rows = (~done).nonzero().squeeze(1)
        if len(open_rows):
            sub = s if len(open_rows) == len(idx) else s[open_rows]
            below = self.below16[idx[open_rows]]
            not_below = _count(torch.ge(sub, below, out=work[: len(open_rows)]))
            done[open_rows[not_below == certain[open_rows]]] = True  # nothing in the band
        self.count[idx[done]] += certain[done]
        undecided = idx[~done]
        if len(undecided):
            self._block(undecided, lo, hi, cap)  # the candidates, re-checked exactly

    def _beats(self, which: torch.Tensor, bj: torch.Tensor) -> torch.Tensor:
        """Exactly: ``a_t · b_j >= a_t · b_t`` for rows ``which`` and columns ``bj`` [m, D]
        (float64 holding float32 values, so every product below is exact)."""
        a = self.a[which].double()
        bt = self.bt[self.own_pos[which]].double()
        diff = (a * bj).sum(1) - self.own[which]
        err = 2 * (self.d + 2) * _U64 * (a.abs() * (bj.abs() + bt.abs())).sum(1)
        out = diff >= 0
        unsure = (diff.abs() <= err).nonzero().squeeze(1)
        if len(unsure):
            same = (bj[unsure] == bt[unsure]).all(1)
            out[unsure[same]] = True  # equal columns: an exact tie
            for k in unsure[~same].tolist():
                terms = (a[k] * bj[k]).tolist() + (-(a[k] * bt[k])).tolist()
                out[k] = math.fsum(terms) >= 0
        return out


def _to_bf16(x: torch.Tensor, *, up: bool) -> torch.Tensor:
    """``x`` (float64) in bf16, rounded up (``up``) or down: the band only widens."""
    y = x.to(torch.bfloat16)
    wrong = (y.double() < x) if up else (y.double() > x)
    if wrong.any():
        toward = torch.full_like(y[wrong], float("inf") if up else float("-inf"))
        y[wrong] = torch.nextafter(y[wrong], toward)
    return y


def _count(flags: torch.Tensor) -> torch.Tensor:
    """Row sums (int64) of a [c, w] bf16 tensor of zeros and ones, exactly: summed in bf16 over
    groups of at most 256 columns (integers up to 256 are exact in bf16), then in float32."""
    c, w = flags.shape
    if w <= _GROUP:
        return flags.sum(1).long()
    full = w - w % _GROUP
    out = flags[:, :full].reshape(c, full // _GROUP, _GROUP).sum(2).float().sum(1)
    if full < w:
        out += flags[:, full:].sum(1).float()
    return out.long()


def _norms(x: torch.Tensor) -> torch.Tensor:
    """Row norms of float32 ``x`` as float64 upper bounds: computed in float32 (relative error
    <= (D/2 + 2)·2⁻²⁴) and raised by (D + 4)·2⁻²⁴; rows whose float32 squares could underflow
    (norm < 2⁻⁶⁰) are computed in float64."""
    norm = torch.linalg.vector_norm(x, dim=1).double() * (1 + (x.shape[1] + 4) * _U32)
    small = (norm < 2.0**-60).nonzero().squeeze(1)
    if len(small):
        norm[small] = torch.linalg.vector_norm(x[small], dim=1, dtype=torch.float64)
    return norm


def _dot64(x: torch.Tensor, y: torch.Tensor, chunk: int = 8192) -> torch.Tensor:
    """Row-wise dot products of float32 ``x`` and ``y`` in float64 (every product exact), in
    row chunks that stay in cache."""
    out = torch.empty(len(x), dtype=torch.float64, device=x.device)
    for lo in range(0, len(x), chunk):
        out[lo : lo + chunk] = (x[lo : lo + chunk].double() * y[lo : lo + chunk]).sum(1)
    return out


def _take(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``x[idx]`` for ascending row indices ``idx``; a view (no copy) when they are consecutive,
    as every row of a first block is."""
    if len(idx) and int(idx[-1]) - int(idx[0]) + 1 == len(idx):
        return x[int(idx[0]) : int(idx[-1]) + 1]
    return x[idx]
