"""The study over seeds (``reproduce --seeds N``): every measure of the registry
(:mod:`.registry`) over the seeds, per run, and every claim (:mod:`.claims`) per setting.

:func:`over_seeds` takes each seed's measurements (:class:`SeedMeasurements`) and returns one
:class:`SettingOverSeeds` per setting. A measure a seed did not produce (no induction step, no
circuit) is left out of its median and range, and the count of seeds that produced it is kept.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.measures.claims import ClaimOverSeeds, verdicts
from interp_toolkit.measures.claims import over_seeds as claims_over_seeds
from interp_toolkit.measures.depth import DepthMeasurement, one_layer_chance
from interp_toolkit.measures.registry import MEASURES, Measure
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds


@dataclass(frozen=True)
class Spread(Jsonable):
    """A ``value`` measure over seeds: ``values[i]`` in seed ``seeds[i]`` (None: not produced)."""

    seeds: tuple[int, ...] = field(metadata=json_field(skip=True))
    values: tuple[float | None, ...] = field(metadata=json_field(skip=True))

    json_extra = {"median": "median", "min": "low", "max": "high", "by_seed": "by_seed"}

    @property
    def present(self) -> list[float]:
        return [v for v in self.values if v is not None]

    @property
    def median(self) -> float | None:
        return statistics.median(self.present) if self.present else None

    @property
    def low(self) -> float | None:
        return min(self.present, default=None)

    @property
    def high(self) -> float | None:
        return max(self.present, default=None)

    @property
    def by_seed(self) -> dict[str, float | None]:
        return dict(zip(map(str, self.seeds), self.values, strict=True))

    def words(self, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
        """'6,000 (4,000–22,000)', with 'in 3 of 5 seeds' when some seeds lack it."""
        xs = self.present
        if not xs:
            return "—"
        s = fmt(statistics.median(xs))
        if len(xs) > 1:
            s += f" ({fmt(min(xs))}–{fmt(max(xs))})"
        if len(xs) < len(self.values):
            s += f" in {len(xs)} of {len(self.values)} seeds"
        return s


@dataclass(frozen=True)
class Held(Jsonable):
    """A yes/no over seeds: the seeds it held in, of ``seeds`` (those that could say); its JSON:
    how many it held in, of how many, and which."""

    seeds: tuple[int, ...] = field(metadata=json_field(key="of", encode=len))
    held: tuple[int, ...] = field(metadata=json_field(encode=len))

    json_extra = {"seeds": "held"}
    json_order = ("held", "of", "seeds")

    def words(self, fmt: Callable[[float], str] | None = None) -> str:
        return f"{len(self.held)} of {len(self.seeds)}" if self.seeds else "—"


@dataclass(frozen=True)
class Tally(Jsonable):
    """A category over seeds: how many seeds gave each (its JSON: the counts)."""

    counts: dict[str, int] = field(metadata=json_field(inline=True))

    def words(self, fmt: Callable[[float], str] | None = None) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.counts.items()) or "—"


Over = Spread | Held | Tally


def held_in(seeds: Sequence[int], said: Sequence[object]) -> Held:
    """The seeds ``said[i]`` (of seed ``seeds[i]``; None: it cannot say) held in."""
    known = [(s, v) for s, v in zip(seeds, said, strict=True) if v is not None]
    return Held(tuple(s for s, _ in known), tuple(s for s, v in known if v))


def over(measure: Measure, seeds: Sequence[int], depths: Sequence[DepthMeasurement]) -> Over:
    """``measure`` read in every seed's depth (``depths[i]`` of seed ``seeds[i]``)."""
    values = [measure.read(m) for m in depths]
    if measure.kind == "held":
        return held_in(seeds, values)
    if measure.kind == "tally":
        return Tally(dict(Counter(str(v) for v in values if v is not None)))
    return Spread(tuple(seeds), tuple(None if v is None else float(v) for v in values))


@dataclass(frozen=True)
class SeedMeasurements:
    """What one seed's study measured (:class:`~interp_toolkit.study.reproduce.StudyResult`)."""

    seed: int
    depths: Sequence[DepthMeasurement]


@dataclass(frozen=True)
class RunOverSeeds(Jsonable):
    """One run (a depth of a setting) over seeds: every registry measure (:data:`MEASURES`)."""

    name: str
    n_layers: int
    n_exams: int
    measures: dict[str, Over] = field(metadata=json_field(inline=True))

    def __getitem__(self, name: str) -> Over:
        return self.measures[name]


@dataclass(frozen=True)
class SettingOverSeeds(Jsonable):
    """One setting's runs and the post's claims over seeds, and the seeds in which its 2-layer
    model was a reliable copier at every period (the 90% rule; a named, secondary finding)."""

    preset: str
    seeds: tuple[int, ...]
    reliable_copier: Held
    runs: tuple[RunOverSeeds, ...] = field(default_factory=tuple)
    claims: tuple[ClaimOverSeeds, ...] = field(
        default=(), metadata=json_field(encode=lambda cs: {c.key: c for c in cs})
    )

    json_order = ("preset", "seeds", "reliable_copier", "claims", "runs")


def reliable_copier(ms: Sequence[DepthMeasurement], t: Thresholds = THRESHOLDS) -> bool | None:
    """Whether the setting's 2-layer model passes every period exam under the 90% rule
    (``Thresholds.exam_lower_bound``); None without a 2-layer model that sat them."""
    two = next((m for m in ms if m.n_layers == 2 and m.period_exams), None)
    return None if two is None else exam_verdict(two.period_exams, t).all_pass


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
            per_seed = [(s.seed, m) for s in measured for m in s.depths if m.name == name]
            if not per_seed:
                continue
            ids, got = zip(*per_seed, strict=True)
            exams = got[0].period_exams
            n_exams = exam_verdict(exams, t).n_exams if exams else 0
            measures = {x.name: over(x, ids, got) for x in MEASURES}
            runs.append(RunOverSeeds(name, got[0].n_layers, n_exams, measures))
        mine = [one_layer_chance([m for m in s.depths if m.name in names]) for s in measured]
        held = held_in(seeds, [reliable_copier(ms, t) for ms in mine])
        claims = claims_over_seeds(seeds, [verdicts(ms, t) for ms in mine], t)
        out.append(SettingOverSeeds(preset, seeds, held, tuple(runs), claims))
    return out
