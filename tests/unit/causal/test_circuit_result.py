"""The circuit command's result (:class:`~interp_toolkit.causal.circuit.Circuit`) on hand-made
values: its JSON, key for key in the order readers of ``circuit --json`` and study.json know, and
what the terminal shows of it (read from the dataclass, with the JSON's rounding)."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console

from interp_toolkit.causal.circuit import Circuit, CircuitEdge
from interp_toolkit.causal.compare import disagreement
from interp_toolkit.causal.graph import Edge, Node
from interp_toolkit.causal.options import TASK_NAMES, CircuitOptions
from interp_toolkit.causal.routes import Estimate
from interp_toolkit.causal.tasks import TASKS
from interp_toolkit.errors import UserError
from interp_toolkit.reports.terminal_units import circuit_view

KEY = CircuitEdge(Edge(Node("head", 0, 0), Node("k", 1, 0)), 0.123456789)
OUT = CircuitEdge(Edge(Node("head", 1, 0), Node("logits", 2, 0)), -2.0, 3)


def found(**changed) -> Circuit:
    made = Circuit(
        "induction", "EAP", 8, 3.123456789, 0.00049996, Estimate(3.1, 2.9, 3.3), [OUT, KEY], 29,
        0.8, [(1, 0.123449996), (2, 0.99949996)], 2, [OUT, KEY], 0.99949996, True, "", 1, 3,
        Estimate(0.91, 0.85, 0.95), Estimate(3.0, 2.8, 3.2), 16, 1011,
    )  # fmt: skip
    return dataclasses.replace(made, **changed)


def test_the_json_keeps_its_keys_order_and_digits_and_lists_n_ranked_edges():
    """Renamed keys, rounded numbers, the ``circuit`` group and its notes; ``n_ranked`` lists
    the highest-ranked edges only (the circuit keeps both)."""
    out = {"source": "1.0", "target": "logits", "input": "logits", "score": -2.0, "position": 3}
    key = {"source": "0.0", "target": "1.0", "input": "k", "score": 0.123457}
    expected = {
        "task": "induction",
        "method": "EAP",
        "n_prompts": 8,
        "clean_metric": 3.1235,
        "corrupt_metric": 0.0005,
        "gap": {"value": 3.1, "low": 2.9, "high": 3.3},
        "total_edges": 29,
        "threshold": 0.8,
        "edges": [out],
        "curve": [{"edges": 1, "faithfulness": 0.1234}, {"edges": 2, "faithfulness": 0.9995}],
        "circuit": {
            "edges": [out, key],
            "faithfulness": 0.9995,
            "top_k": 2,
            "pruned": True,
            "reason": "",
            "faithfulness_on": "selection prompts (the ones that ranked and chose the edges)",
            "heldout_faithfulness": {"value": 0.91, "low": 0.85, "high": 0.95},
            "heldout_gap": {"value": 3.0, "low": 2.8, "high": 3.2},
            "heldout_prompts": 16,
            "heldout_seed": 1011,
            "heldout_interval": "95% percentile bootstrap over the held-out prompts",
            "search": "scan in k order (smallest passing k), no bisection",
            "scanned": 1,
            "prune_rounds": 3,
        },
    }
    assert json.dumps(found(n_ranked=1).to_dict()) == json.dumps(expected)
    assert found().to_dict()["edges"] == [out, key]  # n_ranked None: every edge
    none = found(edges=[], faithfulness=None, heldout=None, heldout_gap=None).to_dict()
    assert none["circuit"]["faithfulness"] is None and none["circuit"]["heldout_gap"] is None


def _lines(shown) -> list[str]:
    buf = io.StringIO()
    for item in shown:
        Console(width=300, file=buf).print(item, soft_wrap=isinstance(item, str))
    return buf.getvalue().splitlines()


def test_a_disagreement_writes_its_keys_named_by_k_and_methods_in_order_with_4_digits():
    """Two rankings of six edges, the first two swapped and the last two: rank correlation
    1 - 4/35 = 0.885714..., written 0.8857; each one's top-1 edge is the other's second."""
    edges = [Edge(Node("head", 0, h), Node("k", 1, h)) for h in range(6)]
    a, b, c, d, e, f = edges
    eap = [(x, -6.0 + i) for i, x in enumerate(edges)]  # |score| descending
    ig = [(x, 10.0 - i) for i, x in enumerate([b, a, c, d, f, e])]
    found = disagreement(eap, ig, 1, ("EAP", "EAP-IG (5 steps)"))
    assert json.dumps(found.to_dict()) == (
        '{"methods": ["EAP", "EAP-IG (5 steps)"], "k": 1, "spearman_abs_scores": 0.8857, '
        '"top_1_only_EAP": [["0.0 -> 1.0 (k)", 2]], "top_1_only_EAP-IG (5 steps)": '
        '[["0.1 -> 1.1 (k)", 2]]}'
    )
    assert found.only_first == (("0.0 -> 1.0 (k)", 2),) and found.only_second[0][1] == 2


def test_the_terminal_reads_the_circuit_with_the_jsons_rounding():
    """Every number as the JSON rounds it (corrupt 0.00049996 is 0.0005 there, so 0.001 here,
    not 0.000; faithfulness 0.9995 is 100.0%, not 99.9%)."""
    shown = circuit_view("run", found(), ["a note"])
    lines = _lines(shown)
    assert lines[0] == (
        "run, task induction (8 pairs): clean 3.123, corrupt 0.001, gap 3.100 [2.900, 3.300]; "
        "EAP, 29 edges"
    )
    assert lines[1] == "note: a note."
    assert shown[2].title == "circuit: 2 edges recover 100.0% of the gap (top 2, pruned)"
    rows = [ln.split("│")[1:5] for ln in lines if ln.startswith("│")]
    assert [[c.strip() for c in r] for r in rows] == [
        ["1.0", "logits", "logits", "-2"],
        ["0.0", "1.0", "k", "0.1235"],
    ]
    assert lines[-2] == (
        "held out: on 16 prompts of the task drawn again (seed 1011) the circuit recovers "
        "91.0% [85.0%, 95.0%] of the gap (95% percentile bootstrap over the held-out prompts)"
    )
    assert lines[-1] == "faithfulness of the top-k edges: 1: 0.12, 2: 1.00"


def test_no_circuit_is_said_with_its_reason_and_no_table():
    shown = circuit_view("run", found(edges=[], faithfulness=None, reason="gap too small"), [])
    assert _lines(shown)[1:] == ["no circuit: gap too small"]


def test_the_options_name_every_task_and_refuse_bad_values():
    """``--task``'s names (a torch-free copy, for ``--help``) are the tasks' registry."""
    assert TASK_NAMES == tuple(TASKS)
    with pytest.raises(UserError, match="--n-prompts 1 cannot give an interval"):
        CircuitOptions(n_prompts=1)
