"""The sentences of the study page and run reports, as pure functions of measurements.

:class:`DepthMeasurement` holds what a study measured on one model (:func:`measure_depth` reads
it off a trained run and its analyses); :func:`depth_sentence`, :func:`claim_sentence`,
:func:`deeper_sentence`, :func:`route_sentence` and :func:`data_mix_sentence` turn measurements
into words, with the thresholds of :mod:`interp_toolkit.causal.routes`. Nothing here is fixed
text about a result: change a number and the sentence changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp_toolkit.causal.routes import (
    BY_INPUT,
    INPUTS,
    Estimate,
    HeadRoute,
    ModelRoute,
    RouteName,
)
from interp_toolkit.causal.summary import CircuitSummary
from interp_toolkit.exams.periods import PeriodExam, with_chance
from interp_toolkit.exams.role_checks import RoleCheck, RoleChecks
from interp_toolkit.exams.verdict import exam_verdict, passes_rule
from interp_toolkit.heads.induction import first_induction_step
from interp_toolkit.reports.run_analysis import RunSummary
from interp_toolkit.runs.folder import Run
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.text.stream import setting_name


@dataclass(frozen=True)
class DepthMeasurement:
    """What a study measured on one model (one depth)."""

    name: str
    n_layers: int
    induction_heads: tuple[str, ...]  # heads with the induction role
    top_head: str  # the strongest induction head (layer >= 1), role or not
    top_score: float
    induction_step: int | None  # first scoring with a head past Thresholds.induction
    induction_tokens: int | None
    induction_minutes: float | None
    steps: int
    tokens: int
    train_minutes: float
    final_loss: float | None
    val_loss: float | None
    period_exams: tuple[PeriodExam, ...]  # the two-repeat exams at every period and kind
    route: ModelRoute
    circuit: CircuitSummary | None = None
    setting: str = ""  # the training setting (natural text | curriculum), from the run's data
    role_checks: RoleChecks | None = None  # the causal check of each role

    def heads_per_layer(self) -> list[int]:
        counts = [0] * self.n_layers
        for h in self.induction_heads:
            counts[int(h.split(".")[0])] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["period_exams"] = [e.to_dict() for e in self.period_exams]
        d["route"] = self.route.to_dict()
        d["circuit"] = None if self.circuit is None else self.circuit.to_dict()
        d["role_checks"] = None if self.role_checks is None else self.role_checks.to_dict()
        d["heads_per_layer"] = self.heads_per_layer()
        return d


def measure_depth(
    run: Run,
    summary: RunSummary,
    period_exams: Sequence[PeriodExam],
    route: ModelRoute,
    circuit: CircuitSummary | None = None,
    role_checks: RoleChecks | None = None,
) -> DepthMeasurement:
    """What the study page compares about one trained depth (from its metrics and analyses)."""
    rows = run.metrics()
    step = first_induction_step(rows, THRESHOLDS.induction)
    hit = next((r for r in rows if r["step"] == step), None)
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    return DepthMeasurement(
        name=run.name,
        n_layers=run.model_cfg.n_layers,
        induction_heads=tuple(summary.heads["induction"]),
        top_head=summary.top_induction.head,
        top_score=summary.top_induction.score,
        induction_step=step,
        induction_tokens=None if hit is None else int(hit["tokens"]),
        induction_minutes=None if hit is None else round(hit["elapsed_s"] / 60, 2),
        steps=int(rows[-1]["step"]) if rows else 0,
        tokens=int(rows[-1]["tokens"]) if rows else 0,
        train_minutes=round(rows[-1]["elapsed_s"] / 60, 2) if rows else 0.0,
        final_loss=summary.final_loss,
        val_loss=val[-1] if val else None,
        period_exams=tuple(period_exams),
        route=route,
        circuit=circuit,
        setting=_setting(run.settings),
        role_checks=role_checks,
    )


def _setting(settings: Mapping[str, Any]) -> str:
    """The run's training setting from its recorded data settings ("" when not recorded)."""
    data = settings.get("data") or {}
    return setting_name(data["repeat_fraction"]) if "repeat_fraction" in data else ""


def layers_phrase(n: int) -> str:
    return f"{n} layer{'s' if n != 1 else ''}"


def pct(x: float) -> str:
    return f"{100 * x:.0f}%" if round(100 * x, 1) == round(100 * x) else f"{100 * x:.1f}%"


