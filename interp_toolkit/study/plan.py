"""What a study trains: its settings, its runs, and each run's recipe (:func:`depth_preset`).
:mod:`.reproduce` trains and examines them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from interp_toolkit.runs.folder import read_metrics
from interp_toolkit.study.layers import MLP_LAYERS, run_name
from interp_toolkit.training.presets import (
    LAYER_CHOICES,
    Preset,
    get_preset,
    until_induction,
    with_overrides,
)


@dataclass(frozen=True)
class StudyConfig:
    """What ``interp-toolkit reproduce`` runs."""

    out: Path = Path("study")
    # None (the default, `reproduce --preset all`): both settings (SETTINGS), natural text first;
    # a preset's name: that setting alone
    preset: str | None = None
    layers: tuple[int, ...] | None = None  # None: each setting's own depths (SETTINGS)
    seed: int = 0
    # train and measure the whole study at seeds seed .. seed + seeds - 1 (the others in DIR/seed-S)
    seeds: int = 1
    steps: int | None = None  # train exactly this many steps (default: stop after induction)
    # steps a 2+-layer model trains once induction has formed (None: its preset's after_induction)
    after_induction: int | None = None
    threads: int = 1  # torch threads per training run (2 threads on 2 shared cores are slower)
    # runs trained at once on the CPU, in separate processes (a GPU: one at a time)
    workers: int = 2
    corpus: str | None = None
    sample_tokens: int = 40
    device: str = "auto"
    mlp: bool = False  # also train MLP twins of the 1- and 2-layer models


#: The study's settings when no preset is named: the natural-text pair first (the post's own
#: setting), then the curriculum's four depths.
SETTINGS: tuple[tuple[str, tuple[int, ...]], ...] = (("text", (1, 2)), ("cpu", LAYER_CHOICES))


def study_settings(cfg: StudyConfig) -> list[tuple[str, tuple[int, ...]]]:
    """``(preset, layers)`` of every setting the study trains, in the page's order."""
    if cfg.preset is None:
        return [(name, cfg.layers or layers) for name, layers in SETTINGS]
    return [(cfg.preset, cfg.layers or LAYER_CHOICES)]


@dataclass(frozen=True)
class StudyRun:
    """One model of a study: its preset, its depth, and whether it is an MLP twin."""

    name: str
    n_layers: int
    mlp: bool = False
    preset: str = "cpu"


def study_runs(cfg: StudyConfig) -> list[StudyRun]:
    """Per setting: the attention-only depths asked for, then (``--mlp``) the MLP twins of
    those in :data:`~.study_layers.MLP_LAYERS`."""
    runs = []
    for preset, layers in study_settings(cfg):
        runs += [StudyRun(run_name(preset, n), n, preset=preset) for n in sorted(layers)]
        if cfg.mlp:
            twins = [n for n in MLP_LAYERS if n in layers]
            runs += [StudyRun(run_name(preset, n, True), n, True, preset) for n in twins]
    return runs


def stops_on_induction(preset: str) -> bool:
    """Whether a study trains this preset's 2+-layer models only until induction has formed
    (the curriculum and the byte text preset: ``after_induction`` steps past the floor), or every
    depth for the preset's fixed number of steps (``text-bpe``, which forms none: the 1-layer
    control then trains as long from the start, beside it)."""
    return get_preset(preset, 2).stops_on_induction


def depth_preset(cfg: StudyConfig, run: StudyRun, control_steps: int | None = None) -> Preset:
    """What one model trains with: the preset (on the GPT-2 block for an MLP twin) with the
    study's seed and corpus; ``--steps`` when given, else a 2+-layer model stops
    ``after_induction`` steps after its induction score passes the floor, and a 1-layer control
    trains ``control_steps`` (the longest deeper run of its kind)."""
    preset = with_overrides(
        get_preset(run.preset, run.n_layers, mlp=run.mlp),
        seed=cfg.seed,
        corpus=cfg.corpus,
        threads=cfg.threads,
    )
    if cfg.steps is not None:
        return with_overrides(preset, steps=cfg.steps)
    if not stops_on_induction(run.preset):
        return preset
    if run.n_layers > 1:
        return until_induction(preset, cfg.after_induction)
    return with_overrides(preset, steps=control_steps)


def control_steps(out: Path, runs: Sequence[StudyRun], control: StudyRun) -> int | None:
    """How long a 1-layer control trains: as long as the longest deeper run of its kind
    (attention-only or MLP) in its setting, else of any kind (None: the preset's steps)."""
    deeper = [r for r in runs if r.n_layers > 1 and r.preset == control.preset]
    for pool in ([r for r in deeper if r.mlp == control.mlp], deeper):
        steps = [rows[-1]["step"] for r in pool if (rows := read_metrics(out / r.name))]
        if steps:
            return int(max(steps))
    return None
