"""The seed's closing question on the study page: does the induction transition coincide with the
loss drop, and with a change in the model's structure (the LLC's stages, ``stages RUN``)?

Read from each run's ``stages.json`` (written by ``interp-toolkit stages RUN``) and metrics.jsonl,
for every seed of a study whose runs have one: the logged phase change (the first scored step a
layer>=1 head's induction score passes the floor), the training loss's steepest fall between
scorings, the LLC's steepest rise between kept checkpoints, and the stage boundaries. Runs
without ``stages.json`` are named as not measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp_toolkit.development.curve import Stages
from interp_toolkit.development.llc import LLCEstimate
from interp_toolkit.development.stages import SteepestRise
from interp_toolkit.reports.findings import layers_phrase
from interp_toolkit.reports.text_findings import steepest_fall
from interp_toolkit.views.page import Section, text
from interp_toolkit.views.stages import stages_figure


@dataclass(frozen=True)
class StagesOfRun:
    """One run's stages (``stages.json``, :meth:`Stages.from_dict`) and its metrics rows, in one
    seed."""

    seed: int
    name: str
    n_layers: int
    stages: Stages
    rows: list[dict[str, Any]]

    @property
    def phase_step(self) -> int | None:
        return self.stages.phase_change.phase_change_step

    @property
    def loss_fall(self) -> tuple[float, int, int] | None:
        """The training loss's steepest fall between consecutive scorings (the steps that carry
        head scores, where the phase change is read): the loss at a scoring is the mean of the
        losses logged since the one before (one batch's loss is noisy)."""
        scored = [r["step"] for r in self.rows if "val_loss" in r]
        logged = [(r["step"], r["loss"]) for r in self.rows if isinstance(r.get("loss"), float)]
        means = []
        for a, b in zip([0, *scored], scored, strict=False):
            window = [x for step, x in logged if a < step <= b]
            if window:
                means.append({"step": b, "loss": sum(window) / len(window)})
        return steepest_fall(means, "loss")

    @property
    def rise(self) -> SteepestRise | None:
        return self.stages.phase_change.steepest_rise

    def llc_across_phase(self) -> tuple[tuple[int, LLCEstimate], tuple[int, LLCEstimate]] | None:
        """The read checkpoints (step, estimate) either side of the phase change: the last kept
        before its step, and its step (kept: every scored step is); None without a phase change
        or either."""
        p, c = self.phase_step, self.stages.curve
        read = {
            s: e for s, e, v in zip(c.steps, c.estimates, c.read, strict=True) if math.isfinite(v)
        }
        before = [step for step in read if p is not None and step < p]
        if p is None or p not in read or not before:
            return None
        return (max(before), read[max(before)]), (p, read[p])

    def in_loss_fall(self) -> bool | None:
        f, p = self.loss_fall, self.phase_step
        return None if f is None or p is None else f[1] <= p <= f[2]

    def rise_meets_fall(self) -> bool | None:
        """Whether the LLC's steepest rise and the loss's steepest fall overlap or meet (share a
        step: adjacent scorings)."""
        f, r = self.loss_fall, self.rise
        return None if f is None or r is None else r.start <= f[2] and f[1] <= r.end


def stage_sentence(s: StagesOfRun) -> str:
    """One run in one seed: its checkpoints, boundaries, and where the phase change, the loss's
    steepest fall and the LLC's steepest rise lie."""
    n = sum(math.isfinite(e.llc) for e in s.stages.curve.estimates)
    not_read, b = s.stages.rule.not_read_steps, s.stages.boundaries
    out = f"{s.name} (seed {s.seed}, {layers_phrase(s.n_layers)}): the LLC at {n} kept checkpoints"
    if not_read:
        out += (
            f" ({len(not_read)} below 0, the last at step {max(not_read):,}: not at a local "
            "minimum, not read)"
        )
    out += "; " + (
        "boundaries at " + ", ".join(f"step {x.step:,} ({x.kind}; {x.low:,}-{x.high:,})" for x in b)
        if b
        else "no stage boundary"
    )
    rise, fall = s.rise, s.loss_fall
    if rise is not None:
        out += (
            f"; its steepest rise is between steps {rise.start:,} and {rise.end:,} "
            f"({rise.llc[0]:.3g} -> {rise.llc[1]:.3g})"
        )
    if fall is not None:
        out += (
            f"; the training loss falls most between scored steps {fall[1]:,} and {fall[2]:,} "
            f"(by {fall[0]:.3f})"
        )
    p = s.phase_step
    if p is None:
        return out + "; no head's induction score passed the floor (no phase change)."
    pc = s.stages.phase_change
    where = [
        f"{'inside' if s.in_loss_fall() else 'outside'} the loss's steepest fall",
        f"{'inside' if pc.in_steepest_rise else 'outside'} the LLC's steepest rise",
        "inside a boundary's interval" if pc.inside else "outside every boundary's interval",
    ]
    out += f"; the induction phase change (step {p:,}) falls {', '.join(where)}"
    across = s.llc_across_phase()
    if across is not None:
        (a_step, a), (b_step, b) = across
        out += (
            f"; across it (kept steps {a_step:,} -> {b_step:,}) the LLC goes {_llc(a)} -> {_llc(b)}"
        )
    return out + "."


def _llc(e: LLCEstimate) -> str:
    return f"{e.llc:.3g} [{e.low:.3g}, {e.high:.3g}]"


def _count(xs: Sequence[bool | None]) -> str:
    known = [x for x in xs if x is not None]
    return f"{sum(known)} of {len(known)}" if known else "none (no boundary found)"


def coincide_sentence(found: Sequence[StagesOfRun]) -> str:
    """The answer over the seeds measured, for the runs with a phase change."""
    formed = [s for s in found if s.phase_step is not None]
    if not formed:
        return "No run with measured stages formed induction: the question has no phase change to place."
    seeds = sorted({s.seed for s in formed})
    pcs = [s.stages.phase_change for s in formed]
    return (
        "Does the transition coincide with the loss drop? Over "
        f"{len(formed)} run(s) with stages measured and induction formed (seeds "
        f"{', '.join(map(str, seeds))}): the phase change falls in the training loss's steepest "
        f"fall in {_count([s.in_loss_fall() for s in formed])}, in the LLC's steepest rise in "
        f"{_count([pc.in_steepest_rise for pc in pcs])}, and inside a stage boundary's "
        f"interval in {_count([pc.inside for pc in pcs])}; the LLC's steepest rise meets "
        "the training loss's steepest fall (shares or overlaps steps) in "
        f"{_count([s.rise_meets_fall() for s in formed])}." + _across_words(formed)
    )


def _across_words(formed: Sequence[StagesOfRun]) -> str:
    pairs = [(s, s.llc_across_phase()) for s in formed]
    known = [(s, a, b) for s, ab in pairs if ab is not None for (_, a), (_, b) in [ab]]
    if not known:
        return ""
    changes = ", ".join(f"{b.llc - a.llc:+.3g} (seed {s.seed})" for s, a, b in known)
    return (
        " Across the phase change (from the kept checkpoint before it) the LLC changes by "
        f"{changes}."
    )


def _steps(xs: Sequence[int]) -> str:
    return ", ".join(f"{x:,}" for x in xs)


def seeds_move_sentence(runs: Sequence[StagesOfRun]) -> str:
    """Do the boundaries move with the seed, and by how many steps? For one run name over its
    seeds: each kind of boundary (its first of that kind per seed), where it falls, its spread
    over seeds and its distance from each seed's phase change; and the same for the end of the
    LLC's steepest rise."""
    runs = sorted(runs, key=lambda s: s.seed)
    head = f"{runs[0].name} over seeds {_steps([s.seed for s in runs])}:"
    parts = []
    for kind in ("trough", "peak"):
        found = [(s, next((b for b in s.stages.boundaries if b.kind == kind), None)) for s in runs]
        firsts = [(s, b) for s, b in found if b is not None]
        part = f"a {kind} in {len(firsts)} of {len(runs)} seeds"
        if firsts:
            at = [b.step for _, b in firsts]
            part += f" (the first at step{'s' if len(at) > 1 else ''} {_steps(at)}"
            if len(at) > 1:
                part += f": it moves by up to {max(at) - min(at):,} steps"
            offsets = [b.step - s.phase_step for s, b in firsts if s.phase_step is not None]
            if offsets:
                part += f"; {', '.join(f'{o:+,}' for o in offsets)} steps from the phase change"
            part += ")"
        parts.append(part)
    rises = [(s, s.rise) for s in runs if s.rise is not None]
    if rises:
        ends = [r.end for _, r in rises]
        part = f"the LLC's steepest rise ends at step{'s' if len(ends) > 1 else ''} {_steps(ends)}"
        if len(ends) > 1:
            part += f" (moves by up to {max(ends) - min(ends):,} steps)"
        phases = [s.phase_step for s, _ in rises]
        if all(p is not None for p in phases):
            part += f", the phase change at {_steps([p for p in phases if p is not None])}"
        parts.append(part)
    return f"{head} {'; '.join(parts)}."


def stages_study_section(found: Sequence[StagesOfRun], missing: Sequence[str]) -> Section | None:
    """The page's section: the answer, one sentence per run and seed, the first run's figure."""
    if not found:
        return None
    items: list[Any] = [text(coincide_sentence(found), "p", "finding")]
    names = sorted({s.name for s in found})
    items += [
        text(seeds_move_sentence([s for s in found if s.name == n]), "p", "finding")
        for n in names
        if len({s.seed for s in found if s.name == n}) > 1
    ]
    items += [text(stage_sentence(s)) for s in found]
    deepest = max(found, key=lambda s: (s.phase_step is not None, s.n_layers, -s.seed))
    control = next(
        (s for s in found if s.seed == deepest.seed and s.n_layers < deepest.n_layers), None
    )
    items.append(
        stages_figure(deepest.stages, deepest.rows, None if control is None else control.stages)
    )
    intro = (
        "From `interp-toolkit stages RUN` (the local learning coefficient by SGLD at every kept "
        "checkpoint; docs/stages.md), run on these runs before the page was written."
        + (f" Not measured: {', '.join(missing)}." if missing else "")
    )
    return Section("When the structure changes: the LLC's stages", items, intro=intro)
