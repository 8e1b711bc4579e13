"""The study's sentences and verdicts are functions of the measurements: hand-made measurements in,
and the words change when the numbers do."""

from __future__ import annotations

import dataclasses

from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.analysis.period_exam import PeriodExam
from interp_toolkit.analysis.routes import (
    Estimate,
    ModelRoute,
    PathEffect,
    exam_verdict,
    head_route,
    model_route_name,
)
from interp_toolkit.reports.findings import (
    DepthMeasurement,
    claim_sentence,
    data_mix_sentence,
    depth_sentence,
    study_findings,
)

PERIODS = range(2, 17)


def exams(rate: float | dict[int, float]) -> tuple[PeriodExam, ...]:
    def r(p: int) -> float:
        return rate.get(p, 1.0) if isinstance(rate, dict) else rate

    return tuple(PeriodExam(p, 30, r(p), 0.0, 1 / p) for p in PERIODS)


def chance() -> tuple[PeriodExam, ...]:
    """Pass counts at 1/period (rounded down): what guessing among the period's letters gives."""
    return tuple(PeriodExam(p, 30, (30 // p) / 30, 3.0, 1 / p) for p in PERIODS)


def route(carrying: str | None) -> ModelRoute:
    """A measured route of induction head 1.1 whose ``carrying`` input (or none) carries it."""
    inputs = {
        c: Estimate(0.9, 0.85, 0.95) if c == carrying else Estimate(0.02, 0.0, 0.04) for c in "qkv"
    }
    paths = [
        PathEffect(
            HeadId(0, h), HeadId(1, 1), c, inputs[c] if h == 0 else Estimate(0.0, 0.0, 0.01), 0.1
        )
        for h in range(2)
        for c in "qkv"
    ]
    head = head_route(HeadId(1, 1), Estimate(0.9, 0.85, 0.95), inputs, paths, HeadId(0, 1))
    gap = Estimate(3.0, 2.8, 3.2)
    return ModelRoute("induction", 64, 3.2, 0.2, gap, 0.05, (head,), model_route_name([head], gap))


def depth(n_layers: int, **kw) -> DepthMeasurement:
    deep = n_layers > 1
    base = DepthMeasurement(
        name=f"cpu-{n_layers}l",
        n_layers=n_layers,
        induction_heads=("1.0", "1.2") if deep else (),
        top_head="1.2" if deep else "0.3",
        top_score=0.91 if deep else 0.08,
        induction_step=350 if deep else None,
        induction_tokens=1_433_600 if deep else None,
        induction_minutes=0.7 if deep else None,
        steps=550,
        tokens=2_252_800,
        train_minutes=1.1,
        final_loss=2.1,
        val_loss=2.3,
        exams=exams(1.0) if deep else chance(),
        route=route("k")
        if deep
        else ModelRoute(
            "induction",
            64,
            0.3,
            0.2,
            Estimate(0.1, 0.0, 0.2),
            None,
            (),
            model_route_name([], Estimate(0.1, 0.0, 0.2)),
        ),
    )
    return dataclasses.replace(base, **kw)


def test_exam_verdict_counts_passes_and_chance():
    v = exam_verdict(exams({3: 28 / 30, 9: 29 / 30}))
    assert (v.n_passing, v.n_periods, v.lowest.period) == (14, 15, 3)
    assert not v.all_pass and v.above_chance == tuple(PERIODS)
    c = exam_verdict(chance())
    assert c.at_chance and c.n_passing == 0
    # 9/30 at period 12 (chance 2.5/30) is far above chance even after Bonferroni over 15 periods
    lucky = tuple(
        dataclasses.replace(e, pass_rate=9 / 30) if e.period == 12 else e for e in chance()
    )
    assert exam_verdict(lucky).above_chance == (12,)


def test_sentences_follow_the_measurements():
    one, two = depth(1), depth(2)
    s = depth_sentence(two)
    assert "induction heads 1.0, 1.2" in s and "step 350" in s and "1.4M tokens" in s
    assert "15 of 15 periods" in s and "route by path K-composition" in s
    assert "1.1: key 0.90 [0.85, 0.95] from 0.0" in s
    assert "no induction head (best 0.3: 0.08)" in depth_sentence(one)
    assert "no period is above chance" in depth_sentence(one)
    assert claim_sentence([one, two]).startswith("The seed's claim holds")

    # swap in other measurements: every changed number changes the words
    later = dataclasses.replace(two, induction_step=500, induction_tokens=2_048_000)
    assert "step 500" in depth_sentence(later) and "2.0M tokens" in depth_sentence(later)
    weak = dataclasses.replace(two, exams=exams({2: 0.9}))
    assert "14 of 15 periods" in depth_sentence(weak) and "lowest 90% at period 2" in (
        depth_sentence(weak)
    )
    assert claim_sentence([one, weak]) == (
        "The seed's claim does not hold as measured here: 2 layers passes only 14 of 15 periods."
    )
    q = dataclasses.replace(two, route=route("q"))
    assert "route by path Q-composition" in depth_sentence(q)
    lost = dataclasses.replace(two, route=route(None))
    assert "route by path not found" in depth_sentence(lost)
    none = dataclasses.replace(two, induction_heads=(), induction_step=None)
    assert "no induction head" in depth_sentence(none) and "in 550 steps" in depth_sentence(none)
    assert "2 layers has no induction head" in claim_sentence([one, none])
    copier = dataclasses.replace(
        one, exams=tuple(dataclasses.replace(e, pass_rate=0.5) for e in chance())
    )
    assert "1 layer is above chance at period(s) 4, 5, 6" in claim_sentence([copier, two])
    assert study_findings([one, two])[1:] == [depth_sentence(one), depth_sentence(two)]


def test_data_mix_sentence_reads_the_recorded_settings():
    settings = {
        "data": {"corpus": "stdlib", "repeat_fraction": 0.9, "span_min": 2, "span_max": None}
    }
    s = data_mix_sentence(settings, 32)
    assert "90% of every batch are synthetic" in s and "2..16 tokens" in s and "10% text" in s
    assert "text from corpus 'stdlib' only" in data_mix_sentence(
        {"data": {"corpus": "stdlib", "repeat_fraction": 0.0}}, 32
    )


def test_claim_names_every_deeper_depth():
    deep = [depth(n) for n in (2, 3, 8)]
    assert "2, 3 and 8 layers each have an induction head" in claim_sentence([depth(1), *deep])
    assert "; 2 layers have an induction head" in claim_sentence([depth(1), deep[0]])
