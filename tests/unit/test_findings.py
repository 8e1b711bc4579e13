"""The study's sentences and verdicts are functions of the measurements: hand-made measurements in,
and the words change when the numbers do."""

from __future__ import annotations

import dataclasses

import pytest

from interp_toolkit.analysis.ablation import CausalRow
from interp_toolkit.analysis.period_exam import PeriodExam
from interp_toolkit.analysis.routes import (
    THRESHOLDS,
    ablation_verdict,
    exam_verdict,
    route_of,
)
from interp_toolkit.reports.findings import (
    DepthMeasurement,
    causal_sentence,
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


def row(what: str, before: float, after: float, heads=("0.0",)) -> CausalRow:
    return CausalRow("cpu-2l", "1.1", what, list(heads), "mean (hook_z)", before, after)


PREV = "strongest previous-token head"
DUP = "duplicate-token head"
ALL = "all earlier heads with a role"


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
        route=route_of([row(PREV, 0.9, 0.05)] if deep else []),
    )
    return dataclasses.replace(base, **kw)


@pytest.mark.parametrize(
    ("before", "after", "verdict"),
    [
        (0.9, 0.05, "collapses"),
        (0.9, 0.45, "collapses"),
        (0.9, 0.46, "weakens"),
        (0.9, 0.85, "no effect"),
        (0.9, 0.95, "no effect"),
        (0.5, 0.6, "rises"),
    ],
)
def test_ablation_verdict_thresholds(before, after, verdict):
    assert ablation_verdict(before, after) == verdict


@pytest.mark.parametrize(
    ("rows", "route"),
    [
        ([row(PREV, 0.86, 0.03)], "K-composition"),
        (
            [row(PREV, 0.97, 0.74), row(DUP, 0.97, 0.21, ("0.2",)), row(ALL, 0.97, 0.08)],
            "Q-composition",
        ),
        ([row(PREV, 0.97, 0.41), row(DUP, 0.97, 0.60, ("0.3",)), row(ALL, 0.97, 0.10)], "mixed"),
        ([row(PREV, 0.96, 0.96), row(DUP, 0.96, 0.53, ("1.1",)), row(ALL, 0.96, 0.07)], "spread"),
        ([row(PREV, 0.9, 0.88)], "not found"),
        ([], "none"),
    ],
)
def test_route_from_ablations(rows, route):
    assert route_of(rows).name == route


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
    assert "15 of 15 periods" in s and "route K-composition" in s
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
    q = dataclasses.replace(two, route=route_of([row(PREV, 0.9, 0.85), row(DUP, 0.9, 0.1)]))
    assert "route Q-composition" in depth_sentence(q)
    none = dataclasses.replace(two, induction_heads=(), induction_step=None)
    assert "no induction head" in depth_sentence(none) and "in 550 steps" in depth_sentence(none)
    assert "2 layers has no induction head" in claim_sentence([one, none])
    copier = dataclasses.replace(
        one, exams=tuple(dataclasses.replace(e, pass_rate=0.5) for e in chance())
    )
    assert "1 layer is above chance at period(s) 4, 5, 6" in claim_sentence([copier, two])
    assert study_findings([one, two])[1:] == [depth_sentence(one), depth_sentence(two)]


def test_causal_sentence_and_thresholds_in_one_place():
    s = causal_sentence(row(PREV, 0.86, 0.03))
    assert s.endswith("(96.5% removed): the score collapses.")
    assert causal_sentence(row(PREV, 0.86, 0.85)).endswith("it has no effect.")
    strict = dataclasses.replace(THRESHOLDS, collapse=0.99)
    assert causal_sentence(row(PREV, 0.86, 0.03), strict).endswith("the score weakens.")


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
