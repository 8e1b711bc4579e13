"""Circuit discovery: rank every edge by attribution, then find the smallest set that does the task.

1. :func:`~.attribution.attribute` ranks every edge (EAP, or EAP-IG with ``ig_steps > 1``).
2. The **faithfulness curve**: the top-k edges alone, every other edge fed its corrupt-run
   value, for k along a grid (1..10, then x1.5 steps to every edge); the share of the task's
   clean-corrupt gap each recovers (:func:`~.attribution.faithfulness`).
3. The smallest k on the curve recovering ``Thresholds.recovers`` (80%), narrowed by bisection
   between it and the grid point before it.
4. **Pruning** (exact, up to ``prune_max`` edges): from the weakest up, edges of the top-k set
   are dropped when the rest still recovers 80% (a block of weak edges at once while that holds,
   halving the block when it does not, down to single edges). Attribution is a linear estimate: at a saturated
   softmax both the key that selects a token and the value that carries it read near-zero
   gradients at the corrupt point (an AND gate), so a necessary edge can rank among the
   zero-scored ones; the curve then needs a larger k and pruning removes what the estimate
   over-ranked. The hand-built circuits of the tests show both cases.

No circuit is reported when the model does not do the task (gap below ``Thresholds.min_gap``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.causal.attribution import (
    EdgeScores,
    TaskRuns,
    ablated_metrics,
    attribute,
    task_runs,
)
from interp_toolkit.causal.graph import Edge, graph_of
from interp_toolkit.causal.routes import Estimate, does_task
from interp_toolkit.causal.shares import gap, resamples
from interp_toolkit.causal.tasks import Task
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds

PRUNE_MAX = 256


@dataclass(frozen=True)
class CircuitEdge:
    edge: Edge
    score: float
    position: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.edge.source.label,
            "target": self.edge.target.label,
            "input": self.edge.input,
            "score": round(self.score, 6),
        }
        if self.position is not None:
            d["position"] = self.position
        return d


@dataclass
class Circuit:
    """What :func:`discover_circuit` found: every edge ranked, the curve, and the circuit (empty
    with ``reason`` when there is none)."""

    task: str
    method: str
    n_prompts: int
    clean: float
    corrupt: float
    gap: Estimate
    ranked: list[CircuitEdge]
    total_edges: int
    target: float
    curve: list[tuple[int, float]] = field(default_factory=list)
    top_k: int | None = None
    edges: list[CircuitEdge] = field(default_factory=list)
    faithfulness: float | None = None
    pruned: bool = False
    reason: str = ""

    def to_dict(self, n_ranked: int | None = None) -> dict[str, Any]:
        ranked = self.ranked if n_ranked is None else self.ranked[:n_ranked]
        return {
            "task": self.task,
            "method": self.method,
            "n_prompts": self.n_prompts,
            "clean_metric": round(self.clean, 4),
            "corrupt_metric": round(self.corrupt, 4),
            "gap": vars(self.gap),
            "total_edges": self.total_edges,
            "threshold": self.target,
            "edges": [e.to_dict() for e in ranked],
            "curve": [{"edges": k, "faithfulness": round(f, 4)} for k, f in self.curve],
            "circuit": {
                "edges": [e.to_dict() for e in self.edges],
                "faithfulness": None if self.faithfulness is None else round(self.faithfulness, 4),
                "top_k": self.top_k,
                "pruned": self.pruned,
                "reason": self.reason,
            },
        }


def curve_grid(n: int) -> list[int]:
    """1..10, then x1.5 steps, and ``n`` (every edge)."""
    ks = set(range(1, min(10, n) + 1))
    k = 10.0
    while k < n:
        k *= 1.5
        ks.add(min(n, round(k)))
    ks.add(n)
    return sorted(ks)


def _ranked(scores: EdgeScores, per_position: bool) -> list[CircuitEdge]:
    if per_position:
        return [CircuitEdge(e, s, p) for e, p, s in scores.ranked_positions()]
    return [CircuitEdge(e, s) for e, s in scores.ranked()]


def _keep(model: TransformerBridge, edges: list[CircuitEdge], n_pos: int) -> Tensor:
    graph = graph_of(model)
    if not edges or edges[0].position is None:
        return graph.mask([e.edge for e in edges])
    keep = torch.zeros(*graph.allowed.shape, n_pos, dtype=torch.bool)
    for e in edges:
        keep[(*graph.index(e.edge), e.position)] = True
    return keep


def discover_circuit(
    model: TransformerBridge,
    task: Task,
    *,
    ig_steps: int = 5,
    per_position: bool = False,
    batch_size: int = 16,
    prune_max: int = PRUNE_MAX,
    seed: int = 0,
    t: Thresholds = THRESHOLDS,
    scores: EdgeScores | None = None,
    fixed_k: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Circuit:
    """Rank, curve, choose and prune (module docstring). ``scores``: reuse an attribution;
    ``fixed_k``: take the top ``fixed_k`` edges as the circuit (no search, no pruning)."""
    say = progress or (lambda _msg: None)
    runs = task_runs(model, task, batch_size=batch_size)
    task_gap = gap(runs.clean, runs.corrupt, resamples(task.n_prompts, seed=seed))
    if scores is None:
        say("attributing every edge")
        scores = attribute(
            model, task, ig_steps=ig_steps, per_position=per_position, batch_size=batch_size
        )
    ranked = _ranked(scores, per_position)
    found = Circuit(
        task=task.name,
        method=scores.method,
        n_prompts=task.n_prompts,
        clean=float(runs.clean.mean()),
        corrupt=float(runs.corrupt.mean()),
        gap=task_gap,
        ranked=ranked,
        total_edges=len(graph_of(model).edges),
        target=t.recovers,
    )
    if not does_task(task_gap, t):
        found.reason = (
            f"the model does not do the {task.name} task: its clean-corrupt gap is "
            f"{task_gap} (a circuit needs >= {t.min_gap:g} with an interval above 0)"
        )
        return found
    n_pos = task.clean.shape[1]
    cache: dict[int, float] = {}

    def recovered_all(sets: list[list[CircuitEdge]]) -> list[float]:
        keeps = [_keep(model, edges, n_pos) for edges in sets]
        return _recovered(model, task, keeps, runs, batch_size)

    def recovered(k: int) -> float:
        if k not in cache:
            cache[k] = recovered_all([ranked[:k]])[0]
        return cache[k]

    grid = curve_grid(len(ranked))
    say(f"faithfulness curve ({len(grid)} points)")
    cache.update(zip(grid, recovered_all([ranked[:k] for k in grid]), strict=True))
    passing = [k for k in grid if cache[k] >= t.recovers]
    k_ok = passing[0] if passing else None
    before = max((k for k in grid if k_ok is not None and k < k_ok), default=0)
    if fixed_k is not None:
        found.top_k = min(fixed_k, len(ranked))
        found.edges = list(ranked[: found.top_k])
        found.faithfulness = recovered(found.top_k)
        found.curve = sorted(cache.items())
        return found
    if k_ok is None:
        found.curve = sorted(cache.items())
        found.reason = f"no top-k set recovers {t.recovers:.0%} of the gap, not even every edge"
        return found
    lo, hi = before, k_ok  # recovered(lo) < target <= recovered(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if recovered(mid) >= t.recovers else (mid, hi)
    found.top_k = hi
    kept = list(ranked[:hi])
    faith = recovered(hi)
    if hi <= prune_max:
        say(f"pruning {hi} edges")
        kept, faith = _prune(kept, faith, recovered_all, t.recovers)
        found.pruned = True
    found.edges = kept
    found.faithfulness = faith
    found.curve = sorted(cache.items())
    return found


def _prune(
    kept: list[CircuitEdge],
    faith: float,
    recovered_all: Callable[[list[list[CircuitEdge]]], list[float]],
    target: float,
) -> tuple[list[CircuitEdge], float]:
    """Drop edges, weakest first, while the rest recovers ``target``: a block at a time, the
    block doubling after a success and halving after a failure, down to single edges."""
    order = sorted(kept, key=lambda e: abs(e.score))
    i, block = 0, max(1, len(order) // 4)
    while i < len(order):
        chunk = order[i : i + block]
        trial = [e for e in kept if e not in chunk]
        value = recovered_all([trial])[0]
        if value >= target:
            kept, faith, i, block = trial, value, i + len(chunk), block * 2
        elif block > 1:
            block = max(1, block // 2)
        else:
            i += 1
    return kept, faith


def _recovered(
    model: TransformerBridge, task: Task, keeps: list[Tensor], runs: TaskRuns, batch_size: int
) -> list[float]:
    """The faithfulness of each circuit ``keeps[i]``, side by side (one forward for many)."""
    graph = graph_of(model)
    drops = [
        (graph.allowed if k.ndim == 2 else graph.allowed[..., None].expand_as(k)) & ~k
        for k in keeps
    ]
    values = ablated_metrics(model, task, drops, runs, batch_size=batch_size, graph=graph)
    clean, corrupt = float(runs.clean.mean()), float(runs.corrupt.mean())
    return [(float(v.mean()) - corrupt) / (clean - corrupt) for v in values]
