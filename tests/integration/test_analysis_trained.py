"""The checks that must hold on trained cpu-preset models (slow; fixtures from conftest.py).

``trained_2l`` / ``trained_1l`` are session-scoped :class:`interp_toolkit.runs.folder.Run` objects trained
with the cpu preset (2 and 1 layers).
"""

from __future__ import annotations

import pytest

from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report_2l(trained_2l):
    return discover_heads(
        trained_2l.model,
        trained_2l.codec,
        DiscoveryOptions(n_seqs=64, seed=0),
        model_cfg=trained_2l.model_cfg,
    )


def test_prev_and_induction_heads_are_significant_and_over_the_floor(report_2l):
    """The trained model's strongest layer-0 previous-token head and layer-1 induction heads pass
    their specificity test (their own attention at nearby keys, and for induction its own score
    without repeats) at the smallest p the draws allow, and reach the 0.4 effect-size floor."""
    detail = report_2l.to_dict()["heads"]
    t = report_2l.tests
    for kind, layer in (("previous_token", 0), ("induction_vw", 1), ("induction", 1)):
        best = int(report_2l.scores.get(kind)[layer].argmax())
        assert float(t.p_value[kind][layer, best]) == t.smallest_p, detail
        assert float(report_2l.scores.get(kind)[layer, best]) >= report_2l.floors[kind], detail
    assert any(layer == 0 for layer, _ in report_2l.heads_with_role("previous-token")), detail
    assert any(layer == 1 for layer, _ in report_2l.heads_with_role("induction")), detail


def test_a_one_layer_model_has_no_induction_head(trained_1l):
    """Induction needs an earlier layer to compose with: no head of a trained 1-layer model may
    get the induction role (a true negative on trained heads)."""
    rep = discover_heads(
        trained_1l.model,
        trained_1l.codec,
        DiscoveryOptions(n_seqs=64, seed=0),
        model_cfg=trained_1l.model_cfg,
    )
    assert rep.heads_with_role("induction") == [], rep.to_dict()["heads"]


def test_discovery_names_heads_the_untrained_model_lacks(trained_2l, report_2l):
    """Training grows a layer-0 previous-token head and a layer-1 induction head; the same
    architecture untrained has no head with any role."""
    from interp_toolkit.models.build import build_model

    detail = report_2l.to_dict()["roles"]
    assert [h for h in report_2l.heads_with_role("previous-token") if h.layer == 0], detail
    assert [h for h in report_2l.heads_with_role("induction") if h.layer == 1], detail
    untrained = build_model(trained_2l.model_cfg)
    before = discover_heads(
        untrained,
        trained_2l.codec,
        DiscoveryOptions(n_seqs=64, seed=0),
        model_cfg=trained_2l.model_cfg,
    )
    assert {r for row in before.roles for r in row} == {"none"}, before.to_dict()["heads"]


def test_roles_agree_across_induction_score_and_fdr(trained_2l, report_2l):
    """The value-weighted (default) and the plain induction score, with and without
    Benjamini-Hochberg, label the same heads on the trained model (experiments/null_calibration.py
    lists them)."""
    for induction_score, fdr in (("plain", False), ("vw", True)):
        rep = discover_heads(
            trained_2l.model,
            trained_2l.codec,
            DiscoveryOptions(n_seqs=64, seed=0, induction_score=induction_score, fdr=fdr),
            model_cfg=trained_2l.model_cfg,
        )
        assert (
            rep.decides["induction"]
            == {"plain": "induction", "vw": "induction_vw"}[induction_score]
        )
        assert rep.roles == report_2l.roles, (induction_score, fdr)


def test_two_layers_pass_the_builtin_exams(trained_2l):
    """The seed's two single-prompt exams (every period: tests/integration/test_period_exam_trained.py)."""
    for exam in BUILTIN_EXAMS:
        res = run_exam(trained_2l.model, trained_2l.codec, exam.prompt, exam.target)
        assert res.rank == 0, (exam.name, res.to_dict())