#: How a token kind is named in sentences.
KIND_WORDS = {"letters": "letters", "random": "random tokens"}


def exam_phrase(exams: Sequence[PeriodExam], t: Thresholds = THRESHOLDS) -> str:
    """'passes 14 of 14 period exams (Wilson 95% lower bound ≥ 90%; periods 2..8 of letters and
    random tokens, 200 prompts each; lowest 96% [92.3%, 97.9%] at period 3, letters); above
    the untrained 2-layer model (same architecture) at 14 of 14 (McNemar, p < 0.0036)'."""
    v = exam_verdict(exams, t)
    lo, hi = v.periods
    w, iv = v.lowest, v.lowest.interval
    kinds = " and ".join(KIND_WORDS.get(k, k) for k in v.kinds)
    sizes = "/".join(str(n) for n in sorted({e.n_prompts for e in exams}))
    s = (
        f"passes {v.n_passing} of {v.n_exams} period exams (Wilson 95% lower bound ≥ "
        f"{pct(t.exam_lower_bound)}; periods {lo}..{hi} of {kinds}, {sizes} prompts each; lowest "
        f"{pct(w.pass_rate)} [{pct(iv.low)}, {pct(iv.high)}] at period {w.period}, "
        f"{KIND_WORDS.get(w.kind, w.kind)})"
    )
    for name, above in v.above.items():
        s += (
            f"; above the {name} at {len(above)} of {v.compared[name]} (McNemar, p < {v.alpha:.2g})"
        )
    return s if v.above else s + "; no chance level was measured"


def route_phrase(route: ModelRoute, t: Thresholds = THRESHOLDS) -> str:
    """The model's route by path, and what it was read from."""
    if route.name == RouteName.UNMEASURED:
        return f"route not measured ({route.reason})"
    if route.name == RouteName.NO_TASK:
        return (
            f"no route to name: the induction task's clean-corrupt gap is {route.gap} "
            f"(below {t.min_gap:g})"
        )
    deep = [h for h in route.heads if h.name != RouteName.NO_EARLIER]
    if not deep:
        return "no route to measure (no earlier layer to compose with)"
    parts = []
    for h in deep:
        if h.name == RouteName.NO_EFFECT:
            parts.append(
                f"{h.head} has no effect to route (resampling its output removes {h.effect} of "
                "the gap)"
            )
        elif h.carrying:
            carried = ", ".join(f"{INPUT_WORD[c]} {share(h.inputs[c], h)}" for c in h.carrying)
            parts.append(f"{h.head} via {carried} from {h.feeder}")
        else:
            best = max(INPUTS, key=lambda c: h.inputs[c].value)
            parts.append(
                f"{h.head} has no input that carries it (largest {INPUT_WORD[best]} "
                f"{share(h.inputs[best], h)})"
            )
    return f"route by path {route.name.value} ({'; '.join(parts)})"


INPUT_WORD = {"q": "query", "k": "key", "v": "value"}


def over_one(e: Estimate, h: HeadRoute) -> str:
    """The note a share of head ``h``'s effect above 1 carries ("" up to 1)."""
    if e.value <= 1:
        return ""
    return f" (share > 1: the path's effect exceeds the head's own total, {h.effect} of the gap)"


def share(e: Estimate, h: HeadRoute) -> str:
    """A share of head ``h``'s own effect as printed, with :func:`over_one`'s note. Not for a
    head without effect (its shares are not printed: "no effect to route")."""
    return f"{e}{over_one(e, h)}"


def route_clause(h: HeadRoute) -> str:
    """What a head's route is, as a verb phrase: 'runs on K-composition', 'runs on a mix of
    query and key', 'has no input that carries its induction', 'has no effect to route'."""
    if h.name in BY_INPUT.values():
        return f"runs on {h.name.value}"
    if h.name == RouteName.MIXED:
        return f"runs on a mix of {' and '.join(INPUT_WORD[c] for c in h.carrying)}"
    if h.name == RouteName.NOT_FOUND:
        return "has no input that carries its induction (route not found)"
    if h.name == RouteName.NO_EFFECT:
        return "has no effect to route"
    return f"has route {h.name.value!r}"


