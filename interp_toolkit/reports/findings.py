"""The sentences of the study page and run reports, as pure functions of measurements.

:class:`DepthMeasurement` holds what a study measured on one model (:func:`measure_depth` reads
it off a trained run and its analyses); :func:`depth_sentence`, :func:`claim_sentence`,
:func:`deeper_sentence`, :func:`route_sentence` and :func:`data_mix_sentence` turn measurements
into words, with the thresholds of :mod:`interp_toolkit.causal.routes`. Nothing here is fixed
text about a result: change a number and the sentence changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from interp_toolkit.causal.routes import INPUTS, Estimate, ModelRoute, RouteName
from interp_toolkit.exams.periods import PeriodExam
from interp_toolkit.exams.role_checks import RoleCheck, RoleChecks
from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.measures.registry import percent as pct
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds


def layers_phrase(n: int) -> str:
    return f"{n} layer{'s' if n != 1 else ''}"


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
            carried = ", ".join(f"{INPUT_WORD[c]} {share(h.inputs[c])}" for c in h.carrying)
            parts.append(f"{h.head} via {carried} from {h.feeder}")
        else:
            best = max(INPUTS, key=lambda c: h.inputs[c].value)
            parts.append(
                f"{h.head} has no input that carries it (largest {INPUT_WORD[best]} "
                f"{share(h.inputs[best])})"
            )
    return starred(f"route by path {route.name.value} ({'; '.join(parts)})")


INPUT_WORD = {"q": "query", "k": "key", "v": "value"}


#: A share of an induction head's effect above 1 is printed with a star; the note says why, once.
OVER_ONE = (
    "* a share above 1: the path's effect exceeds the head's own total (its effect, the share "
    "of the task's gap that resampling its output removes)"
)


def over_one(e: Estimate) -> str:
    """The star a share of a head's effect above 1 carries ("" up to 1): :data:`OVER_ONE`."""
    return "*" if e.value > 1 else ""


def share(e: Estimate) -> str:
    """A share of a head's own effect as printed, starred above 1 (:data:`OVER_ONE`). Not for a
    head without effect (its shares are not printed: "no effect to route")."""
    return f"{e}{over_one(e)}"


def starred(words: str) -> str:
    """``words``, with :data:`OVER_ONE` after them once when a share in them is starred."""
    return f"{words} ({OVER_ONE})" if "*" in words else words


def interval_pct(e: Estimate) -> str:
    """'12% [8%, 15%]': an estimate and its interval as percentages."""
    return f"{pct(e.value)} [{pct(e.low)}, {pct(e.high)}]"


def _removed(c: RoleCheck) -> str:
    r = c.removed or Estimate(float("nan"), float("nan"), float("nan"))  # a tested check has one
    return f"{c.role} head {c.head} removes {interval_pct(r)} of {c.of}"


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
