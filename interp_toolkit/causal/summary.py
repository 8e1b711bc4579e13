"""A model's induction circuit as the study page shows it: EAP-IG's circuit, EAP's beside it, where
they disagree, and whether the route by path's edges are in the circuit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from transformer_lens import TransformerBridge

from interp_toolkit.causal.attribution import attribute
from interp_toolkit.causal.circuit import Circuit, discover_circuit
from interp_toolkit.causal.compare import Disagreement, disagreement
from interp_toolkit.causal.graph import graph_of
from interp_toolkit.causal.routes import ModelRoute, RouteName
from interp_toolkit.causal.tasks import Task
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.stats.thresholds import THRESHOLDS

#: EAP-IG's default number of interpolation steps (Hanna et al. 2024 use 5 to 30).
IG_STEPS = 5


def _top_ranked(circuit: Circuit) -> Circuit:
    return replace(circuit, n_ranked=50)  # the JSON keeps the 50 highest-ranked edges


def _route_edges(edges: tuple[tuple[str, bool, bool], ...]) -> list[dict[str, Any]]:
    return [{"edge": e, "in_circuit": inside, "head_in_circuit": head} for e, inside, head in edges]


@dataclass(frozen=True)
class CircuitSummary(Jsonable):
    """``circuit``: the EAP-IG circuit; ``eap``: plain EAP's on the same task; ``route_edges``:
    each induction head's feeder -> its carrying input, whether the circuit holds it, and whether
    the circuit holds that head at all (a head with a small share can be pruned whole)."""

    run: str
    n_layers: int = field(metadata=json_field(skip=True))
    n_heads: int = field(metadata=json_field(skip=True))
    circuit: Circuit = field(metadata=json_field(key="ig", encode=_top_ranked))
    eap: Circuit = field(metadata=json_field(encode=_top_ranked))
    disagreement: Disagreement | None  # None when the model does not do the task
    route_edges: tuple[tuple[str, bool, bool], ...] = field(
        metadata=json_field(encode=_route_edges)
    )
    seconds: float = field(metadata=json_field(digits=2))


def route_edges(route: ModelRoute) -> list[tuple[str, str, str]]:
    """(source, target, input) of every induction head's feeder into each carrying input."""
    return [
        (str(h.feeder), str(h.head), c)
        for h in route.heads
        if h.feeder is not None
        for c in h.carrying
    ]


def summarise_circuits(
    name: str,
    model: TransformerBridge,
    task: Task,
    route: ModelRoute,
    *,
    ig_steps: int = IG_STEPS,
    batch_size: int = 32,
    seed: int = 0,
) -> CircuitSummary:
    """Discover the circuit with EAP-IG and with EAP; compare them; check the route's edges.
    Nothing is attributed when the route found the model not doing the task (same task).
    ``seed``: the held-out faithfulness's resamples (``interp-toolkit circuit --seed``'s)."""
    t0 = time.perf_counter()
    if route.name == RouteName.NO_TASK:
        reason = (
            f"the model does not do the {task.name} task: its clean-corrupt gap is {route.gap} "
            f"(a circuit needs >= {THRESHOLDS.min_gap:g} with an interval above 0)"
        )

        def empty(method: str) -> Circuit:
            measured = (task.name, method, task.n_prompts, route.clean, route.corrupt, route.gap)
            n_edges = len(graph_of(model).edges)
            return Circuit(*measured, [], n_edges, THRESHOLDS.recovers, reason=reason)

        ig, eap, diff, checked = empty(f"EAP-IG ({ig_steps} steps)"), empty("EAP"), None, ()
    else:
        ig = discover_circuit(model, task, ig_steps=ig_steps, batch_size=batch_size, seed=seed)
        eap_scores = attribute(model, task, ig_steps=1, batch_size=batch_size)
        # EAP's smallest top-k set, for comparison (not pruned: it is not the circuit shown)
        eap = discover_circuit(
            model, task, scores=eap_scores, batch_size=batch_size, prune_max=0, seed=seed
        )
        k = ig.top_k or len(ig.edges) or 10
        diff = disagreement(
            [(e.edge, e.score) for e in eap.ranked],
            [(e.edge, e.score) for e in ig.ranked],
            k,
            ("EAP", ig.method),
        )
        kept = {e.edge.key() for e in ig.edges}
        heads = {e.edge.source.label for e in ig.edges}
        checked = tuple(
            (f"{s} -> {t} ({c})", (s, t, c) in kept, t in heads) for s, t, c in route_edges(route)
        )
    return CircuitSummary(
        run=name,
        n_layers=int(model.cfg.n_layers),
        n_heads=int(model.cfg.n_heads),
        circuit=ig,
        eap=eap,
        disagreement=diff,
        route_edges=checked,
        seconds=time.perf_counter() - t0,
    )
