"""Circuit discovery: rank every edge by attribution, then find the smallest set that does the task.

Everything that chooses the circuit reads the **selection** prompts (the task given); the circuit
is then scored on **held-out** prompts of the same task drawn with another seed
(:meth:`~.tasks.Task.heldout`, or ``heldout=``), with a 95% percentile bootstrap interval over
those prompts.

1. :func:`~.attribution.attribute` ranks every edge (EAP, or EAP-IG with ``ig_steps > 1``).
2. The **faithfulness curve**: the top-k edges alone, every other edge fed its corrupt-run
   value, for k along a grid (1..10, then x1.5 steps to every edge); the share of the task's
   clean-corrupt gap each recovers (:func:`~.attribution.faithfulness`).
3. The **smallest k** recovering ``Thresholds.recovers`` (80%), found by a scan in order
   (:func:`smallest_k`), not by bisection: the curve need not be monotone (an edge can hurt
   until its partner joins). Every k below the first passing grid point is evaluated (batched,
   stopping at the first pass), so the k is the smallest of all; that costs one evaluation per
   off-grid k below it (bisection: about log2 of the bracket). Above ``scan_max`` only the
   bracket after the last failing grid point is scanned.
4. **Pruning to a fixed point** (exact, up to ``prune_max`` edges): from the weakest up, edges of
   the top-k set are dropped when the rest still recovers 80% on the selection prompts (a block of
   weak edges at once while that holds, halving the block when it does not, down to single
   edges); then every single-edge removal is tried again, side by side, the weakest passing edge
   dropped, until no edge can go. One pass is not enough: an edge whose removal hurt while a
   stronger edge it feeds was in becomes dead once that edge is pruned. Attribution is a linear
   estimate: at a saturated softmax both the key that selects a token and the value that carries
   it read near-zero gradients at the corrupt point (an AND gate), so a necessary edge can rank
   among the zero-scored ones; the curve then needs a larger k and pruning removes what the
   estimate over-ranked. The hand-built circuits of the tests show both cases.

No circuit is reported when the model does not do the task (gap below ``Thresholds.min_gap``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.causal.attribution import (
    EdgeScores,
    ablated_metrics,
    attribute,
    task_runs,
)
from interp_toolkit.causal.fork import per_query_kv
from interp_toolkit.causal.graph import Edge, graph_of
from interp_toolkit.causal.routes import Estimate, does_task
from interp_toolkit.causal.shares import gap, removed_share, resamples
from interp_toolkit.causal.tasks import Task
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime.seeds import derive
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds

PRUNE_MAX = 256
#: The smallest k is searched over every k below the first passing grid point up to this k.
SCAN_MAX = 256
#: Circuits evaluated side by side in one call while scanning.
SCAN_CHUNK = 32


def _edge_names(edge: Edge) -> dict[str, str]:
    return {"source": edge.source.label, "target": edge.target.label, "input": edge.input}


@dataclass(frozen=True)
class CircuitEdge(Jsonable):
    edge: Edge = field(metadata=json_field(encode=_edge_names, inline=True))
    score: float = field(metadata=json_field(digits=6))
    position: int | None = field(default=None, metadata=json_field(omit_none=True))


#: A field the JSON writes through ``json_extra`` (after the fields: the listed edges, the curve
#: and the ``circuit`` group).
_EXTRA = json_field(skip=True)
#: What the held-out interval is (the JSON's note; the terminal says it too).
HELDOUT_INTERVAL = "95% percentile bootstrap over the held-out prompts"


@dataclass
class Circuit(Jsonable):
    """What :func:`discover_circuit` found: every edge ranked, the curve, and the circuit (empty
    with ``reason`` when there is none); the JSON holds the circuit in a group (:meth:`chosen`)."""

    task: str
    method: str
    n_prompts: int
    clean: float = field(metadata=json_field(key="clean_metric", digits=4))
    corrupt: float = field(metadata=json_field(key="corrupt_metric", digits=4))
    gap: Estimate
    ranked: list[CircuitEdge] = field(metadata=_EXTRA)
    total_edges: int
    target: float = field(metadata=json_field(key="threshold"))
    curve: list[tuple[int, float]] = field(default_factory=list, metadata=_EXTRA)
    top_k: int | None = field(default=None, metadata=_EXTRA)
    edges: list[CircuitEdge] = field(default_factory=list, metadata=_EXTRA)
    faithfulness: float | None = field(default=None, metadata=_EXTRA)
    pruned: bool = field(default=False, metadata=_EXTRA)
    reason: str = field(default="", metadata=_EXTRA)
    #: Off-grid k evaluated by the scan; single-edge removal rounds of the fixed point.
    scanned: int = field(default=0, metadata=_EXTRA)
    prune_rounds: int = field(default=0, metadata=_EXTRA)
    #: The circuit on held-out prompts (another seed): its share of their gap, with a 95%
    #: percentile bootstrap interval over them, their gap and how many there are.
    heldout: Estimate | None = field(default=None, metadata=_EXTRA)
    heldout_gap: Estimate | None = field(default=None, metadata=_EXTRA)
    heldout_prompts: int = field(default=0, metadata=_EXTRA)
    heldout_seed: int | None = field(default=None, metadata=_EXTRA)
    #: How many of the highest-ranked edges the JSON lists (None: all).
    n_ranked: int | None = field(default=None, metadata=_EXTRA)

    json_extra: ClassVar = {"edges": "listed", "curve": "points", "circuit": "chosen"}

    @property
    def listed(self) -> list[CircuitEdge]:
        return self.ranked[: self.n_ranked]

    @property
    def points(self) -> list[dict[str, Any]]:
        return [{"edges": k, "faithfulness": round(f, 4)} for k, f in self.curve]

    def chosen(self) -> dict[str, Any]:
        """The ``circuit`` group: the circuit, its faithfulness and how they were found."""
        return {
            "edges": self.edges,
            "faithfulness": None if self.faithfulness is None else round(self.faithfulness, 4),
            "top_k": self.top_k,
            "pruned": self.pruned,
            "reason": self.reason,
            "faithfulness_on": "selection prompts (the ones that ranked and chose the edges)",
            "heldout_faithfulness": self.heldout,
            "heldout_gap": self.heldout_gap,
            "heldout_prompts": self.heldout_prompts,
            "heldout_seed": self.heldout_seed,
            "heldout_interval": HELDOUT_INTERVAL,
            "search": "scan in k order (smallest passing k), no bisection",
            "scanned": self.scanned,
            "prune_rounds": self.prune_rounds,
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


def _drop(model: TransformerBridge, edges: list[CircuitEdge], n_pos: int) -> Tensor:
    """The edges fed their corrupt-run value when only ``edges`` are kept (per position when
    they name positions)."""
    graph = graph_of(model)
    if not edges or edges[0].position is None:
        return graph.allowed & ~graph.mask([e.edge for e in edges])
    keep = torch.zeros(*graph.allowed.shape, n_pos, dtype=torch.bool)
    for e in edges:
        keep[(*graph.index(e.edge), e.position)] = True
    return graph.allowed[..., None] & ~keep


def discover_circuit(
    model: TransformerBridge,
    task: Task,
    *,
    heldout: Task | None = None,
    ig_steps: int = 5,
    per_position: bool = False,
    batch_size: int = 16,
    prune_max: int = PRUNE_MAX,
    scan_max: int = SCAN_MAX,
    seed: int = 0,
    t: Thresholds = THRESHOLDS,
    scores: EdgeScores | None = None,
    fixed_k: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Circuit:
    """Rank, curve, choose and prune on ``task`` (the selection prompts), then score the circuit
    on ``heldout`` (default: :meth:`~.tasks.Task.heldout`, the same task drawn with another seed;
    none when the task cannot redraw itself). ``scores``: reuse an attribution; ``fixed_k``: take
    the top ``fixed_k`` edges as the circuit (no search, no pruning). Module docstring."""
    model = per_query_kv(model)  # GQA: one K/V head per query head
    say = progress or (lambda _msg: None)
    runs = task_runs(model, task, batch_size=batch_size)
    task_gap = gap(runs.clean, runs.corrupt, resamples(task.n_prompts, seed=seed))
    if scores is None:
        say("attributing every edge")
        scores = attribute(
            model, task, ig_steps=ig_steps, per_position=per_position, batch_size=batch_size
        )
    if per_position:
        ranked = [CircuitEdge(e, s, p) for e, p, s in scores.ranked_positions()]
    else:
        ranked = [CircuitEdge(e, s) for e, s in scores.ranked()]
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
        """The faithfulness of each set of edges, side by side (one forward for many)."""
        drops = [_drop(model, edges, n_pos) for edges in sets]
        values = ablated_metrics(model, task, drops, runs, batch_size=batch_size)
        return [(float(v.mean()) - found.corrupt) / (found.clean - found.corrupt) for v in values]

    def recovered_ks(ks: list[int]) -> list[float]:
        values = recovered_all([ranked[:k] for k in ks])
        cache.update(zip(ks, values, strict=True))
        return values

    grid = curve_grid(len(ranked))
    say(f"faithfulness curve ({len(grid)} points)")
    recovered_ks(grid)
    curve = dict(cache)
    if fixed_k is not None:
        found.top_k = min(fixed_k, len(ranked))
        found.edges = list(ranked[: found.top_k])
        if found.top_k not in cache:
            recovered_ks([found.top_k])
        found.faithfulness = cache[found.top_k]
    else:
        k, found.scanned = smallest_k(curve, recovered_ks, t.recovers, scan_max=scan_max)
        if k is None:
            found.reason = f"no top-k set recovers {t.recovers:.0%} of the gap, not even every edge"
        else:
            found.top_k = k
            kept, faith = list(ranked[:k]), cache[k]
            if k <= prune_max:
                say(f"pruning {k} edges")
                kept, faith, found.prune_rounds = prune(kept, faith, recovered_all, t.recovers)
                found.pruned = True
            found.edges, found.faithfulness = kept, faith
    found.curve = sorted(cache.items())
    heldout = heldout if heldout is not None or not found.edges else task.heldout()
    if heldout is not None and found.edges:
        say(f"held-out faithfulness ({heldout.n_prompts} prompts)")
        _score_heldout(model, heldout, found, n_pos, batch_size, seed)
    return found


def smallest_k(
    curve: dict[int, float],
    evaluate: Callable[[list[int]], list[float]],
    target: float,
    *,
    scan_max: int = SCAN_MAX,
    chunk: int = SCAN_CHUNK,
) -> tuple[int | None, int]:
    """The smallest k whose top-k set recovers ``target``, and how many off-grid k were evaluated.

    ``curve``: the grid's values (k -> faithfulness); ``evaluate(ks)``: the values of more k, side
    by side. No monotonicity is assumed: every k below the first passing grid point is read in
    order (``chunk`` at a time, stopping at the chunk holding the first pass). When that grid point
    is above ``scan_max``, only the k after the last grid point below it are scanned. None when no
    grid point passes (off-grid k above the last failing point are then not searched)."""
    grid = sorted(curve)
    passing = [k for k in grid if curve[k] >= target]
    if not passing:
        return None, 0
    k_ok = passing[0]
    start = 1 if k_ok <= scan_max else max((k for k in grid if k < k_ok), default=0) + 1
    values, scanned = dict(curve), 0
    for k in range(start, k_ok + 1):
        if k not in values:
            ks = [j for j in range(k, k_ok) if j not in values][:chunk]
            values.update(zip(ks, evaluate(ks), strict=True))
            scanned += len(ks)
        if values[k] >= target:
            return k, scanned
    raise AssertionError("unreachable: k_ok passes")  # pragma: no cover


def prune(
    kept: list[CircuitEdge],
    faith: float,
    recovered_all: Callable[[list[list[CircuitEdge]]], list[float]],
    target: float,
) -> tuple[list[CircuitEdge], float, int]:
    """Prune to a fixed point: the block pass of :func:`_prune_pass`, then rounds that try every
    single-edge removal side by side and drop the weakest edge whose removal keeps ``target``,
    until none can go. Returns the circuit, its faithfulness and the number of rounds (the last
    one the check that nothing more can go)."""
    kept, faith = _prune_pass(kept, faith, recovered_all, target)
    rounds = 0
    while len(kept) > 1:
        rounds += 1
        order = sorted(kept, key=lambda e: abs(e.score))
        trials = [[e for e in kept if e is not drop] for drop in order]
        values = recovered_all(trials)
        passing = [i for i, v in enumerate(values) if v >= target]
        if not passing:
            break
        kept, faith = trials[passing[0]], values[passing[0]]
    return kept, faith, rounds


def _prune_pass(
    kept: list[CircuitEdge],
    faith: float,
    recovered_all: Callable[[list[list[CircuitEdge]]], list[float]],
    target: float,
) -> tuple[list[CircuitEdge], float]:
    """One pass, weakest first, dropping edges while the rest recovers ``target``: a block at a
    time, the block doubling after a success and halving after a failure, down to single edges.
    Each edge is tried once, so an edge kept early can be dead by the end (see :func:`prune`)."""
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


def _score_heldout(
    model: TransformerBridge, heldout: Task, found: Circuit, n_pos: int, batch_size: int, seed: int
) -> None:
    """The circuit's share of the held-out prompts' gap, with a percentile bootstrap interval
    over those prompts (clean, corrupt and circuit resampled together)."""
    heldout.check(model)
    if found.edges[0].position is not None and heldout.clean.shape[1] != n_pos:
        return  # a per-position circuit names positions of prompts this long
    runs = task_runs(model, heldout, batch_size=batch_size)
    drop = _drop(model, found.edges, heldout.clean.shape[1])
    patched = ablated_metrics(model, heldout, [drop], runs, batch_size=batch_size)
    idx = resamples(heldout.n_prompts, seed=derive(seed, "heldout_resamples"))
    removed = removed_share(runs.clean, runs.corrupt, patched, idx)[0]
    found.heldout = Estimate(
        round(1 - removed.value, 4), round(1 - removed.high, 4), round(1 - removed.low, 4)
    )
    found.heldout_gap = gap(runs.clean, runs.corrupt, idx)
    found.heldout_prompts = heldout.n_prompts
    found.heldout_seed = heldout.seed
