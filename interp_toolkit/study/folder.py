"""A study (or sweep) folder and the runs in it: the marker and its lock, which runs may be
reused (:func:`is_finished`), and training runs side by side (:func:`train_runs`).

A run is reused only when its recorded config equals the one asked for; every run is checked
before any work (:func:`planned_runs`), so a study never half-trains into a folder it must refuse.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import LOCK_NAME, check_writable_dir, folder_lock, write_json
from interp_toolkit.runs.folder import Run, RunPaths, load_run, read_config
from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.training import train_model
from interp_toolkit.training.checkpoints import read_progress
from interp_toolkit.training.presets import Preset
from interp_toolkit.training.settings import config_differences, recorded_configs

#: A study (or sweep) folder: this marker, ``index.html`` and one run folder per model.
STUDY_MARKER = "study.json"
INDEX = "index.html"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_study_dir(out: Path) -> None:
    """``out`` must be new, empty, or a study folder this command wrote before."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a folder: choose another --out.")
    held = [p for p in out.iterdir() if p.name != LOCK_NAME] if out.is_dir() else []
    if held and not (out / STUDY_MARKER).is_file():
        raise UserError(
            f"{out} holds something else (no {STUDY_MARKER}): choose a new or empty folder for --out."
        )
    check_writable_dir(out, "study folder")


@contextmanager
def study_folder(out: Path, marker: dict[str, Any]) -> Iterator[None]:
    """Hold the study folder (a second study in it is refused) and keep ``study.json`` true:
    ``running`` while the block runs, ``stopped`` with the reason if it fails (the block
    writes ``done`` itself)."""
    with folder_lock(out, "study folder"):
        write_json(out / STUDY_MARKER, {**marker, "status": "running"})
        try:
            yield
        except BaseException as exc:
            reason = str(exc) or type(exc).__name__
            write_json(out / STUDY_MARKER, {**marker, "status": "stopped", "reason": reason})
            raise


def is_finished(path: Path, preset: Preset) -> bool:
    """Whether ``path`` holds the finished run ``preset`` asks for. False when it holds nothing
    yet, or that run unfinished (or shorter: it is continued); a UserError when it holds a run
    recorded with other settings, or trained past the steps asked for."""
    paths = RunPaths(path)
    if not paths.config.is_file():
        return False
    recorded = recorded_configs(read_config(path), paths.config)
    diffs = config_differences(recorded, (preset.model, preset.data, preset.train), steps=False)
    progress = read_progress(paths)
    if progress is not None and progress.step > preset.train.steps:
        diffs.append(f"steps: trained to {progress.step} (asked {preset.train.steps})")
    if diffs:
        raise UserError(
            f"{path} holds a run trained otherwise than asked: {'; '.join(diffs)}. Reusing it "
            f"would mislabel it: choose another --out, or delete {path} to train it as asked."
        )
    return paths.weights.is_file() and recorded[2].steps == preset.train.steps


def train_or_reuse(path: Path, preset: Preset, device: str = "auto") -> Run:
    """The finished run ``preset`` asks for in ``path``: reused, continued from its checkpoint,
    or trained (:func:`is_finished` says which, or why not), on ``device``."""
    if is_finished(path, preset):
        say(f"[{path.name}] finished run with the same settings found: reusing it")
        return load_run(path, device=device)
    resume = RunPaths(path).config.is_file()
    say(
        f"[{path.name}] {'resuming' if resume else 'training'}: {preset.model.n_layers} layer(s), "
        f"{preset.train.steps} steps, preset {preset.name}"
    )
    return train_model(
        path,
        preset.model,
        preset.data,
        preset.train,
        resume=resume,
        preset=preset.name,
        device=device,
    ).run


def planned_runs(out: Path, presets: dict[str, Preset]) -> None:
    """Check every run of a study or sweep before any work: valid settings, and a folder that is
    empty, or holds the same run (:func:`is_finished`)."""
    for name, preset in presets.items():
        preset.validate()
        is_finished(out / name, preset)


def _train_quietly(path: Path, preset: Preset) -> None:
    """A worker process's job: train (or reuse) one run on the CPU; the parent loads it later."""
    train_or_reuse(path, preset, "cpu")


def train_runs(jobs: Sequence[tuple[Path, Preset]], workers: int, device: str = "auto") -> None:
    """Train (or reuse) independent runs in the order given (put the longest first): on the CPU
    ``workers`` at a time in separate processes (a lone run trains here); on any other device one
    after another (processes sharing one accelerator would only contend for it). Each run is a
    function of its preset alone, so running them side by side changes nothing but the wall
    time."""
    jobs = [(path, preset) for path, preset in jobs if not is_finished(path, preset)]
    with training(jobs, workers if len(jobs) > 1 else 1, device):
        pass


@contextmanager
def training(
    jobs: Sequence[tuple[Path, Preset]], workers: int, device: str = "auto"
) -> Iterator[None]:
    """Train (or reuse) ``jobs`` as :func:`train_runs` does, while the block runs: on the CPU
    they train in worker processes (``workers`` at most) and the block runs meanwhile (analysing
    other runs, say); on any other device, or with one worker, they train first. Every job has
    finished, or raised, when the block exits."""
    jobs = [(path, preset) for path, preset in jobs if not is_finished(path, preset)]
    if not jobs or workers <= 1 or resolve_device(device).type != "cpu":
        for path, preset in jobs:
            train_or_reuse(path, preset, device)
        yield
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context)
    try:
        futures = [pool.submit(_train_quietly, path, preset) for path, preset in jobs]
        yield
        for job in futures:
            job.result()
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