def route_sentence(run: str, h: HeadRoute, baseline: float, t: Thresholds = THRESHOLDS) -> str:
    """One induction head's route, with every number it was read from. The inputs' shares of
    the head's effect are printed only where that effect's interval lies above 0; a share above
    1 carries its note (:func:`share`)."""
    if h.name == RouteName.NO_EFFECT:
        return (
            f"{run}: induction head {h.head} has no effect to route: resampling its output from "
            f"the corrupt prompts removes {h.effect} of the induction gap, an interval that "
            "reaches 0, so no share of it is stated."
        )
    shares = ", ".join(f"{INPUT_WORD[c]} {share(h.inputs[c], h)}" for c in INPUTS)
    s = (
        f"{run}: induction head {h.head} {route_clause(h)}. Resampling its output from the "
        f"corrupt prompts removes {h.effect} of the induction gap; resampling every earlier "
        f"head's write into one of its inputs removes this share of that: {shares}"
    )
    ctl = h.control_effects()
    if ctl is None:
        s += "; no role-less earlier head to control with"
    else:
        worst = max(INPUTS, key=lambda c: ctl[c].high)
        s += f"; the control, role-less head {h.control}, removes at most {share(ctl[worst], h)}"
    if h.feeder is not None:
        main = max(h.carrying, key=lambda c: h.inputs[c].value)
        p = h.path(h.feeder, main)
        s += (
            f". The strongest path is {h.feeder} -> {h.head} ({INPUT_WORD[main]}), removing "
            f"{share(p.removed, h)}, {main.upper()}-composition score {p.composition:.3f} "
            f"(random {baseline:.3f})"
        )
    return s + f". An input carries it at ≥ {t.carries:g}, above the control's interval."


def depth_sentence(m: DepthMeasurement, t: Thresholds = THRESHOLDS) -> str:
    """One sentence per depth: induction head or not, when it formed, the exam, the route."""
    s = f"{layers_phrase(m.n_layers)} ({m.name}{', ' + m.setting if m.setting else ''}): "
    if m.induction_heads:
        s += f"induction head{'s' if len(m.induction_heads) > 1 else ''} {', '.join(m.induction_heads)}"
    else:
        s += f"no induction head (best head {m.top_head} scores {m.top_score:.2f})"
    if m.induction_step is not None:
        s += (
            f"; a head's induction score first passed {t.induction:g} at step {m.induction_step} "
            f"({m.induction_tokens / 1e6:.1f}M tokens, {m.induction_minutes:.1f} min)"
        )
    else:
        s += f"; no head's induction score passed {t.induction:g} in {m.steps} steps"
    s += f"; it {exam_phrase(m.period_exams, t)}"
    if m.n_layers > 1:
        s += f"; {route_phrase(m.route, t)}"
    if checked := role_check_phrase(m.role_checks):
        s += f"; {checked}"
    return s + "."


def _removed(c: RoleCheck) -> str:
    r = c.removed or Estimate(float("nan"), float("nan"), float("nan"))  # a tested check has one
    return f"{c.role} head {c.head} removes {pct(r.value)} [{pct(r.low)}, {pct(r.high)}] of {c.of}"


def _role_list(cs: Sequence[RoleCheck], at: int = 3) -> str:
    """Per role: each check with what it removed, or (more than ``at``) the heads and the range."""
    parts = []
    for role in dict.fromkeys(c.role for c in cs):
        mine = [c for c in cs if c.role == role]
        if len(mine) <= at:
            parts += [_removed(c) for c in mine]
            continue
        removed = [c.removed.value for c in mine if c.removed is not None]
        parts.append(
            f"{len(mine)} {role} heads ({', '.join(str(c.head) for c in mine)}), each removing "
            f"{pct(min(removed))} to {pct(max(removed))} alone"
        )
    return "; ".join(parts)


def role_check_phrase(rc: RoleChecks | None) -> str:
    """The causal check of a model's roles (:mod:`~interp_toolkit.exams.role_checks`): how many
    pass and which (what each removed, or a range when many), the flagged ones alike, the
    induction heads together, and the untestable ones with why ('' when nothing was checked)."""
    if rc is None or not rc.checks:
        return ""
    passing, flagged, untestable = rc.passing(), rc.flagged(), rc.untestable()
    s = (
        f"causal check of its roles (a role passes when ablating the head removes at least "
        f"{pct(rc.floor)} of what the role does, the interval above 0; {rc.n_passages} held-out "
        f"passages): {len(passing)} of {len(passing) + len(flagged)} pass"
    )
    if passing:
        s += f" ({_role_list(passing)})"
    if flagged:
        s += f"; flagged: {_role_list(flagged)}"
    n_ind = sum(c.role == "induction" and c.removed is not None for c in rc.checks)
    if rc.together is not None and n_ind > 1:
        s += f"; its {n_ind} induction heads together remove {pct(rc.together.value)}"
    for why in dict.fromkeys(c.why for c in untestable):
        heads = [f"{c.role} {c.head}" for c in untestable if c.why == why]
        s += f"; untestable: {', '.join(heads)} ({why})"
    return s


