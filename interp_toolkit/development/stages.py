"""Developmental stages: boundaries where the LLC curve over training turns, and what changed in
each stage (Hoogland et al. 2024, "The developmental landscape of in-context learning").

**The rule** (:func:`stage_boundaries`, tested on planted curves in ``tests/unit/development/test_stages.py``).
The LLC estimates at the kept checkpoints are smoothed over log(step) by a Gaussian kernel of
width ``bandwidth`` (natural-log units, default 0.25: a factor e^0.25 = 1.28 in steps); a
boundary is a critical point of the smoothed curve, a checkpoint where its slope changes sign
(a peak or a trough), kept only when the swing on each side of it (to the neighbouring critical
point or the curve's end) is at least ``min_swing`` (default 0.1) of the curve's range: the
smallest swing's pair of critical points is dropped first, until every swing is large enough.
Each boundary carries the interval between the checkpoints on either side of it. A checkpoint
whose LLC interval lies wholly below 0 is not read (:func:`read_by_rule`): the chains found lower
loss near its weights, so they are not at a local minimum, where the LLC is defined. Hoogland et al.
read critical points of the smoothed LLC curve the same way (they smoothed by eye-fitted
Gaussian processes; this is the kernel version, stated).

**The stages** between boundaries (and the first and last checkpoint) are described from the
run's metrics.jsonl (:func:`describe_stages`): at the scored rows nearest each stage's start and
end, the training loss, the held-out loss, the strongest previous-token head (layer 0 and up),
the strongest induction head (layer 1 and up; any layer of a 1-layer model) and, when logged, the
repeated-passage drop; with the LLC at both ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from interp_toolkit.files.serialize import Jsonable, from_json, json_field
from interp_toolkit.heads.induction import best_induction_score, logged_induction_key
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.stats.thresholds import BANDWIDTH, MIN_SWING, MOVED

#: Which estimates the rule leaves out, in words (recorded with every result).
NOT_READ = (
    "a checkpoint whose LLC interval lies wholly below 0 (the chains found lower loss near its "
    "weights: not a local minimum, where the LLC is defined) is shown but not read by the "
    "smoothing, the boundaries, the stages or the steepest rise"
)


@dataclass(frozen=True, kw_only=True)
class StageRule(Jsonable):
    """The rule a result was read by, in words and numbers; ``not_read`` (:data:`NOT_READ`) and
    the steps it left out are None in a file written before estimates below 0 were left out."""

    smoothing: str
    boundary: str
    interval: str
    not_read: str | None = field(default=None, metadata=json_field(omit_none=True))
    not_read_steps: list[int] | None = field(default=None, metadata=json_field(omit_none=True))
    bandwidth: float
    min_swing: float


def read_by_rule(llc: list[float], high: list[float]) -> list[float]:
    """The LLC values the rule reads: ``llc``, NaN where the interval's top ``high`` is below 0
    (:data:`NOT_READ`; the rule skips NaN)."""
    return [v if not (h < 0) else float("nan") for v, h in zip(llc, high, strict=True)]


@dataclass(frozen=True)
class Boundary(Jsonable):
    """A critical point of the smoothed LLC curve at checkpoint ``step`` (``kind``: peak or
    trough), between the checkpoints ``low`` and ``high`` either side of it."""

    step: int
    low: int = field(metadata=json_field(skip=True))
    high: int = field(metadata=json_field(skip=True))
    kind: str
    llc: float = field(metadata=json_field(key="llc_smoothed", digits=4))

    json_extra = ("interval",)
    json_order = ("step", "interval", "kind", "llc_smoothed")

    @property
    def interval(self) -> list[int]:
        return [self.low, self.high]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Boundary:  # ``interval`` holds two fields
        return from_json(cls, {**d, "low": d["interval"][0], "high": d["interval"][1]})


def smooth(steps: list[int], values: list[float], bandwidth: float = BANDWIDTH) -> list[float]:
    """``values`` smoothed by a Gaussian kernel of width ``bandwidth`` in log(step)."""
    xs = [math.log(s) for s in steps]
    out = []
    for x0 in xs:
        w = [math.exp(-0.5 * ((x - x0) / bandwidth) ** 2) for x in xs]
        out.append(sum(wi * v for wi, v in zip(w, values, strict=True)) / sum(w))
    return out


def stage_boundaries(
    steps: list[int],
    llc: list[float],
    *,
    bandwidth: float = BANDWIDTH,
    min_swing: float = MIN_SWING,
) -> list[Boundary]:
    """The stage boundaries of an LLC curve (the module's rule): critical points of the smoothed
    curve whose swings on both sides are at least ``min_swing`` of its range."""
    if len(steps) != len(llc):
        raise ValueError("steps and llc differ in length")
    pairs = sorted((s, v) for s, v in zip(steps, llc, strict=True) if math.isfinite(v))
    if len(pairs) < 3:
        return []
    xs = [s for s, _ in pairs]
    ys = smooth(xs, [v for _, v in pairs], bandwidth)
    span = max(ys) - min(ys)
    if span <= 1e-9 * max(1.0, max(abs(y) for y in ys)):  # flat up to float rounding
        return []
    slopes = [b - a for a, b in zip(ys, ys[1:], strict=False)]
    turns = [  # i: the checkpoint where the slope changes sign (flat stretches join the next)
        i
        for i in range(1, len(ys) - 1)
        if slopes[i - 1] * slopes[i] < 0 or (slopes[i - 1] != 0 and slopes[i] == 0)
    ]
    points = [0, *turns, len(ys) - 1]
    while len(points) > 2:
        swings = [abs(ys[b] - ys[a]) for a, b in zip(points, points[1:], strict=False)]
        k = min(range(len(swings)), key=swings.__getitem__)
        if swings[k] >= min_swing * span:
            break
        if k == 0:  # the first swing: drop the critical point after it
            del points[1]
        elif k == len(swings) - 1:
            del points[-2]
        else:  # an inner swing: drop both its ends (a small wiggle)
            del points[k : k + 2]
    out = []
    for i in points[1:-1]:
        kind = "peak" if ys[i] >= ys[i - 1] else "trough"
        out.append(Boundary(step=xs[i], low=xs[i - 1], high=xs[i + 1], kind=kind, llc=ys[i]))
    return out


def measures(rows: list[dict[str, Any]], step: int) -> dict[str, float | int | None]:
    """What a stage's end at ``step`` reads from the scored metrics row nearest it (the earlier
    on a tie); only ``logged_step`` (None) without one."""
    scored = [r for r in rows if logged_induction_key(r) is not None]
    if not scored:
        return {"logged_step": None}
    row = min(scored, key=lambda r: (abs(int(r["step"]) - step), int(r["step"])))
    prev, key = row.get(SCORE["previous_token"].logged_as), logged_induction_key(row)
    return {
        "logged_step": int(row["step"]),
        "loss": row.get("loss"),
        "val_loss": row.get("val_loss"),
        "previous_token": max(max(r) for r in prev) if prev else None,
        "induction": best_induction_score(row[key]) if key else None,
        "passage_drop": row.get("passage_drop"),
    }


@dataclass(frozen=True)
class Stage(Jsonable):
    """Stage ``stage``, checkpoints ``start`` to ``end``: the LLC and the logged measures at both
    ends, a sentence naming what moved, the route by path at its end (``curve.route_at``)."""

    stage: int
    start: int
    end: int
    llc: list[float]
    start_measures: dict[str, float | int | None]
    end_measures: dict[str, float | int | None]
    summary: str
    route_at_end: dict[str, Any] | None = field(default=None, metadata=json_field(omit_none=True))


def describe_stages(
    steps: list[int],
    llc: list[float],
    boundaries: list[Boundary],
    rows: list[dict[str, Any]],
) -> list[Stage]:
    """Each stage (first checkpoint -> boundary -> ... -> last checkpoint): its steps, the LLC
    at both ends, the logged measures at both ends, and a sentence naming what moved."""
    finite = sorted((s, v) for s, v in zip(steps, llc, strict=True) if math.isfinite(v))
    if not finite:
        return []
    at = dict(finite)
    edges = [finite[0][0], *(b.step for b in boundaries), finite[-1][0]]
    out = []
    for n, (a, b) in enumerate(zip(edges, edges[1:], strict=False), 1):
        start, end = measures(rows, a), measures(rows, b)
        moved = []
        for key, floor in MOVED.items():
            x, y = start.get(key), end.get(key)
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and abs(y - x) >= floor:
                moved.append(f"{key.replace('_', ' ')} {x:.3g} -> {y:.3g}")
        trend = "rises" if at[b] > at[a] else "falls"
        if start["logged_step"] is not None and start["logged_step"] == end["logged_step"]:
            said = f"no scoring inside it (both ends read the scored step {start['logged_step']})"
        else:
            said = "; ".join(moved) if moved else "no logged measure moved"
        text = f"LLC {trend} {at[a]:.3g} -> {at[b]:.3g}; {said}"
        out.append(Stage(n, a, b, [round(at[a], 4), round(at[b], 4)], start, end, text))
    return out


@dataclass(frozen=True)
class SteepestRise(Jsonable):
    """The (unsmoothed) LLC's steepest rise between neighbouring checkpoints ``start`` and
    ``end``: the LLC at both and the rise, 4 digits."""

    start: int = field(metadata=json_field(key="from"))
    end: int = field(metadata=json_field(key="to"))
    llc: list[float]
    rise: float


@dataclass(frozen=True)
class InRise(Jsonable):
    """The LLC's steepest rise and whether the phase change falls in it (None: no phase change)."""

    steepest_rise: SteepestRise
    in_steepest_rise: bool | None


