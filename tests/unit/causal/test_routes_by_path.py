"""The route rule and its sentences, on measured effects written by hand: swap the effects and
the route and the sentence change; an effect inside the control's interval carries nothing."""

from __future__ import annotations

import dataclasses

import pytest

from interp_toolkit.causal.routes import (
    Estimate,
    ModelRoute,
    PathEffect,
    RouteName,
    decide_route,
    head_route,
    model_route_name,
)
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.reports.circuit_report import route_rows
from interp_toolkit.reports.findings import route_phrase
from interp_toolkit.stats.thresholds import THRESHOLDS

B = HeadId(1, 2)
FEEDER, OTHER, CONTROL = HeadId(0, 0), HeadId(0, 1), HeadId(0, 3)
NONE = Estimate(0.01, -0.02, 0.03)


def est(v: float, half: float = 0.05) -> Estimate:
    return Estimate(v, v - half, v + half)


def paths(effects: dict[tuple[HeadId, str], Estimate]) -> list[PathEffect]:
    out = []
    for src in (FEEDER, OTHER, CONTROL):
        for c in "qkv":
            out.append(PathEffect(src, B, c, effects.get((src, c), NONE), 0.1))
    return out


EFFECT = Estimate(0.35, 0.3, 0.4)  # the head's share of the gap (one of three induction heads)


def route(inputs: dict[str, Estimate], effects: dict[tuple[HeadId, str], Estimate], effect=EFFECT):
    return head_route(B, effect, inputs, paths(effects), CONTROL)


K_INPUTS = {"q": est(0.05), "k": est(0.9), "v": est(0.02)}
K_PATHS = {(FEEDER, "k"): est(0.85), (OTHER, "k"): est(0.1)}


def test_swapping_the_measured_effects_swaps_the_route_and_the_sentence():
    k = route(K_INPUTS, K_PATHS)
    assert (k.name, k.carrying, k.feeder) == (RouteName.K, ("k",), FEEDER)
    swapped_inputs = {"q": K_INPUTS["k"], "k": K_INPUTS["q"], "v": K_INPUTS["v"]}
    swapped_paths = {(s, "q" if c == "k" else c): e for (s, c), e in K_PATHS.items()}
    q = route(swapped_inputs, swapped_paths)
    assert (q.name, q.carrying, q.feeder) == (RouteName.Q, ("q",), FEEDER)
    sk, sq = table_row(k), table_row(q)
    assert sk[6] == "K-composition" and "(key)" in sk[8]
    assert sq[6] == "Q-composition" and "(query)" in sq[8]
    # the feeder follows the strongest path: give it to 0.1 and the table names 0.1
    moved = route(K_INPUTS, {(FEEDER, "k"): est(0.1), (OTHER, "k"): est(0.85)})
    assert moved.feeder == OTHER and table_row(moved)[8].startswith("0.1 -> 1.2")


def table_row(h) -> list:
    """The route table's row of one induction head (``route_section``'s table)."""
    gap = Estimate(3.0, 2.8, 3.2)
    model = ModelRoute("induction", 64, 3.2, 0.2, gap, 0.05, (h,), model_route_name([h], gap))
    (row,) = route_rows("run", model)
    return row


def test_two_carrying_inputs_are_mixed_and_none_is_not_found():
    mixed = route({"q": est(0.7), "k": est(0.8), "v": est(0.0)}, K_PATHS)
    assert mixed.name == RouteName.MIXED and mixed.carrying == ("q", "k")
    weak = route({"q": est(0.3), "k": est(0.45), "v": est(0.1)}, K_PATHS)
    assert weak.name == RouteName.NOT_FOUND and weak.feeder is None
    # just at the threshold carries; just under does not
    at = dataclasses.replace(K_INPUTS["k"], value=THRESHOLDS.carries)
    assert decide_route({**K_INPUTS, "k": at}, None)[0] == RouteName.K
    under = dataclasses.replace(at, value=THRESHOLDS.carries - 1e-3)
    assert decide_route({**K_INPUTS, "k": under}, None)[0] == RouteName.NOT_FOUND


def test_an_effect_inside_the_controls_interval_carries_nothing():
    """A role-less head that moves the key as much as the feeder: the key input no longer
    stands out, so no route is named (the control that catches a confound)."""
    confounded = {**K_PATHS, (CONTROL, "k"): Estimate(0.8, 0.7, 0.9)}
    r = route(K_INPUTS, confounded)
    assert r.name == RouteName.NOT_FOUND
    assert route(K_INPUTS, K_PATHS).name == RouteName.K


def test_model_route_needs_the_task_and_agreeing_heads():
    k = route(K_INPUTS, K_PATHS)
    q = route({"q": est(0.9), "k": est(0.0), "v": est(0.0)}, {(FEEDER, "q"): est(0.9)})
    gap = Estimate(3.0, 2.5, 3.5)
    assert model_route_name([k, k], gap) == RouteName.K
    assert model_route_name([k, q], gap) == RouteName.DIFFERS
    assert model_route_name([k], Estimate(0.5, 0.4, 0.6)) == RouteName.NO_TASK
    assert model_route_name([k], Estimate(1.5, -0.1, 3.0)) == RouteName.NO_TASK  # interval hits 0
    layer0 = head_route(HeadId(0, 1), EFFECT, {}, [], None)
    assert layer0.name == RouteName.NO_EARLIER


def test_a_head_whose_own_effect_reaches_zero_has_no_route():
    """Shares of nothing: a head whose resampled output removes none of the gap is not routed,
    however its inputs read (a share of a ~0 effect is noise)."""
    idle = route(K_INPUTS, K_PATHS, effect=Estimate(0.02, -0.01, 0.05))
    assert idle.name == RouteName.NO_EFFECT and idle.feeder is None and idle.carrying == ()
    assert route(K_INPUTS, K_PATHS, effect=Estimate(0.02, 0.005, 0.05)).name == RouteName.K


@pytest.mark.parametrize("name", [RouteName.K, RouteName.NO_TASK])
def test_route_phrase_states_the_numbers(name):
    from interp_toolkit.causal.routes import ModelRoute

    k = route(K_INPUTS, K_PATHS)
    gap = Estimate(3.0, 2.5, 3.5) if name == RouteName.K else Estimate(0.2, 0.1, 0.3)
    m = ModelRoute("induction", 64, 3.1, 0.1, gap, 0.05, (k,), model_route_name([k], gap))
    phrase = route_phrase(m)
    if name == RouteName.K:
        assert (
            phrase.startswith("route by path K-composition") and "key 0.90 [0.85, 0.95]" in phrase
        )
        assert "from 0.0" in phrase
    else:
        assert "no route to name" in phrase and "0.20 [0.10, 0.30]" in phrase
