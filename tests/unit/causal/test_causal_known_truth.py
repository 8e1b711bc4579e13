"""The route by path and circuit discovery against hand-built circuits whose answer is known
(``tests/planting/circuits.py``): a previous-token head 0.0 feeding induction head 1.0's key
(K-composition) and a duplicate-token head 0.0 feeding its query (Q-composition); 0.1 is an
unrelated copying head (no role: the control), 1.1 is empty. The controls zero 0.0's OV.

On the induction task (the second repeat's tokens are the same in the clean and the corrupt
prompts) the edges that carry the behaviour are, exactly:

- K: embed -> 0.0 (v) [the previous token], 0.0 -> 1.0 (k), embed -> 1.0 (v), 1.0 -> logits;
- Q: embed -> 0.0 (k) [the earlier copy], 0.0 -> 1.0 (q), embed -> 1.0 (v), 1.0 -> logits.

(embed -> 1.0 (q) is not needed: the query's token is the same in both prompts.)
"""

from __future__ import annotations

import pytest
import torch
from planting import letters_codec
from planting.circuits import CIRCUITS, control_model

from interp_toolkit.causal.attribution import attribute
from interp_toolkit.causal.circuit import discover_circuit
from interp_toolkit.causal.paths import route_by_path
from interp_toolkit.causal.routes import RouteName
from interp_toolkit.causal.tasks import induction_task
from interp_toolkit.heads.registry import HeadId

PLANTED = {
    "k": {
        ("embed", "0.0", "v"),
        ("0.0", "1.0", "k"),
        ("embed", "1.0", "v"),
        ("1.0", "logits", "logits"),
    },
    "q": {
        ("embed", "0.0", "k"),
        ("0.0", "1.0", "q"),
        ("embed", "1.0", "v"),
        ("1.0", "logits", "logits"),
    },
}
ROLES = {
    "k": [["previous-token", "none"], ["induction", "none"]],
    "q": [["duplicate-token", "none"], ["induction", "none"]],
}


@pytest.fixture(scope="module")
def task():
    return induction_task(letters_codec(), 32, n_prompts=8, seed=1)


def _model(kind: str):
    return CIRCUITS[kind][0]()


@pytest.mark.parametrize("kind", ["k", "q"])
@pytest.mark.parametrize("ig_steps", [1, 5])
def test_discovered_circuit_is_exactly_the_planted_edges(kind, ig_steps, task):
    found = discover_circuit(_model(kind), task, ig_steps=ig_steps)
    assert {e.edge.key() for e in found.edges} == PLANTED[kind]
    assert found.faithfulness == pytest.approx(1.0, abs=1e-3)
    # one planted edge fewer recovers nothing like 80%: every edge of it is needed
    assert max(f for k, f in found.curve if k < len(PLANTED[kind])) < 0.1


@pytest.mark.parametrize("kind", ["k", "q"])
def test_route_by_path_names_the_planted_input_and_feeder(kind, task):
    route = route_by_path(_model(kind), task, [HeadId(1, 0)], ROLES[kind])
    head = route.heads[0]
    want = {"k": RouteName.K, "q": RouteName.Q}[kind]
    assert route.name == head.name == want
    assert head.carrying == (kind,) and head.feeder == HeadId(0, 0)
    assert head.control == HeadId(0, 1)  # the role-less earlier head
    assert head.inputs[kind].low > 0.9
    for other in {"q", "k", "v"} - {kind}:
        assert head.inputs[other].high < 0.01
    # the path carries it, the control carries nothing
    assert head.path(HeadId(0, 0), kind).removed.low > 0.9
    assert max(e.high for e in head.control_effects().values()) < 0.01
    # the composition score of the planted pair is above the random baseline; the control's is 0
    assert head.path(HeadId(0, 0), kind).composition > route.composition_baseline
    assert head.path(HeadId(0, 1), kind).composition == 0.0


@pytest.mark.parametrize("kind", ["k", "q"])
def test_no_induction_control_passes_nothing(kind, task):
    model = control_model(kind)
    route = route_by_path(model, task, [HeadId(1, 0)], ROLES[kind])
    assert route.name == RouteName.NO_TASK
    assert route.gap.value < 1.0  # the clean prompts barely beat the corrupt ones
    found = discover_circuit(model, task, ig_steps=1)
    assert found.edges == [] and found.faithfulness is None
    assert "does not do the induction task" in found.reason


def test_eap_misses_the_and_gate_that_eap_ig_sees(task):
    """At the corrupt point the induction head attends evenly and the value it would copy is the
    corrupt token, so the key edge's gradient is ~0 (an AND gate); integrating along the
    clean-corrupt path restores it."""
    model = _model("k")
    eap = {e.key(): s for e, s in attribute(model, task, ig_steps=1).ranked()}
    ig = {e.key(): s for e, s in attribute(model, task, ig_steps=5).ranked()}
    key = ("0.0", "1.0", "k")
    assert abs(eap[key]) < 1e-3 < 0.1 < ig[key]


def test_per_position_circuit_puts_each_edge_where_it_acts(task):
    """One prompt (period 13): the induction head reads query q's answer at key q - 12, whose
    previous-token head read position q - 13; each edge must sit exactly there."""
    one = task.rows(torch.tensor([0]))
    found = discover_circuit(_model("k"), one, ig_steps=5, per_position=True)
    scored = set(torch.nonzero(one.metric.scored[0])[:, 0].tolist())
    where: dict[tuple[str, str, str], set[int]] = {}
    for e in found.edges:
        where.setdefault(e.edge.key(), set()).add(e.position)
    assert set(where) == PLANTED["k"]
    assert where[("1.0", "logits", "logits")] <= scored
    assert where[("0.0", "1.0", "k")] <= {q - 12 for q in scored}
    assert where[("embed", "1.0", "v")] <= {q - 12 for q in scored}
    assert where[("embed", "0.0", "v")] <= {q - 13 for q in scored}
