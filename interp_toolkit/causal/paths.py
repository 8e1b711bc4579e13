"""The route by path: which input of each induction head carries its induction, and from where.

For every induction head B and every head A in an earlier layer, A's write into B's query, key or
value input alone is resampled from the corrupt prompts (what TransformerLens's
``get_act_patch_direct_path`` does, one forward per source; here many edges per forward) (A's clean-minus-corrupt output subtracted from that one input; every other
reader still sees A's clean output), and the task's metric is read per prompt. Each input is
also resampled from every earlier head at once, and B's whole output (every edge out of B) is
resampled (the exact edge ablation of :mod:`.graph`). B's effect is the share of the task's
clean-corrupt gap its resampled output removes; input and path effects are shares of B's effect
(a model with three induction heads splits the gap three ways), each with a bootstrap interval
over prompts (:mod:`.stats`); the route is decided by :func:`~interp_toolkit.causal.routes.head_route`
against a control: a role-less earlier head, the one whose weights compose most with B (the
control most likely to look like a feeder).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.causal.attribution import ablated_metrics, task_runs
from interp_toolkit.causal.fork import per_query_kv
from interp_toolkit.causal.graph import Edge, Graph, Node, graph_of
from interp_toolkit.causal.routes import (
    INPUTS,
    Estimate,
    HeadRoute,
    ModelRoute,
    PathEffect,
    head_route,
    model_route_name,
)
from interp_toolkit.causal.shares import gap, removed_share, resamples
from interp_toolkit.causal.tasks import Task
from interp_toolkit.heads.registry import NO_ROLE, HeadId
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.weights.composition import composition_baseline, composition_scores


def input_drop(graph: Graph, target: HeadId, input: str) -> Tensor:
    """``[writer, reader]``: every head of an earlier layer into ``target``'s ``input``."""
    reader = Node(input, *target)
    earlier = [w for w in graph.writers if w.kind == "head" and w.layer < target.layer]
    return graph.mask([Edge(w, reader) for w in earlier])


def control_head(
    target: HeadId, roles: Sequence[Sequence[str]], composition: dict[str, Tensor]
) -> HeadId | None:
    """The role-less head before ``target`` whose largest composition score into it is the
    highest (None when every earlier head has a role)."""
    candidates = [
        HeadId(layer, h)
        for layer in range(target.layer)
        for h, role in enumerate(roles[layer])
        if role == NO_ROLE
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda a: max(float(composition[c][(*a, *target)]) for c in INPUTS))


def path_drop(graph: Graph, source: HeadId, target: HeadId, input: str) -> Tensor:
    """``[writer, reader]``: the one edge ``source -> target``'s ``input``."""
    return graph.mask([Edge(Node("head", *source), Node(input, *target))])


def route_by_path(
    model: TransformerBridge,
    task: Task,
    heads: Sequence[HeadId],
    roles: Sequence[Sequence[str]],
    *,
    batch_size: int = 64,
    seed: int = 0,
    t: Thresholds = THRESHOLDS,
) -> ModelRoute:
    """The route of each of ``heads`` (the induction heads) on ``task`` (the induction task),
    with ``roles`` (``HeadReport.roles``) naming the role-less heads a control is drawn from.

    Each path is a single-edge resample (:func:`~.attribution.ablated_metrics`, many edges per
    forward), equal to TL's ``get_act_patch_direct_path``, which runs one forward per source and
    every later head (tested: ``tests/unit/causal/test_causal_tl_parity.py``)."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    task.check(model)
    graph = graph_of(model)
    runs = task_runs(model, task, batch_size=batch_size, graph=graph)
    idx = resamples(task.n_prompts, seed=seed)
    task_gap = gap(runs.clean, runs.corrupt, idx)
    targets = [HeadId(*h) for h in heads]
    deep = [h for h in targets if h.layer > 0]
    with torch.no_grad():
        comp = {c: composition_scores(model, c) for c in INPUTS} if deep else {}
        base = round(composition_baseline(model), 4) if deep else None
    routes: list[HeadRoute] = []
    for target in targets:
        if target.layer == 0:
            routes.append(head_route(target, Estimate(0.0, 0.0, 0.0), {}, (), None, t))
            continue
        out_drop = graph.mask([e for e in graph.edges if e.source == Node("head", *target)])
        earlier = [HeadId(layer, h) for layer in range(target.layer) for h in range(graph.n_heads)]
        keys = [(s, c) for s in earlier for c in INPUTS]
        drops = [out_drop, *(input_drop(graph, target, c) for c in INPUTS)]
        drops += [path_drop(graph, s, target, c) for s, c in keys]
        values = ablated_metrics(model, task, drops, runs, batch_size=batch_size, graph=graph)
        alone = values[0]
        effect = removed_share(runs.clean, runs.corrupt, alone[None], idx)[0]
        inputs = dict(zip(INPUTS, removed_share(runs.clean, alone, values[1:4], idx), strict=True))
        shares = removed_share(runs.clean, alone, values[4:], idx)
        paths = [
            PathEffect(s, target, c, share, round(float(comp[c][(*s, *target)]), 4))
            for (s, c), share in zip(keys, shares, strict=True)
        ]
        control = control_head(target, roles, comp)
        routes.append(head_route(target, effect, inputs, paths, control, t))
    return ModelRoute(
        task=task.name,
        n_prompts=task.n_prompts,
        clean=round(float(runs.clean.mean()), 4),
        corrupt=round(float(runs.corrupt.mean()), 4),
        gap=task_gap,
        composition_baseline=base,
        heads=tuple(routes),
        name=model_route_name(routes, task_gap, t),
    )
