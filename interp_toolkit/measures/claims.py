"""The original post's claims, checked as it states them: one rule per claim, from a setting's
depth measurements to a typed :class:`Verdict` (docs/study.md section 0, where each criterion was
written before it was measured). Rendering is :mod:`interp_toolkit.reports.claims`'.

The post (the blog post "Mechanistic Interpretability"): attention-only transformers of 1, 2, 3
and 8 layers; "1 layer cannot do induction, 2 layers can, reliably; a switch, not a ramp". Each
rule compares our 1-layer model with our 2-layer model (or deeper ones), as the post compares its
own; the post's numbers (:data:`POST`) are shown beside ours, never used as a bar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from interp_toolkit.exams.verdict import pooled, pooled_against, shows_induction
from interp_toolkit.files.serialize import json_field
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.stats.intervals import Interval
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds

#: The post's exam probabilities: (exam, its period, the model's layers, p(target)).
POST_EXAMS: tuple[tuple[str, int, int, float], ...] = (
    ("ABCXDEF", 7, 2, 0.8292),
    ("ABCXDEF", 7, 1, 0.0070),
    ("ABCD", 4, 2, 0.4164),
)


class Mark(str, Enum):
    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    PARTLY = "partly"  # over seeds: held in some, not all
    NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Number:
    """One number a verdict read: ``kind`` says how it prints (``rank``: 1-based; ``prob``,
    ``rate``: a share; ``points``: a difference of shares; ``nats``; ``fall``: nats per 1,000
    steps; ``p``; ``count``; ``step``), with its 95% interval where it has one."""

    name: str
    value: float | int | None
    kind: str
    low: float | int | None = None
    high: float | int | None = None


@dataclass(frozen=True)
class Verdict:
    """One claim on one seed's measurements of one setting: ``holds`` (None: not measured, and
    ``why``) and the numbers the rule read."""

    key: str
    holds: bool | None
    numbers: tuple[Number, ...] = ()
    why: str = ""

    def number(self, name: str) -> Number | None:
        return next((n for n in self.numbers if n.name == name), None)


def _depth(ms: Sequence[DepthMeasurement], n: int) -> DepthMeasurement | None:
    return next((m for m in ms if m.n_layers == n), None)


def _missing(key: str, *layers: int) -> Verdict:
    names = " and no ".join(f"{n}-layer model" for n in layers)
    return Verdict(key, None, why=f"this setting has no {names}")


def exam_rule(exam: str) -> Callable[[Sequence[DepthMeasurement], Thresholds], Verdict]:
    """The post's exam ``exam``: the 2-layer model ranks the target 1st and the 1-layer model
    does not."""
    key = f"exam_{exam}"

    def rule(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
        one, two = _depth(ms, 1), _depth(ms, 2)
        if one is None or two is None:
            return _missing(key, *(n for n, m in ((1, one), (2, two)) if m is None))
        e1, e2 = one.prompt_exam(exam), two.prompt_exam(exam)
        if e1 is None or e2 is None or e1.rank is None or e2.rank is None:
            why = next((e.error for e in (e1, e2) if e is not None and e.error), "")
            return Verdict(key, None, why=why or f"the exam {exam} was not sat")
        numbers = (
            Number("rank1", e1.rank + 1, "rank"),
            Number("p1", e1.prob, "prob"),
            Number("rank2", e2.rank + 1, "rank"),
            Number("p2", e2.prob, "prob"),
        )
        return Verdict(key, e2.rank == 0 and e1.rank > 0, numbers)

    return rule


def _effect(name: str, iv: Interval | None, kind: str) -> Number:
    if iv is None:
        return Number(name, None, kind)
    return Number(name, iv.estimate, kind, iv.low, iv.high)


def one_layer_cannot(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
    """No head of the 1-layer model has the induction role, and neither order effect (exams,
    passages) shows induction."""
    one = _depth(ms, 1)
    if one is None:
        return _missing("one_cannot", 1)
    exam = pooled(one.period_exams).order_effect if one.period_exams else None
    passage = one.passage_order
    numbers = (
        Number("roles", len(one.induction_heads), "count"),
        _effect("exam_effect", exam, "points"),
        _effect("passage_effect", passage, "nats"),
    )
    if exam is None or passage is None:
        what = "period exams' order control" if exam is None else "passage order effect"
        return Verdict("one_cannot", None, numbers, f"the 1-layer model's {what} was not measured")
    holds = (
        not one.induction_heads
        and not shows_induction(exam, t.induction_effect)
        and not shows_induction(passage, t.passage_effect)
    )
    return Verdict("one_cannot", holds, numbers)


def two_layers_can(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
    """A head of the 2-layer model has the induction role and passes its causal check, and its
    pooled top-1 is above the 1-layer model's on the same prompts (McNemar p < chance_alpha and a
    difference of at least induction_effect)."""
    one, two = _depth(ms, 1), _depth(ms, 2)
    if one is None or two is None:
        return _missing("two_can", *(n for n, m in ((1, one), (2, two)) if m is None))
    rc = two.role_checks
    checked = [] if rc is None else [c for c in rc.passing() if c.role == "induction"]
    against = pooled_against(two.period_exams, one.period_exams)
    numbers = (
        Number("roles", len(two.induction_heads), "count"),
        Number("checked", len(checked), "count"),
        _effect("difference", None if against is None else against[0], "points"),
        Number("p", None if against is None else against[1], "p"),
    )
    if against is None:
        return Verdict("two_can", None, numbers, "the 1- and 2-layer models sat no common exam")
    diff, p = against
    holds = bool(checked) and p < t.chance_alpha and diff.estimate >= t.induction_effect
    return Verdict("two_can", holds, numbers)


def switch_not_ramp(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
    """The 1->2-layer rise in pooled top-1 is at least induction_effect and larger than the
    changes from 2 layers on together (absolute)."""
    depths = sorted((m for m in ms if m.period_exams), key=lambda m: m.n_layers)
    layers = [m.n_layers for m in depths]
    if 1 not in layers or 2 not in layers or layers[-1] <= 2:
        return Verdict("switch", None, why="it needs a 1-, a 2- and a deeper model in one setting")
    rates = {m.n_layers: pooled(m.period_exams).rate for m in depths}
    rise = rates[2] - rates[1]
    deeper = [n for n in layers if n >= 2]
    later = sum(abs(rates[b] - rates[a]) for a, b in zip(deeper, deeper[1:], strict=False))
    numbers = (
        *(Number(f"top1_{n}", rates[n], "rate") for n in layers),
        Number("rise", rise, "points"),
        Number("later", later, "points"),
    )
    return Verdict("switch", rise >= t.induction_effect and rise > later, numbers)


def phase_meets_loss(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
    """The training loss falls faster over the 2-layer run's phase change than over the scoring
    intervals just before and after it."""
    two = _depth(ms, 2)
    if two is None:
        return _missing("phase_loss", 2)
    ph = two.phase
    if ph is None:
        return Verdict("phase_loss", None, why="the 2-layer run has no phase change")
    numbers = (
        Number("start", ph.start, "step"),
        Number("end", ph.end, "step"),
        Number("fall_before", ph.fall_before, "fall"),
        Number("fall_at", ph.fall_at, "fall"),
        Number("fall_after", ph.fall_after, "fall"),
    )
    falls = (ph.fall_before, ph.fall_at, ph.fall_after)
    if any(f is None for f in falls):
        why = "the phase change has no scoring interval on both sides with logged losses"
        return Verdict("phase_loss", None, numbers, why)
    before, at, after = (float(f) for f in falls)  # type: ignore[arg-type]
    return Verdict("phase_loss", at > before and at > after, numbers)


def gpt2_heads(ms: Sequence[DepthMeasurement], t: Thresholds) -> Verdict:
    return Verdict(
        "gpt2",
        None,
        why="GPT-2's weights cannot be downloaded on this machine (`interp-toolkit heads gpt2` "
        "measures them where they can)",
    )


@dataclass(frozen=True)
class Claim:
    """One statement of the post: its words, its number(s), and the rule that checks it."""

    key: str
    statement: str
    post: str
    rule: Callable[[Sequence[DepthMeasurement], Thresholds], Verdict] | None
    template: str  # the key of its template (reports/claims.py)


#: The post's claims in the order the table lists them ("reliably" is read over seeds).
CLAIMS: tuple[Claim, ...] = (
    Claim("exam_ABCXDEF", "exam ABCXDEF ×3 → F", "1 layer: F 25th (0.70%); 2 layers: 1st (82.92%)", exam_rule("ABCXDEF"), "exam"),
    Claim("exam_ABCD", "exam ABCD ×4 + ABC → D", "1 layer: D 10th; 2 layers: 1st (41.64%)", exam_rule("ABCD"), "exam"),
    Claim("one_cannot", "1 layer cannot do induction", "its 1-layer model fails both exams", one_layer_cannot, "one_cannot"),
    Claim("two_can", "2 layers can", "its 2-layer model passes both", two_layers_can, "two_can"),
    Claim("reliably", "reliably", "“reliably” (no count)", None, "reliably"),
    Claim("switch", "a switch, not a ramp", "induction arrives with the second layer", switch_not_ramp, "switch"),
    Claim("phase_loss", "the phase change meets the loss drop", "induction heads form where the loss drops", phase_meets_loss, "phase_loss"),
    Claim("gpt2", "GPT-2 small's heads", "previous-token 4.11 (2.2); induction 5.1, 5.5, 6.9, 7.2, 7.10", gpt2_heads, "gpt2"),
)  # fmt: skip


def verdicts(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> tuple[Verdict, ...]:
    """Every claim with a rule, on one seed's depths of one setting ("reliably" needs seeds:
    :func:`over_seeds`)."""
    why = "one seed: `reproduce --seeds 5` measures it"
    return tuple(Verdict(c.key, None, why=why) if c.rule is None else c.rule(ms, t) for c in CLAIMS)


@dataclass(frozen=True)
class ClaimOverSeeds:
    """One claim over seeds: each seed's verdict and the mark they give together."""

    key: str = field(metadata=json_field(skip=True))
    seeds: tuple[int, ...] = field(metadata=json_field(skip=True))
    verdicts: tuple[Verdict, ...] = field(metadata=json_field(skip=True))

    json_extra = ("mark", "held", "measured", "why")  # study.json's settings[].claims[key]

    @property
    def held(self) -> tuple[int, ...]:
        return tuple(s for s, v in zip(self.seeds, self.verdicts, strict=True) if v.holds)

    @property
    def measured(self) -> tuple[int, ...]:
        return tuple(
            s for s, v in zip(self.seeds, self.verdicts, strict=True) if v.holds is not None
        )

    @property
    def mark(self) -> Mark:
        if not self.measured:
            return Mark.NOT_MEASURED
        if len(self.held) == len(self.seeds):
            return Mark.REPRODUCED
        return Mark.NOT_REPRODUCED if not self.held else Mark.PARTLY

    @property
    def why(self) -> str:
        return next((v.why for v in self.verdicts if v.why), "")


