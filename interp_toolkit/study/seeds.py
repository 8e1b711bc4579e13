"""A study at several seeds (``reproduce --seeds N``): where each seed's study lives
(:func:`seed_configs`: ``DIR/seed-S``, the first seed in ``DIR``), and what the page reads from
every seed's run folders besides the measurements (:func:`stages_section`: the LLC's stages kept
by ``interp-toolkit stages RUN``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from interp_toolkit.development.curve import Stages
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.reports.stage_findings import StagesOfRun, stages_study_section
from interp_toolkit.runs import folder as run_files
from interp_toolkit.runs.folder import RunPaths, read_metrics
from interp_toolkit.runtime.seeds import study_seeds
from interp_toolkit.study.plan import StudyConfig
from interp_toolkit.views.page import Section


def study_folders(out: str | Path, first: int, n: int) -> list[tuple[int, Path]]:
    """Every seed of the study in ``out`` at seeds ``first`` .. ``first + n - 1`` and its folder:
    the first is ``out``, the rest ``out/seed-S``."""
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
        for seed, folder in study_folders(cfg.out, cfg.seed, cfg.seeds)[1:]
    ]


def stages_section(cfg: StudyConfig, depths: Sequence[DepthMeasurement]) -> Section | None:
    """The LLC's stages of the setting's 1- and 2-layer runs (``depths``) in every seed whose run
    folder holds ``stages.json``; None when none does."""
    found, missing = [], []
    for seed, folder in study_folders(cfg.out, cfg.seed, cfg.seeds):
        for d in (d for d in depths if d.n_layers <= 2):
            path = folder / d.name
            if not RunPaths(path).stages.is_file():
                missing.append(f"{d.name} seed {seed}")
                continue
            found.append(read_stages(seed, path, d.n_layers))
    return stages_study_section(found, missing)
