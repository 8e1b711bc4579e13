"""The study's sentences and verdicts are functions of the measurements: hand-made measurements in,
and the words change when the numbers do."""

from __future__ import annotations

import dataclasses

import pytest
from findings_helpers import KINDS, PERIODS, UNTRAINED, N, copier, depth, exam, exams, route

from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.reports.findings import (
    claim_sentence,
    data_mix_sentence,
    deeper_sentence,
    depth_sentence,
    missed_phrase,
    one_layer_chance,
    study_findings,
)
from interp_toolkit.stats.thresholds import THRESHOLDS


def test_exam_verdict_is_a_test_on_the_wilson_lower_bound():
    """190/200 (lower bound 0.910) passes, 186/200 (0.886) fails: the rule reads the interval,
    not the point (both are above 90%)."""
    v = exam_verdict(exams({("letters", 3): 186, ("random", 9): 190}))
    assert (v.n_passing, v.n_exams) == (29, 30)
    assert v.lowest.key == ("letters", 3) and not v.all_pass
    assert abs(v.lowest.interval.low - 0.8859) < 1e-4
    # above the untrained model (0 passes on the same prompts) at every exam, Bonferroni over 30
    assert len(v.above[UNTRAINED]) == 30 and v.compared[UNTRAINED] == 30
    assert abs(v.alpha - 0.05 / 30) < 1e-12
    c = exam_verdict(copier())
    # even 200 // 16 = 12 discordant prompts give p = 2^-12 = 2.4e-4 < 0.05/30 = 1.7e-3
    assert c.none_pass and len(c.above[UNTRAINED]) == 30
    # the same untrained model passing as often: nothing is above it
    same = exam_verdict(tuple(exam(k, p, N // p, N // p) for k in KINDS for p in PERIODS))
    assert same.above[UNTRAINED] == ()


@pytest.mark.parametrize(("passes", "holds"), [(190, True), (186, False)])
def test_the_claim_flips_when_a_pass_rate_crosses_the_rule(passes, holds):
    one, two = depth(1), depth(2, period_exams=exams({("random", 16): passes}))
    claim = claim_sentence([one, two])
    assert claim.startswith("The seed's claim holds") is holds, claim
    if not holds:
        assert (
            "2 layers passes only 29 of 30 period exams (lowest 93%, lower bound 88.6%, at period "
            "16, random tokens)" in claim
        )
    # the rule is one Thresholds field: a lower bar lets 186/200 pass
    assert claim_sentence(
        [one, two], dataclasses.replace(THRESHOLDS, exam_lower_bound=0.85)
    ).startswith("The seed's claim holds")
    # and the 1-layer side: one exam crossing the rule breaks the claim
    lucky = dataclasses.replace(one, period_exams=(exam("letters", 2, passes), *copier()[1:]))
    broken = claim_sentence([lucky, depth(2)])
    assert broken.startswith("The seed's claim holds") is not holds or not holds
    assert ("1 layer passes 1 of 30 period exams" in broken) is holds


def test_sentences_follow_the_measurements():
    one, two = depth(1), depth(2)
    s = depth_sentence(two)
    assert "induction heads 1.0, 1.2" in s and "step 350" in s and "1.4M tokens" in s
    assert "it passes 30 of 30 period exams" in s and "route by path K-composition" in s
    assert f"above the {UNTRAINED} at 30 of 30" in s
    assert "1.1 via key 0.90 [0.85, 0.95] from 0.0" in s
    assert "no induction head (best head 0.3 scores 0.08)" in depth_sentence(one)
    assert "passes 0 of 30 period exams" in depth_sentence(one)
    assert claim_sentence([one, two]).startswith("The seed's claim holds")

    # swap in other measurements: every changed number changes the words
    later = dataclasses.replace(two, induction_step=500, induction_tokens=2_048_000)
    assert "step 500" in depth_sentence(later) and "2.0M tokens" in depth_sentence(later)
    weak = dataclasses.replace(two, period_exams=exams({("letters", 2): 180}))
    assert "29 of 30 period exams" in depth_sentence(
        weak
    ) and "lowest 90% [85.1%, 93.4%] at period 2" in (depth_sentence(weak))
    assert claim_sentence([one, weak]) == (
        "The seed's claim does not hold as measured here: 2 layers passes only 29 of 30 period "
        "exams (lowest 90%, lower bound 85.1%, at period 2, letters)."
    )
    q = dataclasses.replace(two, route=route("q"))
    assert "route by path Q-composition" in depth_sentence(q)
    lost = dataclasses.replace(two, route=route(None))
    assert "route by path not found" in depth_sentence(lost)
    none = dataclasses.replace(two, induction_heads=(), induction_step=None)
    assert "no induction head" in depth_sentence(none) and "in 550 steps" in depth_sentence(none)
    assert "2 layers has no induction head" in claim_sentence([one, none])
    found = study_findings([one, two])
    assert found[1] == depth_sentence(one)
    # the study pairs the deeper model's exams with the 1-layer model's, on the same prompts
    assert "above the 1-layer model cpu-1l at 30 of 30" in found[2]
    assert "above the 1-layer model" not in depth_sentence(two)


def test_data_mix_sentence_reads_the_recorded_settings():
    settings = {
        "data": {"corpus": "stdlib", "repeat_fraction": 0.9, "span_min": 2, "span_max": None}
    }
    s = data_mix_sentence(settings, 32)
    assert "90% of every batch are synthetic" in s and "2..16 tokens" in s and "10% text" in s
    assert "text from corpus 'stdlib' only" in data_mix_sentence(
        {"data": {"corpus": "stdlib", "repeat_fraction": 0.0}}, 32
    )


def test_the_claim_is_one_layer_against_two_and_deeper_models_come_second():
    """1 against 2 layers holds; the 3-layer model misses the rule at periods 2 and 3 (both
    kinds): the claim says "holds" first, the deeper models' sentence names every miss next."""
    one, two = depth(1, setting="curriculum"), depth(2, setting="curriculum")
    misses = {("letters", 2): 80, ("letters", 3): 150, ("random", 2): 170, ("random", 3): 186}
    three = depth(
        3, setting="curriculum", induction_heads=("1.2", "2.0"), period_exams=exams(misses)
    )
    found = study_findings([one, two, three])
    assert found[0] == (
        "The seed's claim holds as measured here (curriculum): 1 layer has no induction head and "
        "passes none of its 30 period exams; 2 layers have an induction head and pass all 30 (a "
        "period exam passes when the Wilson 95% lower bound of its pass rate is ≥ 90%)."
    )
    assert found[1] == (
        "Deeper models (curriculum): 3 layers (cpu-3l) has induction heads 1.2, 2.0, trained 200 "
        "steps past induction formation (a head's induction score first passed 0.4 at step 350 "
        "of 550), and passes 26 of 30 period exams (misses letters at periods 2, 3 and random "
        "tokens at periods 2, 3; lowest 40%, lower bound 33.5%, at period 2, letters)."
    )
    assert found[2:] == [depth_sentence(m) for m in one_layer_chance([one, two, three])]
    # the same deeper model under "does not hold" when the 2-layer model misses instead
    weak = dataclasses.replace(two, period_exams=exams({("random", 5): 150}))
    found = study_findings([one, weak, three])
    assert found[0].startswith("The seed's claim does not hold as measured here (curriculum): ")
    assert "2 layers passes only 29 of 30 period exams" in found[0]
    assert "3 layers" not in found[0] and found[1].startswith("Deeper models (curriculum): 3 ")
    # a 2-layer model without induction heads breaks it too, whatever the deeper ones do
    bare = dataclasses.replace(two, induction_heads=())
    assert claim_sentence([one, bare, depth(3)]) == (
        "The seed's claim does not hold as measured here (curriculum): 2 layers has no "
        "induction head."
    )


def test_the_deeper_sentence_follows_each_deeper_model():
    deep = [depth(n) for n in (2, 3, 8)]
    # every deeper model passes everything: said once, and each is still named
    s = deeper_sentence([depth(1), *deep])
    assert s is not None and s.startswith(
        "Deeper models, every one with an induction head and passing every period exam: "
        "3 layers (cpu-3l) has induction heads 1.0, 1.2"
    )
    assert "; 8 layers (cpu-8l) has induction heads 1.0, 1.2" in s
    assert s.count(", and passes all 30 period exams") == 2
    assert "2 layers" not in s
    # the claim names only 2 layers
    assert "; 2 layers have an induction head" in claim_sentence([depth(1), *deep])
    assert "3 layers" not in claim_sentence([depth(1), *deep])
    # no deeper model: no sentence, and the page has the claim and one sentence per depth
    assert deeper_sentence([depth(1), deep[0]]) is None
    assert len(study_findings([depth(1), deep[0]])) == 3
    # steps past induction formation are the measurement's own steps (never a fixed 200)
    longer = dataclasses.replace(deep[1], steps=900)
    assert "trained 550 steps past induction formation" in deeper_sentence([longer])
    assert "first passed 0.4 at step 350 of 900" in deeper_sentence([longer])
    # a deeper model whose score never passed the floor: no steps-past-induction, its steps
    none = dataclasses.replace(deep[2], induction_heads=(), induction_step=None, top_score=0.12)
    t = deeper_sentence([deep[1], none])
    assert t.startswith("Deeper models: 3 layers") and "every one" not in t
    assert (
        "8 layers (cpu-8l) has no induction head (best head 1.2 scores 0.12), no head's "
        "induction score passed 0.4 in its 550 steps, and passes all 30 period exams." in t
    )
    assert "past induction formation" not in t.split("; 8 layers")[1]
    # a single miss: one kind, one period; every miss is listed
    one_miss = dataclasses.replace(deep[2], period_exams=exams({("random", 4): 100}))
    assert "passes 29 of 30 period exams (misses random tokens at period 4; lowest 50%, " in (
        deeper_sentence([one_miss])
    )
    assert missed_phrase(exams(N)) == ""
    many = {("letters", p): 150 for p in (2, 3, 4, 9)}
    assert missed_phrase(exams(many)).startswith("misses letters at periods 2, 3, 4, 9; ")


def test_the_claim_needs_a_one_and_a_two_layer_model():
    deep = [depth(n, setting="curriculum") for n in (3, 8)]
    assert claim_sentence([depth(1, setting="curriculum"), *deep]) == (
        "The seed's claim (curriculum) needs a 1-layer and a 2-layer model: this study lacks a "
        "2-layer model (it has 1, 3 and 8 layers)."
    )
    assert claim_sentence([depth(2), *deep]).endswith(
        "this study lacks a 1-layer model (it has 2, 3 and 8 layers)."
    )
    assert "(it has 1 layer)." in claim_sentence([depth(1)])
    # the deeper models are still reported after it
    found = study_findings(deep)
    assert "needs a 1-layer and a 2-layer model" in found[0]
    assert found[1].startswith("Deeper models (curriculum), every one with an induction head")
