"""Exact self-ranks of a factored square matrix (analysis.self_ranks), against known answers."""

from __future__ import annotations

import math

import pytest
import torch

from interp_toolkit.weights import self_ranks as SR
from interp_toolkit.weights.self_ranks import self_ranks


def _exact_ranks(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor, cap: int) -> torch.Tensor:
    """The definition with exact arithmetic: the sign of a_t.(b_j - b_t) from math.fsum over the
    float64 products of float32 values (each exact): #{j != t : a_t.b_j >= a_t.b_t}, capped."""
    a64, b64 = a.float().double(), b.float().double()
    dense = a64[rows] @ b64  # float64 only to find the candidates worth an exact look
    out = []
    for i, t in enumerate(rows.tolist()):
        own = (a64[t] * b64[:, t]).tolist()
        near = (dense[i] >= dense[i, t] - 1e-6 * (1 + dense[i].abs().max())).nonzero()
        n = sum(
            math.fsum((a64[t] * b64[:, j]).tolist() + [-x for x in own]) >= 0
            for j in near.squeeze(1).tolist()
            if j != t
        )
        out.append(min(cap, n))
    return torch.tensor(out)


def _dense_ranks(a: torch.Tensor, b: torch.Tensor, cap: int) -> torch.Tensor:
    """The naive dense computation in float64."""
    full = a.float().double() @ b.float().double()
    own = full.diagonal()
    return ((full >= own[:, None]).sum(1) - 1).clamp_max(cap)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_factors_equal_the_dense_computation(seed):
    gen = torch.Generator().manual_seed(seed)
    v, d = 700, 8
    a = torch.randn(v, d, generator=gen) * torch.rand(v, 1, generator=gen)
    b = torch.randn(d, v, generator=gen) * torch.rand(1, v, generator=gen) * 3
    b[:, : v // 2] += 0.7 * a[: v // 2].T  # half the tokens copy, so both kinds of rows occur
    rows = torch.arange(v)
    for cap in (1, 5, v):
        want = _dense_ranks(a, b, cap)
        # a tiny budget forces many row chunks per column block; None uses the device budget
        for budget in (None, 12 * SR.FIRST_WIDTH * 3):
            assert torch.equal(self_ranks(a, b, rows, cap, budget), want), (cap, budget)
    sub = torch.randperm(v, generator=gen)[:50]
    assert torch.equal(self_ranks(a, b, sub, 5), _dense_ranks(a, b, 5)[sub])
    both = _dense_ranks(a, b, v)
    assert (both < 1).any() and (both >= 5).any()  # the data exercises both outcomes


def test_near_ties_inside_the_float32_band_are_decided_exactly():
    """Columns that differ from a row's own column by far less than float32 can resolve: counting
    the band as beaters, or as non-beaters, or trusting float32, gives a different answer."""
    gen = torch.Generator().manual_seed(5)
    v, d = 400, 16
    a = torch.randn(v, d, generator=gen)
    b = torch.randn(d, v, generator=gen) * 0.1
    t = 7
    a[t, :2] = 1.0
    b[:, t] = a[t] * 2.0  # row t copies: its own entry is far above every random column
    b[:2, t] = 0.0  # so that the 2^-30 steps below are exact in float32
    steps = [(1, -1), (2, -1), (1, -2), (3, -2), (2, -3), (0, 0)]
    for j, (e0, e1) in zip(range(100, 106), steps, strict=True):
        b[:, j] = b[:, t]
        b[0, j] += e0 * 2.0**-30  # a_t . (b_j - b_t) = (e0 + e1) 2^-30: 0, +, -, +, -, 0
        b[1, j] += e1 * 2.0**-30
    rows = torch.tensor([t])
    want = _exact_ranks(a, b, rows, v)
    assert int(want[0]) == 4  # columns 101, 103 beat t; columns 100, 105 tie it
    assert torch.equal(self_ranks(a, b, rows, v), want)
    assert torch.equal(self_ranks(a, b, rows, 2), want.clamp_max(2))


def test_ties_below_float64_resolution_use_exact_sums():
    """a_t . (b_j - b_t) = +2^-63 / -2^-64 on sums of size 2: float64 cannot see it; fsum does."""
    up, down = 1.0 + 2.0**-23, 1.0 - 2.0**-24  # the float32 neighbours of 1.0
    a = torch.tensor([[1.0, 1.0, 2.0**-40, 0.0]])
    b = torch.tensor(
        [
            [1.0, 1.0 + 2.0**-20, 1.0 + 2.0**-20],
            [1.0, 1.0 - 2.0**-20, 1.0 - 2.0**-20],
            [1.0, up, down],
            [0.0, 0.0, 5.0],
        ]
    )
    a = torch.cat([a, torch.ones(2, 4)])  # rows 1, 2 are not asked for
    row0 = torch.tensor([0])
    assert _exact_ranks(a, b, row0, 3).tolist() == [1]  # column 1 beats, column 2 does not
    assert self_ranks(a, b, row0, 3).tolist() == [1]


def test_equal_columns_and_zero_rows_count_against_the_token():
    gen = torch.Generator().manual_seed(3)
    v, d = 300, 8
    a = torch.randn(v, d, generator=gen)
    b = a.T.clone()  # a_t . a_t is the largest entry of row t unless a column is longer
    b[:, 11] = b[:, 10]  # tokens 10 and 11 share an output column: row 10 ties, row 11 ties
    a[20] = 0.0  # token 20's row is all zeros: every other column ties it
    b[:, 30] = 0.0  # column 30 is zero: it ties or beats rows with own <= 0 only
    ranks = self_ranks(a, b, torch.arange(v), v)
    want = _dense_ranks(a, b, v)
    assert torch.equal(ranks, want)
    assert int(ranks[20]) == v - 1 and int(ranks[10]) >= 1 and int(ranks[11]) >= 1


def test_empty_factors_tie_everywhere():
    v, d = 200, 4
    a = torch.randn(v, d)
    assert self_ranks(a, torch.zeros(d, v), torch.arange(v), 5).tolist() == [5] * v
    assert (
        self_ranks(torch.zeros(v, d), torch.randn(d, v), torch.arange(v), v).tolist() == [v - 1] * v
    )


def test_outer_autocast_and_low_precision_matmuls_do_not_leak_in():
    """An enclosing bf16 autocast or reduced float32 matmul precision would break the error
    bound; self_ranks runs under STRICT_FP32 and stays exact."""
    gen = torch.Generator().manual_seed(9)
    v, d = 2000, 64
    a = torch.randn(v, d, generator=gen)
    b = 0.5 * a.T + torch.randn(d, v, generator=gen)  # many rows with a rank near 5
    want = _dense_ranks(a, b, 5)
    assert 0.2 < float((want < 5).float().mean()) < 0.9
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(self_ranks(a, b, torch.arange(v), 5), want)
    saved = torch.backends.mkldnn.matmul.fp32_precision
    try:
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"  # AMX/bf16 inside float32 matmuls
        got = self_ranks(a, b, torch.arange(v), 5)
        assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"  # restored
    finally:
        torch.backends.mkldnn.matmul.fp32_precision = saved
    assert torch.equal(got, want)


def test_the_callers_thread_count_is_restored():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        self_ranks(torch.randn(300, 4), torch.randn(4, 300), torch.arange(300), 5)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _paired_near_ties(v: int = 600, d: int = 64, delta: float = 1e-4):
    """Tokens 2k and 2k+1 share their row of A and their columns of B differ by ``delta`` times a
    random vector: far below bf16's resolution (2⁻⁸ relative), far above float32's. Exactly one
    token of each pair beats the other (rank 1), the other has rank 0; every other column is far
    below (B = Aᵀ, so a token's own entry is its squared norm)."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(v // 2, d, generator=gen).repeat_interleave(2, 0)
    b = a.T.clone()
    b[:, 1::2] += delta * torch.randn(d, v // 2, generator=gen)
    return a, b


def test_bf16_candidates_keep_ranks_exact_where_bf16_alone_misranks():
    a, b = _paired_near_ties()
    rows = torch.arange(len(a))
    want = _dense_ranks(a, b, 5)
    assert sorted(set(want.tolist())) == [0, 1]  # one winner per pair
    # bf16 alone: the pair's columns round to (nearly) the same bf16 values, so it mis-ranks
    naive = a.bfloat16() @ b.bfloat16()
    naive_ranks = ((naive >= naive.diagonal()[:, None]).sum(1) - 1).clamp_max(5)
    assert float((naive_ranks != want).float().mean()) > 0.25
    for candidates in SR.CANDIDATES:
        assert torch.equal(self_ranks(a, b, rows, 5, candidates=candidates), want), candidates
        assert torch.equal(self_ranks(a, b, rows, len(a), candidates=candidates), want)


@pytest.mark.parametrize("seed", [0, 1])
def test_bf16_and_fp32_candidates_agree_with_the_dense_ranks(seed):
    gen = torch.Generator().manual_seed(seed)
    v, d = 1500, 64
    a = torch.randn(v, d, generator=gen) * torch.rand(v, 1, generator=gen)
    b = torch.randn(d, v, generator=gen) + 0.6 * a.T  # rows of every rank, most near the cap
    rows = torch.arange(v)
    for cap in (1, 5, v):
        want = _dense_ranks(a, b, cap)
        for candidates in SR.CANDIDATES:
            got = self_ranks(a, b, rows, cap, budget=64 * 1024, candidates=candidates)
            assert torch.equal(got, want), (cap, candidates)
    with pytest.raises(ValueError, match="candidates"):
        self_ranks(a, b, rows, 5, candidates="fp16")


def test_this_machines_bf16_matmul_error_is_inside_half_the_band():
    """The bf16 band assumes bf16 products accumulated in float32 (oneDNN, cuBLAS): the error
    seen here, over 2,000 x 2,000 entries, stays under half of it (a bf16 accumulation of 64
    terms would exceed it)."""
    gen = torch.Generator().manual_seed(11)
    v, d = 2000, 64
    a = torch.randn(v, d, generator=gen) * torch.rand(v, 1, generator=gen)
    b = torch.randn(d, v, generator=gen) * torch.rand(1, v, generator=gen) * 3
    exact = a.double() @ b.double()
    err = ((a.bfloat16() @ b.bfloat16()).double() - exact).abs()
    bound = 2 * (3 * SR._U16 + (d + 2) * SR._U32)
    band = bound * a.double().norm(dim=1, keepdim=True) * b.double().norm(dim=0).max()
    assert float((err / band).max()) < 0.5
