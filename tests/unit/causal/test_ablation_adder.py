"""The ablation adder against its definition, written out reader by reader: each reader's input
gains, for every writer its replica drops, that writer's replacement minus its output. Sparse
drops (the writers stacked), dense ones (the running sum less the kept writers) and per-position
drops all give the definition's numbers."""

from __future__ import annotations

import pytest
import torch

from interp_toolkit.causal.graph import _graph, ablation_adder


def _naive(group, drops, replacement, live, n):
    rows, pos, dm = live[0].shape
    b = rows // n
    heads = []
    for reader in group.readers:
        out = torch.zeros(n, b, pos, dm)
        for i in range(n):
            for w in range(group.n_writers):
                d = drops[i, w, reader]
                d = d[None, :, None].float() if d.ndim == 1 else d.float()  # per position
                out[i] += d * (replacement[w] - live[w].view(n, b, pos, dm)[i])
        heads.append(out)
    stacked = torch.stack(heads, dim=3)  # [n, b, pos, reader, d]
    return (
        stacked.reshape(rows, pos, -1, dm)
        if group.per_head
        else stacked[:, :, :, 0].reshape(rows, pos, dm)
    )


@pytest.mark.parametrize("kind", ["sparse", "dense", "all", "one", "positional"])
def test_the_adder_is_its_definition(kind):
    graph = _graph(3, 4, False, False)
    n, b, pos, dm = 3, 2, 5, 8
    gen = torch.Generator().manual_seed(len(kind))
    live = [torch.randn(n * b, pos, dm, generator=gen) for _ in graph.writers]
    replacement = torch.randn(len(graph.writers), b, pos, dm, generator=gen)
    allowed = graph.allowed[None].expand(n, -1, -1)
    shape = (n, *graph.allowed.shape)
    if kind == "positional":
        allowed = allowed[..., None].expand(-1, -1, -1, pos)
        shape = (*shape, pos)
    share = {"sparse": 0.05, "dense": 0.9, "all": 1.0, "one": 0.0, "positional": 0.6}[kind]
    drops = allowed & (torch.rand(shape, generator=gen) < share)
    if kind == "one":
        drops[1, 2, -1] = True  # a single edge (writer 2 -> the logits) in one replica
    add = ablation_adder(drops, replacement)
    checked = []
    for group in graph.groups:
        got = add(group, live[: group.n_writers])
        want = _naive(group, drops, replacement, live, n)
        if got is None:
            assert not bool(want.abs().max() > 0)
            continue
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        checked.append(group)
    assert checked
    wrong = ablation_adder(drops, replacement * 0)  # a wrong replacement is seen
    group = checked[-1]
    got = wrong(group, live[: group.n_writers])
    assert not torch.allclose(got, _naive(group, drops, replacement, live, n), atol=1e-3)
