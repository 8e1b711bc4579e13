"""A study at several seeds (``reproduce --seeds N``): where each seed's study lives
(:func:`seed_configs`: ``DIR/seed-S``, the first seed in ``DIR``), and what the page reads from
every seed's run folders besides the measurements (:func:`stages_section`: the LLC's stages kept
by ``interp-toolkit stages RUN``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from interp_toolkit.development.curve import Stages
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.layers import ProbeMeasurement
from interp_toolkit.measures.run import RunSummary
from interp_toolkit.measures.seeds import SeedMeasurements
from interp_toolkit.reports.stage_findings import StagesOfRun, stages_study_section
from interp_toolkit.runs import folder as run_files
from interp_toolkit.runs.folder import RunPaths, read_metrics
from interp_toolkit.runtime.seeds import study_seeds
from interp_toolkit.study.folder import say
from interp_toolkit.study.plan import StudyConfig
from interp_toolkit.views.page import Section


def seed_folders(cfg: StudyConfig) -> list[tuple[int, Path]]:
    """Every seed of the study and its folder: the first is ``cfg.out``, the rest
    ``cfg.out/seed-S``."""
    return study_folders(cfg.out, cfg.seed, cfg.seeds)


def study_folders(out: str | Path, first: int, n: int) -> list[tuple[int, Path]]:
    """:func:`seed_folders` of the study in ``out`` at seeds ``first`` .. ``first + n - 1``."""
    return [
        (s, Path(out) if i == 0 else Path(out) / f"seed-{s}")
        for i, s in enumerate(study_seeds(first, n))
    ]


def read_stages(seed: int, run: Path, n_layers: int) -> StagesOfRun:
    """The stages ``interp-toolkit stages RUN`` kept in ``run`` (one seed's), with its metrics."""
    stages = Stages.from_dict(run_files.read_stages(run))
    return StagesOfRun(seed, run.name, n_layers, stages, read_metrics(run))


def seed_configs(cfg: StudyConfig) -> list[StudyConfig]:
    """The studies of the seeds after the first, each a whole study of its own (one seed)."""
    return [
        dataclasses.replace(cfg, out=folder, seed=seed, seeds=1)
        for seed, folder in seed_folders(cfg)[1:]
    ]


class SeedStudy(Protocol):
    """What one seed's study returns that the seeds' page reads (a ``StudyResult``)."""

    depths: list[DepthMeasurement]
    summaries: list[RunSummary]
    probes: list[ProbeMeasurement]


def other_seeds(
    cfg: StudyConfig, reproduce: Callable[[StudyConfig], SeedStudy]
) -> list[SeedMeasurements]:
    """Every seed after the first, trained and measured by ``reproduce`` as a study of its own."""
    measured = []
    for i, extra in enumerate(seed_configs(cfg), start=2):
        say(f"seed {extra.seed} ({i} of {cfg.seeds}): the whole study in {extra.out}")
        measured.append(SeedMeasurements(extra.seed, reproduce(extra).depths))
    return measured


def stages_section(cfg: StudyConfig, depths: Sequence[DepthMeasurement]) -> Section | None:
    """The LLC's stages of the setting's 1- and 2-layer runs (``depths``) in every seed whose run
    folder holds ``stages.json``; None when none does."""
    found, missing = [], []
    for seed, folder in seed_folders(cfg):
        for d in (d for d in depths if d.n_layers <= 2):
            path = folder / d.name
            if not RunPaths(path).stages.is_file():
                missing.append(f"{d.name} seed {seed}")
                continue
            found.append(read_stages(seed, path, d.n_layers))
    return stages_study_section(found, missing)