@dataclass(frozen=True)
class PhaseChange(Jsonable):
    """The logged induction phase change (None: none) against the boundaries (``inside`` one's
    interval, the ``nearest``, its ``distance``) and the LLC's steepest rise (``rise``)."""

    phase_change_step: int | None
    inside: bool | None = None
    nearest: Boundary | None = None
    rise: InRise | None = field(default=None, metadata=json_field(inline=True, omit_none=True))
    distance: int | None = field(default=None, metadata=json_field(omit_none=True))

    @property
    def steepest_rise(self) -> SteepestRise | None:
        return None if self.rise is None else self.rise.steepest_rise

    @property
    def in_steepest_rise(self) -> bool | None:
        return None if self.rise is None else self.rise.in_steepest_rise


def steepest_rise(steps: list[int], llc: list[float]) -> SteepestRise | None:
    """The pair of neighbouring checkpoints between which the (unsmoothed) LLC rises most."""
    pts = sorted((s, v) for s, v in zip(steps, llc, strict=True) if math.isfinite(v))
    pairs = list(zip(pts, pts[1:], strict=False))
    if not pairs:
        return None
    (a, x), (b, y) = max(pairs, key=lambda ab: ab[1][1] - ab[0][1])
    return SteepestRise(a, b, [round(x, 4), round(y, 4)], round(y - x, 4))


def phase_change_in_boundary(
    boundaries: list[Boundary],
    phase_step: int | None,
    rise: SteepestRise | None = None,
) -> PhaseChange:
    """Whether the logged induction phase change (its first scored step above the floor) falls
    inside a boundary's interval, the nearest boundary, and whether it falls in the LLC's
    steepest rise ``rise`` (:func:`steepest_rise`: ``start < step <= end``)."""
    p = phase_step
    against = (
        None if rise is None else InRise(rise, None if p is None else rise.start < p <= rise.end)
    )
    if p is None or not boundaries:
        return PhaseChange(phase_step, rise=against)
    near = min(boundaries, key=lambda b: abs(b.step - phase_step))
    inside = any(b.low <= phase_step <= b.high for b in boundaries)
    return PhaseChange(phase_step, inside, near, against, near.step - phase_step)
