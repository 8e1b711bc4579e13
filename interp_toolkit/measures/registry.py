"""The registry of measures: every number the study's tables show about one run, as one entry
each (the ``SCORES`` pattern of :mod:`interp_toolkit.heads.registry`).

A :class:`Measure` names the measure (its key in study.json), says how it is read from a
:class:`~interp_toolkit.measures.depth.DepthMeasurement`, how a value prints, its label, whether
higher is better, and how it goes over seeds (:data:`Kind`: the median and range of a
``value``, the seeds a ``held`` yes/no held in, the count of each category of a ``tally``). The
study's depth table, the over-seeds table (:mod:`.seeds`), study.json's ``over_seeds`` and the
claims table read this registry: a new measure is one entry (and its test).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from interp_toolkit.exams.verdict import exam_verdict, pooled
from interp_toolkit.measures.depth import DepthMeasurement

#: How a measure goes over seeds: ``value`` (a number: median and range), ``held`` (a yes/no:
#: the seeds it held in; None where a seed cannot say), ``tally`` (a category: how many seeds
#: gave each).
Kind = Literal["value", "held", "tally"]

Value = float | int | bool | str | None


def number(digits: int) -> Callable[[float], str]:
    return lambda v: f"{v:,.{digits}f}"


def percent(v: float) -> str:
    return f"{100 * v:.0f}%" if round(100 * v, 1) == round(100 * v) else f"{100 * v:.1f}%"


def points(v: float) -> str:
    """A difference of two rates, in percentage points."""
    return f"{100 * v:+.1f} points"


@dataclass(frozen=True)
class Measure:
    """One measure of a run: ``read`` it from a depth's measurement (None: not produced there),
    print it with ``fmt``; ``study_table``: whether the one-seed depth table shows it."""

    name: str
    label: str
    read: Callable[[DepthMeasurement], Value]
    fmt: Callable[[float], str] = number(3)
    kind: Kind = "value"
    unit: str = ""
    higher_is_better: bool | None = None
    study_table: bool = True

    def show(self, value: Value) -> str:
        """One seed's value as a cell ('—' when not produced)."""
        if value is None:
            return "—"
        if self.kind == "held":
            return "yes" if value else "no"
        if self.kind == "tally":
            return str(value)
        return self.fmt(float(value))


def _k_share(m: DepthMeasurement) -> float | None:
    """The K input's share of the strongest routed head's effect."""
    heads = [h for h in m.route.heads if h.inputs]
    if not heads:
        return None
    return max(heads, key=lambda h: h.effect.value).inputs["k"].value


def _check_share(m: DepthMeasurement) -> float | None:
    """The share of testable roles that pass their causal check."""
    rc = m.role_checks
    if rc is None or not (tested := len(rc.passing()) + len(rc.flagged())):
        return None
    return len(rc.passing()) / tested


def _all_roles_pass(m: DepthMeasurement) -> bool | None:
    """Every testable role passes its causal check (None: no testable role)."""
    return None if m.role_checks is None or _check_share(m) is None else not m.role_checks.flagged()


def _probe_accuracy(m: DepthMeasurement) -> float | None:
    """The previous-token probe after attention layer 0 (balanced accuracy; its selectivity is 0
    by construction for this feature, so it is not the measure here)."""
    rows = m.probe.result.rows if m.probe is not None else ()
    return next((r.balanced for r in rows if r.boundary == "attn 0"), None)


def _circuit(m: DepthMeasurement, what: str) -> float | int | None:
    c = None if m.circuit is None else m.circuit.circuit
    if c is None:
        return None
    if what == "edges":
        return len(c.edges)
    return None if c.heldout is None else c.heldout.value


def _above(m: DepthMeasurement, prefix: str) -> int | None:
    """How many period exams are above the chance level whose name starts with ``prefix``
    (exact one-sided McNemar, Bonferroni over the exams); None where it was not measured."""
    if not m.period_exams:
        return None
    v = exam_verdict(m.period_exams)
    found = [len(above) for name, above in v.above.items() if name.startswith(prefix)]
    return found[0] if found else None


