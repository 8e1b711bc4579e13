"""The period exams' pass rule and verdict: a test, not a point estimate.

A period exam (one period, one token kind, :class:`~.period_exam.PeriodExam`) **passes** when the
lower bound of the Wilson 95% interval of its pass rate is at least
:attr:`~.routes.Thresholds.exam_lower_bound` (0.90): with 200 prompts, 190 passes (95%) give a
lower bound of 0.910 and pass; 186 (93%) give 0.886 and fail. A model is **above** a chance level
(another model on the same prompts: an untrained one, the study's 1-layer model) at an exam when
the exact one-sided McNemar p-value is below ``chance_alpha`` divided by the number of exams
(Bonferroni).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interp_toolkit.exams.periods import CHANCE_TEST, PeriodExam
from interp_toolkit.stats.intervals import Interval, mcnemar_greater, paired_difference
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds


def passes_rule(exam: PeriodExam, t: Thresholds = THRESHOLDS) -> bool:
    """Whether one period exam passes (see the module docstring)."""
    return exam.interval.low >= t.exam_lower_bound


def pass_rule(t: Thresholds = THRESHOLDS) -> str:
    """The pass rule in words (for pages and JSON)."""
    return (
        "a period exam passes when the lower bound of the Wilson 95% interval of its pass rate "
        f"is >= {t.exam_lower_bound:g}"
    )


def chance_rule(n_exams: int, t: Thresholds = THRESHOLDS) -> str:
    """When an exam is above a measured chance level, in words."""
    return (
        f"above a chance level (another model on the same prompts) when the {CHANCE_TEST} gives "
        f"p < {t.chance_alpha:g}/{n_exams} (Bonferroni over the {n_exams} exams)"
    )


@dataclass(frozen=True)
class ExamVerdict:
    """A model's period exams in numbers: those that pass, the weakest, and for each chance
    level measured (model name), the exams significantly above it and how many were compared."""

    exams: tuple[PeriodExam, ...]
    passing: tuple[PeriodExam, ...]
    lowest: PeriodExam  # the lowest Wilson lower bound (then the lowest period)
    above: dict[str, tuple[PeriodExam, ...]]
    compared: dict[str, int]
    alpha: float  # the per-exam level after Bonferroni

    @property
    def n_exams(self) -> int:
        return len(self.exams)

    @property
    def n_passing(self) -> int:
        return len(self.passing)

    @property
    def all_pass(self) -> bool:
        return self.n_passing == self.n_exams

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.kind for e in self.exams))

    @property
    def periods(self) -> tuple[int, int]:
        ps = [e.period for e in self.exams]
        return min(ps), max(ps)


def exam_verdict(exams: Sequence[PeriodExam], t: Thresholds = THRESHOLDS) -> ExamVerdict:
    if not exams:
        raise ValueError("exam_verdict needs at least one period exam")
    alpha = t.chance_alpha / len(exams)
    names = list(dict.fromkeys(c.model for e in exams for c in e.chance))
    above = {
        name: tuple(e for e in exams for c in e.chance if c.model == name and c.p_value < alpha)
        for name in names
    }
    compared = {name: sum(c.model == name for e in exams for c in e.chance) for name in names}
    return ExamVerdict(
        exams=tuple(exams),
        passing=tuple(e for e in exams if passes_rule(e, t)),
        lowest=min(exams, key=lambda e: (e.interval.low, e.period)),
        above=above,
        compared=compared,
        alpha=alpha,
    )


@dataclass(frozen=True)
class Pooled:
    """A model's top-1 rate over all its period exams pooled (every period and kind), and its
    **order effect**: the rate as is minus the rate under the order control, paired by prompt
    (:func:`~interp_toolkit.stats.intervals.paired_difference`), with the exact one-sided McNemar
    p-value; None where the control was not sat."""

    passes: int
    n_prompts: int
    order_effect: Interval | None
    order_p: float | None

    @property
    def rate(self) -> float:
        return self.passes / self.n_prompts


def pooled(exams: Sequence[PeriodExam]) -> Pooled:
    """:class:`Pooled` of ``exams`` (the order effect only when every exam sat its control)."""
    if not exams:
        raise ValueError("pooled needs at least one period exam")
    as_is = [r == 0 for e in exams for r in e.ranks]
    effect = p = None
    if all(e.control_ranks for e in exams):
        control = [r == 0 for e in exams for r in e.control_ranks]
        effect, p = paired_difference(as_is, control), mcnemar_greater(as_is, control)
    return Pooled(sum(as_is), len(as_is), effect, p)


def pooled_against(
    exams: Sequence[PeriodExam], other: Sequence[PeriodExam]
) -> tuple[Interval, float] | None:
    """``exams``' pooled top-1 minus ``other``'s on the prompts both sat (same kind, period and
    prompt digest), paired, with the exact one-sided McNemar p-value that ``exams`` pass more;
    None when they share no exam."""
    by_key = {e.key: e for e in other}
    pairs = [(e, by_key[e.key]) for e in exams if e.same_prompts(by_key.get(e.key))]
    if not pairs or not any(e.ranks for e, _ in pairs):
        return None
    a = [r == 0 for e, _ in pairs for r in e.ranks]
    b = [r == 0 for _, o in pairs for r in o.ranks]
    return paired_difference(a, b), mcnemar_greater(a, b)


def shows_induction(effect: Interval, floor: float) -> bool:
    """The rule every order effect and every "above the 1-layer model" reads: the effect is at
    least ``floor`` and its 95% interval lies above 0 (docs/study.md section 0)."""
    return effect.estimate >= floor and effect.low > 0