def one_layer_chance(ms: Sequence[DepthMeasurement]) -> list[DepthMeasurement]:
    """The measurements with the 1-layer model's exams added as a chance level to every deeper
    model's, where they sat the same prompts (:func:`~.period_exam.with_chance`)."""
    one = next((m for m in ms if m.n_layers == 1), None)
    if one is None:
        return list(ms)
    name = f"1-layer model {one.name}"
    return [
        m
        if m.n_layers == 1
        else dataclasses.replace(
            m, period_exams=tuple(with_chance(m.period_exams, one.period_exams, name))
        )
        for m in ms
    ]


def _where(ms: Sequence[DepthMeasurement]) -> str:
    """' (curriculum)': the settings the measurements were trained in ('' when not recorded)."""
    settings = sorted({m.setting for m in ms if m.setting})
    return f" ({', '.join(settings)})" if settings else ""


def _depths_phrase(ms: Sequence[DepthMeasurement]) -> str:
    """'1, 3 and 8 layers' (each depth once, in order)."""
    names = [str(n) for n in sorted({m.n_layers for m in ms})]
    joined = " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))
    return f"{joined} layer{'s' if names != ['1'] else ''}"


def claim_sentence(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> str:
    """The seed's claim ("induction appears reliably the moment we add a second layer") as a
    measured statement about 1 layer against 2: it holds when every 1-layer model has no
    induction head and passes no period exam, and every 2-layer model has an induction head and
    passes every one (pass rule: :func:`~interp_toolkit.exams.verdict.passes_rule`). Deeper
    models are not part of the claim: :func:`deeper_sentence` reports them."""
    one = [m for m in ms if m.n_layers == 1]
    two = [m for m in ms if m.n_layers == 2]
    where = _where(ms)
    if not one or not two:
        lacking = " and ".join(f"a {n}-layer model" for n, got in ((1, one), (2, two)) if not got)
        has = f"it has {_depths_phrase(ms)}" if ms else "it has no model"
        return (
            f"The seed's claim{where} needs a 1-layer and a 2-layer model: this study lacks "
            f"{lacking} ({has})."
        )
    problems = claim_problems(one, two, t)
    if problems:
        return f"The seed's claim does not hold as measured here{where}: {'; '.join(problems)}."
    each = " each" if len(two) > 1 else ""
    n_one = exam_verdict(one[0].period_exams, t).n_exams
    n_two = exam_verdict(two[0].period_exams, t).n_exams
    return (
        f"The seed's claim holds as measured here{where}: 1 layer has no induction head and "
        f"passes none of its {n_one} period exams; 2 layers{each} have an induction head "
        f"and pass all {n_two} (a period exam passes when the Wilson 95% lower bound of its "
        f"pass rate is ≥ {pct(t.exam_lower_bound)})."
    )


def claim_holds(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> bool:
    """Whether the seed's claim holds on ``ms`` (:func:`claim_sentence`'s rule)."""
    one = [m for m in ms if m.n_layers == 1]
    two = [m for m in ms if m.n_layers == 2]
    return bool(one and two) and not claim_problems(one, two, t)


def claim_problems(
    one: Sequence[DepthMeasurement], two: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS
) -> list[str]:
    """What keeps the claim from holding: the 1-layer models' induction heads or passed exams,
    the 2-layer models' missing induction head or missed exams (empty: it holds)."""
    problems = []
    for m in one:
        if m.induction_heads:
            problems.append(
                f"{layers_phrase(1)} has induction head(s) {', '.join(m.induction_heads)}"
            )
        v = exam_verdict(m.period_exams, t)
        if not v.none_pass:
            problems.append(f"{layers_phrase(1)} passes {v.n_passing} of {v.n_exams} period exams")
    for m in two:
        if not m.induction_heads:
            problems.append(f"{layers_phrase(2)} has no induction head")
        v = exam_verdict(m.period_exams, t)
        if not v.all_pass:
            w = v.lowest
            problems.append(
                f"{layers_phrase(2)} passes only {v.n_passing} of {v.n_exams} period "
                f"exams (lowest {pct(w.pass_rate)}, lower bound {pct(w.interval.low)}, at "
                f"period {w.period}, {KIND_WORDS.get(w.kind, w.kind)})"
            )
    return problems


def _periods(ps: Sequence[int]) -> str:
    return f"period{'s' if len(ps) > 1 else ''} {', '.join(str(p) for p in ps)}"


def missed_phrase(exams: Sequence[PeriodExam], t: Thresholds = THRESHOLDS) -> str:
    """Every period exam that misses the pass rule, by token kind, and the lowest of them:
    'misses letters at periods 2, 3 and random tokens at period 2; lowest 85%, lower bound
    79.4%, at period 2, letters' ('' when every exam passes)."""
    v = exam_verdict(exams, t)
    missed = [e for e in v.exams if not passes_rule(e, t)]
    if not missed:
        return ""
    by_kind = [
        f"{KIND_WORDS.get(k, k)} at {_periods(sorted(e.period for e in missed if e.kind == k))}"
        for k in v.kinds
        if any(e.kind == k for e in missed)
    ]
    w = v.lowest
    return (
        f"misses {' and '.join(by_kind)}; lowest {pct(w.pass_rate)}, lower bound "
        f"{pct(w.interval.low)}, at period {w.period}, {KIND_WORDS.get(w.kind, w.kind)}"
    )


def _deeper_clause(m: DepthMeasurement, t: Thresholds) -> str:
    """What one deeper model is: its induction heads, how long it trained past the step its
    induction score first passed the floor (from its own metrics), its period exams."""
    s = f"{layers_phrase(m.n_layers)} ({m.name}) "
    if m.induction_heads:
        s += (
            f"has induction head{'s' if len(m.induction_heads) > 1 else ''} "
            f"{', '.join(m.induction_heads)}"
        )
    else:
        s += f"has no induction head (best head {m.top_head} scores {m.top_score:.2f})"
    if m.induction_step is not None:
        s += (
            f", trained {m.steps - m.induction_step} steps past induction formation (a head's "
            f"induction score first passed {t.induction:g} at step {m.induction_step} of "
            f"{m.steps})"
        )
    else:
        s += f", no head's induction score passed {t.induction:g} in its {m.steps} steps"
    v = exam_verdict(m.period_exams, t)
    if v.all_pass:
        return s + f", and passes all {v.n_exams} period exams"
    return s + (
        f", and passes {v.n_passing} of {v.n_exams} period exams ({missed_phrase(m.period_exams, t)})"
    )


def deeper_sentence(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> str | None:
    """The models deeper than 2 layers, which the seed's claim does not cover, as measured:
    each one's induction heads, training past induction formation and every period exam it
    misses (None when the study has none)."""
    deep = [m for m in ms if m.n_layers > 2]
    if not deep:
        return None
    every = all(m.induction_heads and exam_verdict(m.period_exams, t).all_pass for m in deep)
    lead = f"Deeper models{_where(deep)}"
    if every:
        lead += (
            ", every one with an induction head and passing every period exam"
            if len(deep) > 1
            else ", with an induction head and passing every period exam"
        )
    return f"{lead}: {'; '.join(_deeper_clause(m, t) for m in deep)}."


def data_mix_sentence(settings: Mapping[str, Any], n_ctx: int) -> str:
    """What the model trained on, from a run's recorded settings (config.json ``settings``)."""
    data = settings.get("data") or {}
    rf = float(data.get("repeat_fraction", 0.0))
    corpus = data.get("corpus", "?")
    if rf == 0:
        return f"Training data: text from corpus {corpus!r} only (no synthetic windows)."
    span_max = data.get("span_max") or n_ctx // 2
    return (
        f"Training data: {pct(rf)} of every batch are synthetic windows (random tokens with a "
        f"span of {data.get('span_min', 2)}..{span_max} tokens repeating from a random start), "
        f"{pct(1 - rf)} text windows from corpus {corpus!r}."
    )


def study_findings(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> list[str]:
    """The study page's findings: the seed's claim (1 against 2 layers), the deeper models
    (where the study has any), then one sentence per depth."""
    ms = one_layer_chance(ms)
    deeper = deeper_sentence(ms, t)
    return [
        claim_sentence(ms, t),
        *([deeper] if deeper is not None else []),
        *(depth_sentence(m, t) for m in ms),
    ]
