"""The study over seeds (``reproduce --seeds N``, issue 30): every headline measure of every run as
its median and range over the seeds, and each verdict as the seeds it held in.

:func:`over_seeds` takes each seed's measurements (:class:`SeedMeasurements`) and returns one
:class:`SettingOverSeeds` per setting; :func:`seeds_sentence` and :func:`seeds_section` put them
into words and a table. A measure a seed did not produce (no induction step, no circuit) is left
out of its median and range, and the count of seeds that produced it is stated.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from interp_toolkit.causal.circuit import Circuit
from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.reports.findings import (
    DepthMeasurement,
    claim_holds,
    layers_phrase,
    one_layer_chance,
    pct,
)
from interp_toolkit.reports.layer_findings import ProbeMeasurement
from interp_toolkit.reports.run_analysis import RunSummary
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.views.page import Section, table, text


@dataclass(frozen=True)
class Spread:
    """One measure over seeds: ``values[i]`` in seed ``seeds[i]`` (None: not produced there)."""

    seeds: tuple[int, ...]
    values: tuple[float | None, ...]

    @property
    def present(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def median(self) -> float | None:
        return statistics.median(self.present) if self.present else None

    def words(self, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
        """'6,000 (4,000-22,000)', with 'in 3 of 5 seeds' when some seeds lack it."""
        xs = self.present
        if not xs:
            return "—"
        s = fmt(statistics.median(xs))
        if len(xs) > 1:
            s += f" ({fmt(min(xs))}–{fmt(max(xs))})"
        if len(xs) < len(self.values):
            s += f" in {len(xs)} of {len(self.values)} seeds"
        return s

    def to_dict(self) -> dict[str, Any]:
        xs = self.present
        return {
            "median": self.median,
            "min": min(xs) if xs else None,
            "max": max(xs) if xs else None,
            "by_seed": dict(zip(map(str, self.seeds), self.values, strict=True)),
        }


@dataclass(frozen=True)
class Held:
    """A yes/no over seeds: the seeds it held in, of ``seeds``."""

    seeds: tuple[int, ...]
    held: tuple[int, ...]

    def words(self) -> str:
        return f"{len(self.held)} of {len(self.seeds)}" if self.seeds else "—"

    def to_dict(self) -> dict[str, Any]:
        return {"held": len(self.held), "of": len(self.seeds), "seeds": list(self.held)}


@dataclass(frozen=True)
class SeedMeasurements:
    """What one seed's study measured (:class:`~interp_toolkit.study.reproduce.StudyResult`)."""

    seed: int
    depths: Sequence[DepthMeasurement]
    summaries: Sequence[RunSummary]
    probes: Sequence[ProbeMeasurement] = ()


@dataclass(frozen=True)
class RunOverSeeds:
    """One run (a depth of a setting) over seeds."""

    name: str
    n_layers: int
    induction_formed: Held  # a layer>=1 head's logged induction score passed the floor
    induction_step: Spread
    induction_tokens: Spread
    induction_minutes: Spread
    steps: Spread
    induction_role: Held  # at least one head with the induction role
    n_induction_heads: Spread
    previous_token_role: Held
    routes: dict[str, int]  # the model's route by path -> seeds
    k_share: Spread  # the K input's share of the strongest routed head's effect
    exams_passing: Spread
    n_exams: int
    circuit_edges: Spread
    heldout_faithfulness: Spread
    roles_checked: Spread  # roles passing their causal check, of those testable: the share
    all_roles_pass: Held  # every testable role passed its causal check (of the seeds with one)
    passage_drop: Spread
    val_loss: Spread
    probe_accuracy: Spread  # the previous-token probe's balanced accuracy after attn 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "n_layers": self.n_layers}
        for k, v in vars(self).items():
            if isinstance(v, Spread | Held):
                out[k] = v.to_dict()
        out["routes"], out["n_exams"] = dict(self.routes), self.n_exams
        return out


@dataclass(frozen=True)
class SettingOverSeeds:
    """One setting's runs over seeds and the seeds the seed's claim held in."""

    preset: str
    seeds: tuple[int, ...]
    claim: Held
    runs: tuple[RunOverSeeds, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "seeds": list(self.seeds),
            "claim": self.claim.to_dict(),
            "runs": [r.to_dict() for r in self.runs],
        }


