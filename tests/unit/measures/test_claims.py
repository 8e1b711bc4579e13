"""The original post's claims as rules (docs/study.md section 0): hand-made measurements in, a
verdict out, and planted negatives that are almost, but not, what a claim says get "not
reproduced" for that row."""

from __future__ import annotations

import dataclasses

import pytest
from findings_helpers import N, copier, depth, exams, role_checks

from interp_toolkit.heads.dynamics import PhaseLoss
from interp_toolkit.measures.claims import Mark, over_seeds, verdicts
from interp_toolkit.measures.run import ExamRow
from interp_toolkit.reports.claims import claim_lines, claims_markdown, claims_table, ours
from interp_toolkit.stats.intervals import Interval
from interp_toolkit.stats.thresholds import THRESHOLDS


def _verdict(ms, key, t=THRESHOLDS):
    return next(v for v in verdicts(ms, t) if v.key == key)


def _marks(ms, seeds=(0,)):
    per_seed = [verdicts(ms) for _ in seeds]
    return {c.key: c.mark for c in over_seeds(seeds, per_seed)}


def test_the_study_as_the_post_describes_it_reproduces_every_measurable_row():
    one, two = depth(1), depth(2)
    marks = _marks([one, two])
    for key in ("exam_ABCXDEF", "exam_ABCD", "one_cannot", "two_can"):
        assert marks[key] == Mark.REPRODUCED, key
    # one seed cannot say "reliably"; no deeper model, no "switch"; no phase change measured
    assert marks["reliably"] == marks["switch"] == marks["gpt2"] == Mark.NOT_MEASURED
    assert marks["phase_loss"] == Mark.NOT_MEASURED


def test_a_two_layer_model_no_better_than_the_one_layer_model_is_not_reproduced():
    """The planted negative of "2 layers can": an induction head that passes its causal check,
    but exams no better than the 1-layer model's on the same prompts."""
    one = depth(1)
    same = depth(2, period_exams=copier())
    v = _verdict([one, same], "two_can")
    assert v.holds is False and v.number("difference").value == 0
    assert _marks([one, same])["two_can"] == Mark.NOT_REPRODUCED
    # a difference below the floor: significant with thousands of prompts, but under 5 points
    slightly = depth(2, period_exams=tuple(
        dataclasses.replace(e, passes=e.passes + 6, ranks=(0,) * (e.passes + 6) + (7,) * (N - e.passes - 6))
        for e in copier()
    ))  # fmt: skip
    v = _verdict([one, slightly], "two_can")
    assert v.number("p").value < 0.05 and v.number("difference").value < 0.05 and v.holds is False
    # and the causal check is part of it: a head whose ablation removes nothing fails the row
    idle = depth(2, role_checks=role_checks(True, removed=0.0))
    assert _verdict([one, idle], "two_can").holds is False


def test_a_one_layer_model_that_does_induction_is_not_reproduced():
    """The planted negatives of "1 layer cannot": by its exams (better as is than under the order
    control), by its passages, or by a head with the induction role."""
    two = depth(2)
    inducing = depth(1, period_exams=exams(150, control=-1))
    v = _verdict([inducing, two], "one_cannot")
    assert v.holds is False and v.number("exam_effect").value > 0.5
    by_passage = depth(1, passage_order=Interval(0.2, 0.15, 0.25, 64, "t"))
    assert _verdict([by_passage, two], "one_cannot").holds is False
    with_role = depth(1, induction_heads=("0.1",))
    assert _verdict([with_role, two], "one_cannot").holds is False
    # a copier (the same top-1 with its first copy shuffled) is not induction
    assert _verdict([depth(1), two], "one_cannot").holds is True
    # an effect above the floor whose interval reaches 0 is not shown either
    noisy = depth(1, passage_order=Interval(0.2, -0.01, 0.41, 64, "t"))
    assert _verdict([noisy, two], "one_cannot").holds is True


def test_the_exam_rows_read_the_ranks_and_print_them_as_the_post_does():
    one, two = depth(1), depth(2)
    v = _verdict([one, two], "exam_ABCXDEF")
    assert v.holds and v.number("rank1").value == 25 and v.number("rank2").value == 1
    (c,) = [x for x in over_seeds((0,), [verdicts([one, two])]) if x.key == "exam_ABCXDEF"]
    assert ours(c, "exam") == "2 layers: 1st, p 80%; 1 layer: 25th, p 0.7%"
    # the 2-layer model ranks the target second: not reproduced
    second = dataclasses.replace(
        two, prompt_exams=(ExamRow("ABCXDEF", "", " F", False, 1, 0.3, ""),)
    )
    assert _verdict([one, second], "exam_ABCXDEF").holds is False
    # an exam the vocabulary cannot write is not measured, and says why
    missing = dataclasses.replace(
        two, prompt_exams=(ExamRow("ABCXDEF", "", " F", False, None, None, "no ' F'"),)
    )
    assert _verdict([one, missing], "exam_ABCXDEF").why == "no ' F'"


