"""The sentences that stay sentences, and the 90% rule (a named, secondary finding), are
functions of the measurements: hand-made measurements in, the words change when the numbers do.
The claims' rules: tests/unit/measures/test_claims.py."""

from __future__ import annotations

import dataclasses

from findings_helpers import KINDS, PERIODS, UNTRAINED, N, copier, exam, exams, route

from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.reports.findings import data_mix_sentence, route_phrase


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
    assert c.n_passing == 0 and len(c.above[UNTRAINED]) == 30
    # the same untrained model passing as often: nothing is above it
    same = exam_verdict(tuple(exam(k, p, N // p, N // p) for k in KINDS for p in PERIODS))
    assert same.above[UNTRAINED] == ()


def test_data_mix_sentence_reads_the_recorded_settings():
    settings = {
        "data": {"corpus": "stdlib", "repeat_fraction": 0.9, "span_min": 2, "span_max": None}
    }
    s = data_mix_sentence(settings, 32)
    assert "90% of every batch are synthetic" in s and "2..16 tokens" in s and "10% text" in s
    assert "text from corpus 'stdlib' only" in data_mix_sentence(
        {"data": {"corpus": "stdlib", "repeat_fraction": 0.0}}, 32
    )


def test_a_share_above_one_is_starred_and_explained_once():
    from interp_toolkit.causal.routes import Estimate

    r = route("k")
    (h,) = r.heads
    big = dataclasses.replace(h, inputs={**h.inputs, "k": Estimate(1.2, 1.1, 1.3)})
    words = route_phrase(dataclasses.replace(r, heads=(big,)))
    assert "1.20 [1.10, 1.30]*" in words and words.count("a share above 1") == 1
    assert "*" not in route_phrase(r) and "a share above 1" not in route_phrase(r)