def _order(m: DepthMeasurement) -> float | None:
    e = pooled(m.period_exams).order_effect if m.period_exams else None
    return None if e is None else e.estimate


MEASURES: list[Measure] = [
    Measure("induction_formed", "induction formed", lambda m: m.induction_step is not None, kind="held"),
    Measure("induction_step", "step the score passed the floor", lambda m: m.induction_step, number(0), higher_is_better=False),
    Measure("induction_tokens", "tokens it took (M)", lambda m: m.induction_tokens, lambda v: f"{v / 1e6:.1f}", higher_is_better=False),
    Measure("induction_minutes", "minutes it took", lambda m: m.induction_minutes, number(1), higher_is_better=False),
    Measure("steps", "steps trained", lambda m: m.steps, number(0)),
    Measure("train_minutes", "training time (min)", lambda m: m.train_minutes, number(1)),
    Measure("final_loss", "final training loss", lambda m: m.final_loss, number(3), higher_is_better=False),
    Measure("induction_role", "an induction head", lambda m: bool(m.induction_heads), kind="held"),
    Measure("n_induction_heads", "number of induction heads", lambda m: len(m.induction_heads), number(0)),
    Measure("top_score", "strongest induction score (layer ≥ 1; any layer for 1 layer)", lambda m: m.top_score, number(2), higher_is_better=True),
    Measure("top_head", "its head", lambda m: m.top_head, kind="tally"),
    Measure("previous_token_role", "a previous-token head", lambda m: bool(m.previous_token_heads), kind="held"),
    Measure("routes", "route by path", lambda m: m.route.name.value, kind="tally"),
    Measure("k_share", "K input's share of the top head's effect", _k_share, number(2)),
    Measure("exams_passing", "period exams passing the 90% rule", lambda m: exam_verdict(m.period_exams).n_passing if m.period_exams else None, number(0), higher_is_better=True),
    Measure("lowest_exam", "lowest period exam (top-1)", lambda m: exam_verdict(m.period_exams).lowest.pass_rate if m.period_exams else None, percent, higher_is_better=True),
    Measure("above_untrained", "period exams above the untrained model (McNemar)", lambda m: _above(m, "untrained"), number(0), higher_is_better=True),
    Measure("above_one_layer", "period exams above the 1-layer model (McNemar)", lambda m: _above(m, "1-layer"), number(0), higher_is_better=True),
    Measure("top1", "top-1 over every period exam", lambda m: pooled(m.period_exams).rate if m.period_exams else None, percent, higher_is_better=True),
    Measure("order_effect", "order effect on the period exams (as is − order control)", _order, points, higher_is_better=True),
    Measure("passage_order", "passage order effect (nats)", lambda m: None if m.passage_order is None else m.passage_order.estimate, number(3), higher_is_better=True),
    Measure("circuit_edges", "EAP-IG circuit edges", lambda m: _circuit(m, "edges"), number(0)),
    Measure("heldout_faithfulness", "held-out faithfulness", lambda m: _circuit(m, "heldout"), percent, higher_is_better=True),
    Measure("roles_checked", "roles passing the causal check", _check_share, percent, higher_is_better=True),
    Measure("all_roles_pass", "every role passes it", _all_roles_pass, kind="held"),
    Measure("passage_drop", "repeated-passage drop (nats)", lambda m: None if m.role_checks is None else m.role_checks.drop.value, number(2), higher_is_better=True),
    Measure("val_loss", "held-out loss", lambda m: m.val_loss, number(3), higher_is_better=False),
    Measure("probe_accuracy", "previous-token probe after attn 0 (balanced accuracy)", _probe_accuracy, number(3)),
]  # fmt: skip

MEASURE: dict[str, Measure] = {m.name: m for m in MEASURES}


def register_measure(measure: Measure) -> Measure:
    """Add ``measure`` to the registry (after the others): every table and study.json's
    ``over_seeds`` then read it. A name already taken is refused."""
    if measure.name in MEASURE:
        raise ValueError(f"a measure named {measure.name!r} is registered already")
    MEASURES.append(measure)
    MEASURE[measure.name] = measure
    return measure
