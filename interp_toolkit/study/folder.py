"""A study (or sweep) folder and the runs in it: the marker and its lock, which runs may be
reused (:func:`is_finished`), and a run's training as a job (:func:`train_job`, run side by side
by :mod:`interp_toolkit.study.jobs`).

A run is reused only when its recorded config equals the one asked for; every run is checked
before any work (:func:`planned_runs`), so a study never half-trains into a folder it must refuse.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from interp_toolkit.errors import Interrupted, UserError, signal_of
from interp_toolkit.files.io import LOCK_NAME, check_writable_dir, folder_lock, write_json
from interp_toolkit.runs.folder import Run, RunPaths, load_run, read_config
from interp_toolkit.runtime.signals import orphaned
from interp_toolkit.training import train_model
from interp_toolkit.training.checkpoints import read_progress
from interp_toolkit.training.presets import Preset
from interp_toolkit.training.settings import config_differences, recorded_configs
from interp_toolkit.training.steplog import planned_steps

#: A study (or sweep) folder: this marker, ``index.html`` (a study: ``claims.md``) and one run
#: folder per model.
STUDY_MARKER = "study.json"
INDEX = "index.html"
#: The claims table as Markdown (what the README shows).
CLAIMS_MD = "claims.md"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_study_dir(out: Path, *, create: bool = True) -> None:
    """``out`` must be new, empty, or a study folder this command wrote before; ``create``: make
    it (and check it is writable) now."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a folder: choose another --out.")
    above = [p for p in out.absolute().parents if p.resolve() == out.resolve()]
    if above:  # DIR/seed-1 -> . would be DIR itself: its runs are seed 0's
        raise UserError(
            f"{out} is a link to {above[0]}, a folder above it (its runs would be another "
            f"study's): remove the link (rm {out}) and run the command again."
        )
    held = [p for p in out.iterdir() if p.name != LOCK_NAME] if out.is_dir() else []
    if held and not (out / STUDY_MARKER).is_file():
        raise UserError(
            f"{out} holds something else (no {STUDY_MARKER}): choose a new or empty folder for --out."
        )
    if create:
        check_writable_dir(out, "study folder")


@contextmanager
def study_folder(out: Path, marker: dict[str, Any]) -> Iterator[None]:
    """Hold the study folder (a second study in it is refused) and keep ``study.json`` true:
    ``running`` while the block runs, ``stopped`` with the reason if it fails (the block
    writes ``done`` itself). An interrupt (SIGINT, SIGTERM, SIGHUP) records the signal and what
    had finished (:func:`finished_runs`), and its line says so and how to go on."""
    with folder_lock(out, "study folder"):
        write_json(out / STUDY_MARKER, {**marker, "status": "running"})
        try:
            yield
        except KeyboardInterrupt as exc:
            done = finished_runs(out)
            stopped = {"status": "stopped", "signal": signal_of(exc), "reason": str(exc)}
            write_json(out / STUDY_MARKER, {**marker, **stopped, "finished": done})
            raise Interrupted(
                f"stopped by {signal_of(exc)}; {_finished_phrase(done)}; {out / STUDY_MARKER} "
                "says stopped. Run the same command again to go on: finished runs are reused, "
                "unfinished ones resume from their checkpoints.",
                getattr(exc, "signum", signal.SIGINT),
            ) from None
        except BaseException as exc:
            reason = str(exc) or type(exc).__name__
            write_json(out / STUDY_MARKER, {**marker, "status": "stopped", "reason": reason})
            raise


def finished_runs(out: Path) -> dict[str, Any]:
    """What a study folder holds so far: runs ``trained`` (their weights written), ``analysed``
    (their report written) and ``unfinished`` (the step of their last checkpoint)."""
    trained, analysed, unfinished = [], [], {}
    for path in sorted(p for p in out.iterdir() if RunPaths(p).config.is_file()):
        paths = RunPaths(path)
        if paths.weights.is_file():
            trained.append(path.name)
            if paths.report.is_file():
                analysed.append(path.name)
        else:
            try:
                progress = read_progress(paths)
            except UserError:  # a damaged state: named when the run is resumed
                progress = None
            unfinished[path.name] = None if progress is None else progress.step
    return {"trained": trained, "analysed": analysed, "unfinished": unfinished}


def _finished_phrase(done: dict[str, Any]) -> str:
    cut = [f"{n} (step {s})" if s is not None else n for n, s in done["unfinished"].items()]
    return "; ".join(
        f"{k}: {', '.join(xs) or 'none'}" for k, xs in {**done, "unfinished": cut}.items()
    )


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


#: The run folders this process trained (or had its workers train): a run found finished
#: there afterwards is the one just trained, not one "found" and reused.
TRAINED_HERE: set[Path] = set()


def train_or_reuse(path: Path, preset: Preset, device: str = "auto") -> Run:
    """The finished run ``preset`` asks for in ``path``: reused, continued from its checkpoint,
    or trained (:func:`is_finished` says which, or why not), on ``device``."""
    if is_finished(path, preset):
        if path.resolve() in TRAINED_HERE:
            say(f"[{path.name}] loading the run trained above")
        else:
            say(f"[{path.name}] finished run with the same settings found: reusing it")
        return load_run(path, device=device)
    resume = RunPaths(path).config.is_file()
    say(
        f"[{path.name}] {'resuming' if resume else 'training'}: {preset.model.n_layers} layer(s), "
        f"{planned_steps(preset.train)}, preset {preset.name}"
    )
    TRAINED_HERE.add(path.resolve())
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


def train_job(path: Path, preset: Preset, device: str, parent: int) -> None:
    """One run's training as a job (:mod:`~interp_toolkit.study.jobs`): train (or reuse) it; the
    parent loads it later. In a worker process stopped because the parent died
    (:func:`~.jobs.worker_start`), it exits once its checkpoint is saved: nobody is left to hand
    it another job."""
    try:
        train_or_reuse(path, preset, device)
    except KeyboardInterrupt as exc:
        if orphaned(parent):
            os._exit(getattr(exc, "exit_code", 128 + signal.SIGTERM))
        raise