def reliably(
    seeds: Sequence[int], per_seed: Sequence[Sequence[Verdict]], t: Thresholds = THRESHOLDS
) -> Verdict:
    """Both "1 layer cannot" and "2 layers can" hold in every seed, over at least ``min_seeds``."""
    both = [
        sum(bool(v.holds) for v in vs if v.key in ("one_cannot", "two_can")) == 2 for vs in per_seed
    ]
    numbers = (Number("held", sum(both), "count"), Number("seeds", len(seeds), "count"))
    if len(seeds) < t.min_seeds:
        why = f"{len(seeds)} seed{'s' * (len(seeds) != 1)}: it needs {t.min_seeds} or more (`reproduce --seeds 5`)"
        return Verdict("reliably", None, numbers, why)
    return Verdict("reliably", all(both), numbers)


def over_seeds(
    seeds: Sequence[int], per_seed: Sequence[Sequence[Verdict]], t: Thresholds = THRESHOLDS
) -> tuple[ClaimOverSeeds, ...]:
    """Every claim over the seeds (``per_seed[i]``: :func:`verdicts` of seed ``seeds[i]``);
    "reliably" is one verdict over all of them, repeated per seed for the table."""
    seeds = tuple(seeds)
    both = (reliably(seeds, per_seed, t),) * len(seeds)
    by_key = [{v.key: v for v in vs} for vs in per_seed]
    return tuple(
        ClaimOverSeeds(
            c.key, seeds, both if c.key == "reliably" else tuple(k[c.key] for k in by_key)
        )
        for c in CLAIMS
    )
