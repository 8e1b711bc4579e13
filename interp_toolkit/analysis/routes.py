"""Verdicts from measured numbers, with the thresholds they use stated in one place.

The causal check (:func:`~interp_toolkit.analysis.ablation.causal_check`) gives an induction
head's score before and after ablating earlier heads; :func:`ablation_verdict` names each effect
and :func:`route_of` says which route to induction a model grew. The period exams' verdict reads
``exam_lower_bound`` and ``chance_alpha`` (:mod:`~interp_toolkit.analysis.exam_verdict`). Reports
build their sentences from these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interp_toolkit.analysis.ablation import CausalRow
from interp_toolkit.analysis.heads import SCORE


@dataclass(frozen=True)
class Thresholds:
    """Every threshold a study's sentences use.

    ``collapse``: an ablation that removes at least this share of the induction score collapses
    it; ``no_effect``: one that changes it by less than this share has no effect (in between it
    weakens it). ``uses``: a route is used when ablating it removes at least this share.
    ``exam_lower_bound``: a period exam passes when the lower bound of the Wilson 95% interval
    of its pass rate is at least this (:mod:`~interp_toolkit.analysis.exam_verdict`).
    ``chance_alpha``: an exam is above a measured chance level (another model on the same
    prompts) when its exact one-sided McNemar p-value is below this, Bonferroni-corrected over
    the exams. ``induction``: the effect-size floor a layer>=1 head's logged induction score
    must pass for the run to count as having formed induction (the time to induction): the score
    registry's floor of the induction score, read, not copied.
    ``decodable``: a feature is linearly decodable at a layer boundary when the lower end of the
    probe's held-out balanced accuracy's 95% interval is at least ``chance + decodable x (1 -
    chance)`` (:func:`~interp_toolkit.analysis.probes.is_decodable`; 0.5: halfway from chance to
    perfect, so a binary feature needs 0.75).
    """

    collapse: float = 0.5
    no_effect: float = 0.1
    uses: float = 0.25
    exam_lower_bound: float = 0.90
    chance_alpha: float = 0.05
    induction: float = SCORE["induction"].floor  # the registry's floor: one value, one place
    decodable: float = 0.5


THRESHOLDS = Thresholds()

#: Routes :func:`route_of` names.
ROUTES = ("K-composition", "Q-composition", "mixed", "spread", "not found", "none")


def removed_share(before: float, after: float) -> float:
    """The share of the score an ablation removed (negative when it rose)."""
    return (before - after) / before if before > 0 else 0.0


def ablation_verdict(before: float, after: float, t: Thresholds = THRESHOLDS) -> str:
    """``collapses``, ``weakens``, ``no effect`` or ``rises`` (see :class:`Thresholds`)."""
    share = removed_share(before, after)
    if share >= t.collapse:
        return "collapses"
    if abs(share) < t.no_effect:
        return "no effect"
    return "weakens" if share > 0 else "rises"


@dataclass(frozen=True)
class Route:
    """The route to induction and the ablations it was read from (removed shares, 0..1)."""

    name: str
    previous_token: float | None  # share removed by ablating the strongest previous-token head
    duplicate_token: float | None  # the largest share removed by one duplicate-token head
    all_earlier: float | None  # share removed by ablating every earlier head with a role


def route_of(rows: Sequence[CausalRow], t: Thresholds = THRESHOLDS) -> Route:
    """Which route a model's induction head runs on, from its causal-check rows.

    K-composition: ablating the previous-token head collapses it and no duplicate-token head
    removes ``uses`` of it; Q-composition: the reverse; mixed: both remove at least ``uses`` and
    one of them collapses it; spread: no single head collapses it but all earlier role heads
    together do; not found: nothing collapses it; none: no rows (a 1-layer model).
    """
    if not rows:
        return Route("none", None, None, None)

    def share(r: CausalRow) -> float:
        return removed_share(r.induction_before, r.induction_after)

    prev = max((share(r) for r in rows if r.ablated.startswith("strongest previous")), default=0.0)
    dup = max((share(r) for r in rows if r.ablated.startswith("duplicate")), default=0.0)
    every = next((share(r) for r in rows if r.ablated.startswith("all earlier")), None)
    if prev >= t.collapse and dup < t.uses:
        name = "K-composition"
    elif dup >= t.collapse and prev < t.uses:
        name = "Q-composition"
    elif max(prev, dup) >= t.collapse:
        name = "mixed"
    elif every is not None and every >= t.collapse:
        name = "spread"
    else:
        name = "not found"
    return Route(name, round(prev, 3), round(dup, 3), None if every is None else round(every, 3))
