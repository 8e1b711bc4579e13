"""Verdicts from measured numbers, with the thresholds they use stated in one place.

The route to induction: path patching (:mod:`~interp_toolkit.causal.paths`) measures,
for each induction head, its effect (the share of the induction task's clean-corrupt gap removed
when its output is resampled from the corrupt prompts) and the share of that effect removed when
the earlier heads' writes into its query, key or value input alone are resampled
(:class:`HeadRoute`); :func:`decide_route` names the route from those numbers and
:func:`model_route_name` the model's. The period exams' verdict reads ``exam_lower_bound`` and
``chance_alpha`` (:mod:`~interp_toolkit.exams.verdict`). Reports build their sentences
from these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds


@dataclass(frozen=True)
class Estimate:
    """A measured value and its 95% bootstrap interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"


class RouteName(str, Enum):
    """What :func:`decide_route` and :func:`model_route_name` can say."""

    K = "K-composition"
    Q = "Q-composition"
    V = "V-composition"
    MIXED = "mixed"  # two or more inputs of one head carry it
    NOT_FOUND = "not found"  # no input carries it
    NO_EFFECT = "no effect"  # resampling the head's output removes nothing (interval reaches 0)
    DIFFERS = "differs by head"  # the model's induction heads run on different routes
    NO_EARLIER = "none"  # a layer-0 head (a 1-layer model): nothing earlier to compose with
    NO_TASK = "no induction"  # the model does not do the task (gap below min_gap)
    UNMEASURED = "not measured"  # the task cannot be built for this model (ModelRoute.reason)


INPUTS = ("q", "k", "v")
BY_INPUT = {"q": RouteName.Q, "k": RouteName.K, "v": RouteName.V}


@dataclass(frozen=True)
class PathEffect:
    """Resampling ``source``'s write into ``target``'s ``input`` alone (TL's direct path
    patching): the share of the target head's effect it removes, and the pair's composition score
    of that kind (``W_OV`` of source into ``W_QK``/``W_QK^T``/``W_OV`` of target)."""

    source: HeadId
    target: HeadId = field(metadata=json_field(skip=True))
    input: str
    removed: Estimate
    composition: float


@dataclass(frozen=True)
class HeadRoute(Jsonable):
    """One induction head's route: ``effect``, the share of the task's gap removed when its output
    is resampled; ``inputs[c]``, the share of that effect removed when every earlier head's write
    into input ``c`` is resampled at once; ``paths``, each earlier head into each input (shares
    of the effect too);
    ``control``, a role-less earlier head whose paths the carrying inputs must beat (None when
    every earlier head has a role); the route ``name``, the ``carrying`` inputs and the
    ``feeder`` (the strongest single path into the strongest carrying input)."""

    head: HeadId
    effect: Estimate
    inputs: Mapping[str, Estimate]
    paths: tuple[PathEffect, ...]
    control: HeadId | None
    name: RouteName = field(metadata=json_field(key="route"))
    carrying: tuple[str, ...]
    feeder: HeadId | None

    json_order = ("head", "route", "carrying", "feeder", "effect", "control", "inputs", "paths")

    def path(self, source: HeadId, input: str) -> PathEffect:
        return next(p for p in self.paths if p.source == source and p.input == input)

    def control_effects(self) -> dict[str, Estimate] | None:
        if self.control is None:
            return None
        return {c: self.path(self.control, c).removed for c in INPUTS}


def carries(effect: Estimate, control: Estimate | None, t: Thresholds = THRESHOLDS) -> bool:
    """Whether an input carries the induction (:class:`Thresholds` ``carries``)."""
    return effect.value >= t.carries and (control is None or effect.low > control.high)


def decide_route(
    inputs: Mapping[str, Estimate],
    control: Mapping[str, Estimate] | None,
    t: Thresholds = THRESHOLDS,
) -> tuple[RouteName, tuple[str, ...]]:
    """The route of one head from its input effects: K-, Q- or V-composition when that input
    alone carries it, mixed when two or more do, not found when none does."""
    carrying = tuple(
        c for c in INPUTS if carries(inputs[c], None if control is None else control[c], t)
    )
    if not carrying:
        return RouteName.NOT_FOUND, carrying
    return (BY_INPUT[carrying[0]] if len(carrying) == 1 else RouteName.MIXED), carrying


def head_route(
    head: HeadId,
    effect: Estimate,
    inputs: Mapping[str, Estimate],
    paths: Sequence[PathEffect],
    control: HeadId | None,
    t: Thresholds = THRESHOLDS,
) -> HeadRoute:
    """A :class:`HeadRoute` with its name, carrying inputs and feeder decided: none for a
    layer-0 head, no effect when its own effect's interval reaches 0, else :func:`decide_route`."""
    if head.layer == 0:
        return HeadRoute(head, effect, inputs, tuple(paths), None, RouteName.NO_EARLIER, (), None)
    route = HeadRoute(head, effect, inputs, tuple(paths), control, RouteName.NO_EFFECT, (), None)
    if effect.low <= 0:
        return route
    name, carrying = decide_route(inputs, route.control_effects(), t)
    feeder = None
    if carrying:
        main = max(carrying, key=lambda c: inputs[c].value)
        feeder = max((p for p in paths if p.input == main), key=lambda p: p.removed.value).source
    return HeadRoute(head, effect, inputs, tuple(paths), control, name, carrying, feeder)


def does_task(gap: Estimate, t: Thresholds = THRESHOLDS) -> bool:
    """Whether a model does the task (:class:`Thresholds` ``min_gap``)."""
    return gap.value >= t.min_gap and gap.low > 0


def model_route_name(
    heads: Sequence[HeadRoute], gap: Estimate, t: Thresholds = THRESHOLDS
) -> RouteName:
    """The model's route: no induction when it does not do the task; otherwise its induction
    heads' route when they share one, "differs by head" when not."""
    if not does_task(gap, t):
        return RouteName.NO_TASK
    names = {h.name for h in heads}
    if not names:
        return RouteName.NOT_FOUND
    return names.pop() if len(names) == 1 else RouteName.DIFFERS


@dataclass(frozen=True)
class ModelRoute(Jsonable):
    """The route by path of a model's induction heads on ``task``: the task's clean and
    corrupt metrics (means over ``n_prompts``), its gap with interval, each head's route, the
    random-matrix baseline of the composition scores, and the model's route ``name``."""

    task: str
    n_prompts: int
    clean: float
    corrupt: float
    gap: Estimate
    composition_baseline: float | None  # None when no head has an earlier layer
    heads: tuple[HeadRoute, ...]
    name: RouteName = field(metadata=json_field(key="route"))
    reason: str = ""  # why it was not measured

    json_order = (
        "task",
        "route",
        "n_prompts",
        "clean",
        "corrupt",
        "gap",
        "composition_baseline",
        "heads",
        "reason",
    )

    @classmethod
    def unmeasured(cls, task: str, reason: str) -> ModelRoute:
        return cls(
            task, 0, 0.0, 0.0, Estimate(0.0, 0.0, 0.0), None, (), RouteName.UNMEASURED, reason
        )

    def head(self, head: HeadId) -> HeadRoute:
        return next(h for h in self.heads if h.head == head)