def test_a_switch_is_a_rise_at_the_second_layer_larger_than_what_follows():
    one, two = depth(1), depth(2)
    three = dataclasses.replace(depth(2), name="cpu-3l", n_layers=3)
    assert _verdict([one, two, three], "switch").holds is True
    # a ramp: 2 layers only halfway, 3 layers the rest
    half = depth(2, period_exams=exams(110, control=-1))
    v = _verdict([one, half, three], "switch")
    assert v.holds is False and v.number("later").value > v.number("rise").value


@pytest.mark.parametrize(
    ("falls", "holds"),
    [((0.1, 0.5, 0.2), True), ((0.6, 0.5, 0.2), False), ((None, 0.5, 0.2), None)],
)
def test_the_phase_change_meets_the_loss_drop_when_the_loss_falls_fastest_there(falls, holds):
    before, at, after = falls
    two = depth(2, phase=PhaseLoss(4000, 4250, 0.3, before, at, after))
    assert _verdict([depth(1), two], "phase_loss").holds is holds


def test_reliably_needs_every_seed_and_enough_of_them():
    good = verdicts([depth(1), depth(2)])
    bad = verdicts([depth(1), depth(2, period_exams=copier())])
    marks = {c.key: c for c in over_seeds((0, 1, 2), [good, good, good])}
    assert marks["reliably"].mark == Mark.REPRODUCED
    marks = {c.key: c for c in over_seeds((0, 1, 2), [good, bad, good])}
    assert marks["reliably"].mark == Mark.NOT_REPRODUCED
    assert marks["two_can"].mark == Mark.PARTLY and marks["two_can"].held == (0, 2)
    assert {c.key: c for c in over_seeds((0, 1), [good, good])}[
        "reliably"
    ].mark == Mark.NOT_MEASURED


def test_the_floors_are_thresholds_fields():
    one = depth(1, passage_order=Interval(0.04, 0.03, 0.05, 64, "t"))
    assert _verdict([one, depth(2)], "one_cannot").holds is True
    lower = dataclasses.replace(THRESHOLDS, passage_effect=0.03)
    assert _verdict([one, depth(2)], "one_cannot", lower).holds is False


def test_the_table_shows_the_post_ours_the_criterion_and_a_mark_per_setting():
    claims = over_seeds((0,), [verdicts([depth(1), depth(2)])])
    html = claims_table([("Curriculum", claims)])
    assert "82.92%" in html and "✓ reproduced" in html and "2 layers: 1st, p 80%" in html
    assert "not measured: GPT-2" in html and "p &lt; 0.05" in html
    lines = claim_lines("Curriculum", claims)
    assert lines[0].startswith("Curriculum: exam ABCXDEF ×3 → F: ✓ reproduced")


def test_the_markdown_table_gives_the_first_seed_beside_the_seeds_together():
    """claims.md (the README's table): per setting the first seed's mark and numbers, then over
    the seeds; a seed where "2 layers can" fails shows in the seeds' column, not the first's."""
    good = verdicts([depth(1), depth(2)])
    bad = verdicts([depth(1), depth(2, period_exams=copier())])
    claims = over_seeds((0, 1, 2), [good, bad, good])
    md = claims_markdown([("Curriculum", claims)]).splitlines()
    assert md[0] == (
        "| the post says | its number | Curriculum, seed 0 | Curriculum, 3 seeds: median (range) "
        "| reproduced when |"
    )
    assert len(md) == 2 + len(claims)
    (row,) = [r for r in md if r.startswith("| 2 layers can |")]
    seed0, together = row.split(" | ")[2:4]
    assert seed0.startswith("**✓ reproduced**") and together.startswith("**◐ in 2 of 3 seeds**")
    (row,) = [r for r in md if r.startswith("| reliably |")]
    assert "✗ not reproduced" in row.split(" | ")[2]  # "reliably" is over the seeds in both


def test_over_seeds_a_range_is_shown_only_where_the_seeds_differ():
    good = verdicts([depth(1), depth(2)])
    claims = {c.key: c for c in over_seeds((0, 1, 2), [good, good, good])}
    assert ours(claims["reliably"], "reliably") == "both rows above in 3 of 3 seeds"
    bad = verdicts([depth(1), depth(2, period_exams=copier())])
    two = {c.key: c for c in over_seeds((0, 1), [good, bad])}["two_can"]
    assert "(+0.0 pts–+84.3 pts)" in ours(two, "two_can")  # the seeds differ: median (range)