@pytest.fixture(scope="module")
def route_2l(trained_2l, report_2l):
    from interp_toolkit.causal import induction_route

    return induction_route(trained_2l.model, trained_2l.codec, report_2l)


def test_route_by_path_on_the_trained_model_is_the_studys_rule(trained_2l, report_2l, route_2l):
    """The rule the study applies, not a looser one: every layer-1 induction head's key input
    carries its induction (resampling the layer-0 writes into it removes >= Thresholds.carries
    of the induction task's gap, its interval above the role-less control's), its query and value
    inputs do not, and it is fed by a previous-token head. An untrained model of the same
    architecture does not do the task, so nothing is routed."""
    from interp_toolkit.causal import study_task
    from interp_toolkit.causal.paths import route_by_path
    from interp_toolkit.causal.routes import RouteName
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.models.build import build_model
    from interp_toolkit.stats.thresholds import THRESHOLDS

    route = route_2l
    assert route.gap.low >= THRESHOLDS.min_gap, route.gap
    assert route.name == RouteName.K, route.to_dict()
    assert {h.head for h in route.heads} == set(report_2l.heads_with_role("induction"))
    for h in route.heads:
        assert h.carrying == ("k",), h.to_dict()
        assert h.inputs["k"].value >= THRESHOLDS.carries
        assert h.inputs["q"].value < THRESHOLDS.carries > h.inputs["v"].value
        assert report_2l.has_role(h.feeder, "previous-token"), h.to_dict()
        if h.control is not None:
            assert h.inputs["k"].low > max(e.high for e in h.control_effects().values())
    untrained = build_model(trained_2l.model_cfg)
    task = study_task(untrained, trained_2l.codec)
    none = [["none"] * 4, ["none"] * 4]
    assert route_by_path(untrained, task, [HeadId(1, 0)], none).name == RouteName.NO_TASK


def test_discovered_circuit_holds_the_routes_edge(trained_2l, route_2l):
    """EAP-IG's circuit on the study's task recovers >= 80% of the gap alone; it holds the
    feeder -> key edge the route by path measured for the induction head with the largest effect,
    and for every induction head it keeps at all (a head with a small share may be pruned whole)."""
    from interp_toolkit.causal import study_task
    from interp_toolkit.causal.summary import summarise_circuits

    model = trained_2l.model
    found = summarise_circuits("cpu-2l", model, study_task(model, trained_2l.codec), route_2l)
    assert found.circuit.faithfulness is not None and found.circuit.faithfulness >= 0.8
    strongest = max(route_2l.heads, key=lambda h: h.effect.value)
    edges = {e: (inside, kept) for e, inside, kept in found.route_edges}
    assert edges[f"{strongest.feeder} -> {strongest.head} (k)"][0], found.to_dict()
    assert all(inside for inside, kept in edges.values() if kept), found.to_dict()


def test_the_study_probe_reads_the_previous_token_after_layer_0_and_ablation_removes_it(
    trained_2l, trained_1l, report_2l
):
    """What reproduce's probe section reports, on the trained models: the previous token is not in
    the embedding, decodable after layer 0 of the 2-layer model, and gone with its layer-0
    previous-token heads mean-ablated; the 1-layer model and an untrained 2-layer model never have
    it."""
    from interp_toolkit.measures.layers import is_decodable
    from interp_toolkit.models.build import build_model
    from interp_toolkit.study.layers import measure_probe

    heads = [h for h in report_2l.heads_with_role("previous-token") if h.layer == 0]
    two = measure_probe(trained_2l.model, trained_2l.codec, "cpu-2l", heads)
    assert not is_decodable(two.result.row("embed")) and is_decodable(two.result.row("attn 0"))
    assert two.ablated is not None and not any(is_decodable(r) for r in two.ablated.rows)
    one = measure_probe(trained_1l.model, trained_1l.codec, "cpu-1l")
    assert one.ablated is None and not any(is_decodable(r) for r in one.result.rows)
    untrained = measure_probe(build_model(trained_2l.model_cfg), trained_2l.codec, "untrained")
    assert not any(is_decodable(r) for r in untrained.result.rows)