def _k_share(m: DepthMeasurement) -> float | None:
    heads = [h for h in m.route.heads if h.inputs]
    if not heads:
        return None
    return max(heads, key=lambda h: h.effect.value).inputs["k"].value


def _check_share(m: DepthMeasurement) -> float | None:
    rc = m.role_checks
    if rc is None or not (tested := len(rc.passing()) + len(rc.flagged())):
        return None
    return len(rc.passing()) / tested


def _probe_accuracy(probes: Sequence[ProbeMeasurement], name: str) -> float | None:
    """The study's previous-token probe after attention layer 0 (balanced accuracy; its
    selectivity is 0 by construction for this feature, so it is not the measure here)."""
    p = next((p for p in probes if p.name == name), None)
    row = next((r for r in p.result.rows if r.boundary == "attn 0"), None) if p else None
    return None if row is None else row.balanced


def _run_over_seeds(
    name: str, per_seed: Sequence[tuple[SeedMeasurements, DepthMeasurement]], t: Thresholds
) -> RunOverSeeds:
    seeds = tuple(s.seed for s, _ in per_seed)

    def spread(f: Callable[[SeedMeasurements, DepthMeasurement], float | None]) -> Spread:
        """``f`` in every seed (ints kept as floats; None where that seed lacks it)."""
        values = (f(s, m) for s, m in per_seed)
        return Spread(seeds, tuple(None if v is None else float(v) for v in values))

    def held(f: Callable[[SeedMeasurements, DepthMeasurement], bool]) -> Held:
        return Held(seeds, tuple(s.seed for s, m in per_seed if f(s, m)))

    def summary(s: SeedMeasurements) -> RunSummary | None:
        return next((x for x in s.summaries if x.name == name), None)

    def circuit(m: DepthMeasurement) -> Circuit | None:
        return None if m.circuit is None else m.circuit.circuit

    def checks(m: DepthMeasurement) -> bool:
        rc = m.role_checks
        return rc is not None and not rc.flagged() and bool(rc.passing())

    tested = tuple(s.seed for s, m in per_seed if _check_share(m) is not None)

    def drop(m: DepthMeasurement) -> float | None:
        return None if m.role_checks is None else m.role_checks.drop.value

    n_layers = per_seed[0][1].n_layers
    return RunOverSeeds(
        name=name,
        n_layers=n_layers,
        induction_formed=held(lambda s, m: m.induction_step is not None),
        induction_step=spread(lambda s, m: m.induction_step),
        induction_tokens=spread(lambda s, m: m.induction_tokens),
        induction_minutes=spread(lambda s, m: m.induction_minutes),
        steps=spread(lambda s, m: m.steps),
        induction_role=held(lambda s, m: bool(m.induction_heads)),
        n_induction_heads=spread(lambda s, m: len(m.induction_heads)),
        previous_token_role=held(
            lambda s, m: bool((x := summary(s)) and x.heads.get("previous-token"))
        ),
        routes=dict(Counter(m.route.name.value for _, m in per_seed)),
        k_share=spread(lambda s, m: _k_share(m)),
        exams_passing=spread(lambda s, m: exam_verdict(m.period_exams, t).n_passing),
        n_exams=exam_verdict(per_seed[0][1].period_exams, t).n_exams,
        circuit_edges=spread(lambda s, m: None if (c := circuit(m)) is None else len(c.edges)),
        heldout_faithfulness=spread(
            lambda s, m: None if (c := circuit(m)) is None or c.heldout is None else c.heldout.value
        ),
        roles_checked=spread(lambda s, m: _check_share(m)),
        all_roles_pass=Held(tested, tuple(s.seed for s, m in per_seed if checks(m))),
        passage_drop=spread(lambda s, m: drop(m)),
        val_loss=spread(lambda s, m: m.val_loss),
        probe_accuracy=spread(lambda s, m: _probe_accuracy(s.probes, name)),
    )


def over_seeds(
    settings: Sequence[tuple[str, Sequence[str]]],
    measured: Sequence[SeedMeasurements],
    t: Thresholds = THRESHOLDS,
) -> list[SettingOverSeeds]:
    """Each setting (``(preset, its runs' names)``) over the seeds of ``measured``."""
    out = []
    seeds = tuple(s.seed for s in measured)
    for preset, names in settings:
        runs = []
        for name in names:
            per_seed = [(s, m) for s in measured for m in s.depths if m.name == name]
            if per_seed:
                runs.append(_run_over_seeds(name, per_seed, t))
        held = tuple(
            s.seed
            for s in measured
            if claim_holds(one_layer_chance([m for m in s.depths if m.name in names]), t)
        )
        out.append(SettingOverSeeds(preset, seeds, Held(seeds, held), tuple(runs)))
    return out


# ----------------------------------------------------------------------------------- words


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _seeds(seeds: Sequence[int]) -> str:
    return ", ".join(map(str, seeds)) or "none"


def seeds_sentence(s: SettingOverSeeds) -> str:
    """The setting's verdict over seeds and its deepest-two runs' key numbers."""
    n = len(s.seeds)
    held = s.claim.held
    lead = f"Over {n} seeds ({_seeds(s.seeds)}), the seed's claim held in {len(held)} of {n}" + (
        f" (seeds {_seeds(held)})" if 0 < len(held) < n else ""
    )
    parts = []
    for r in s.runs:
        p = (
            f"{layers_phrase(r.n_layers)} ({r.name}): induction formed in "
            f"{r.induction_formed.words()} seeds"
        )
        if r.induction_step.present:
            p += f" (step {r.induction_step.words(_int)})"
        p += (
            f", an induction head in {r.induction_role.words()}, passes "
            f"{r.exams_passing.words(_int)} of {r.n_exams} period exams"
        )
        if r.roles_checked.present:
            p += (
                f", every checked role passing its causal check in {r.all_roles_pass.words()} seeds"
            )
        parts.append(p)
    return f"{lead}: {'; '.join(parts)} (median, range over seeds)."


def seeds_section(s: SettingOverSeeds) -> Section:
    """A table: one row per measure, one column per run, median (range) over the seeds."""
    runs = s.runs
    rows: list[list[str]] = [
        ["induction formed (seeds)", *(r.induction_formed.words() for r in runs)],
        ["step it formed", *(r.induction_step.words(_int) for r in runs)],
        ["tokens it took (M)", *(r.induction_tokens.words(lambda v: f"{v / 1e6:.1f}") for r in runs)],
        ["minutes it took", *(r.induction_minutes.words(lambda v: f"{v:.1f}") for r in runs)],
        ["steps trained", *(r.steps.words(_int) for r in runs)],
        ["an induction head (seeds)", *(r.induction_role.words() for r in runs)],
        ["induction heads", *(r.n_induction_heads.words(_int) for r in runs)],
        ["a previous-token head (seeds)", *(r.previous_token_role.words() for r in runs)],
        ["route by path (seeds)", *(", ".join(f"{k} {v}" for k, v in r.routes.items()) for r in runs)],
        ["K input's share of the top head's effect", *(r.k_share.words(lambda v: f"{v:.2f}") for r in runs)],
        ["period exams passed", *(f"{r.exams_passing.words(_int)} of {r.n_exams}" for r in runs)],
        ["EAP-IG circuit edges", *(r.circuit_edges.words(_int) for r in runs)],
        ["held-out faithfulness", *(r.heldout_faithfulness.words(pct) for r in runs)],
        ["roles passing the causal check", *(r.roles_checked.words(pct) for r in runs)],
        ["every role passes it (seeds with a role)", *(r.all_roles_pass.words() for r in runs)],
        ["repeated-passage drop (nats)", *(r.passage_drop.words(lambda v: f"{v:.2f}") for r in runs)],
        ["held-out loss", *(r.val_loss.words(lambda v: f"{v:.3f}") for r in runs)],
        ["previous-token probe after attn 0 (balanced accuracy)", *(r.probe_accuracy.words(lambda v: f"{v:.3f}") for r in runs)],
    ]  # fmt: skip
    intro = (
        f"Seeds {_seeds(s.seeds)}: each seed sets the model's initialisation, the data order and "
        "the analysis prompts. A cell is the median over the seeds and (in brackets) the lowest "
        "and highest; a count says in how many seeds it held. Each seed's own study is in "
        "seed-S/ (the first seed's is this page's other sections)."
    )
    return Section(
        f"Over {len(s.seeds)} seeds",
        [
            text(seeds_sentence(s), "p", "finding"),
            table(["measure", *(r.name for r in runs)], rows),
        ],
        intro=intro,
    )
