"""Checkpoints: the resumable state of a run (``RUN/checkpoints/``), and what a run folder may
be when training starts (new, continued with ``resume``, or discarded with ``restart``).

A checkpoint is ``step_N.safetensors`` (weights), ``step_N.optimizer.pt`` and ``state.json``
(step, tokens, elapsed seconds), written in that order, each atomically. ``state.json`` is
written last and names the step, so it commits the checkpoint: a process killed while writing
one leaves the previous checkpoint whole. Files of other steps are removed after the commit.
A checkpoint is read whole (and checked) before anything in the folder changes. Tensors are saved
on the CPU, so a run continues on any device.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import check_readable, path_kind, read_json, write_bytes, write_json
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import (
    RunPaths,
    read_config,
    read_metrics,
    read_weights,
    save_weights,
)
from interp_toolkit.text.stream import DataConfig
from interp_toolkit.training.settings import (
    Configs,
    TrainSettings,
    config_differences,
    recorded_configs,
)


@dataclass(frozen=True)
class Progress:
    """Where training stands: optimizer steps done, tokens seen, seconds spent training."""

    step: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0


@dataclass
class Checkpoint:
    """A checkpoint read from disk: its progress, the model weights and the optimizer state."""

    progress: Progress
    weights: dict[str, torch.Tensor]
    optimizer: dict[str, Any]


@dataclass
class Start:
    """How a training starts in its folder: a new run, or the run already there (``resumed``)
    from ``checkpoint`` (None: it stopped before its first checkpoint, so from step 0)."""

    resumed: bool
    checkpoint: Checkpoint | None = None


def save_checkpoint(
    paths: RunPaths, model: TransformerBridge, optimizer: torch.optim.Optimizer, at: Progress
) -> None:
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    keep = {paths.checkpoint_weights(at.step), paths.checkpoint_optimizer(at.step)}
    try:
        save_weights(model, paths.checkpoint_weights(at.step))
        buf = io.BytesIO()
        torch.save(_to_cpu(optimizer.state_dict()), buf)
        write_bytes(paths.checkpoint_optimizer(at.step), buf.getvalue())
        write_json(
            paths.checkpoint_state,
            {"step": at.step, "tokens": at.tokens, "elapsed_s": round(at.elapsed_s, 3)},
        )
    except BaseException:  # e.g. a full disk: the files of this step go, the last checkpoint stays
        if committed_step(paths) != at.step:
            for file in keep:
                file.unlink(missing_ok=True)
        raise
    for old in paths.checkpoints.iterdir():
        if old != paths.checkpoint_state and old not in keep:
            old.unlink()


def committed_step(paths: RunPaths) -> int | None:
    """The step of the run's last whole checkpoint (None: none, or unreadable)."""
    try:
        progress = read_progress(paths)
    except UserError:
        return None
    return progress.step if progress else None


def _restart_fix(paths: RunPaths) -> str:
    return (
        f"start the run again with `interp-toolkit train --restart --out {paths.root}` "
        "(it discards the run's checkpoint)."
    )


def read_progress(paths: RunPaths) -> Progress | None:
    """The progress ``state.json`` commits (None when the run has no checkpoint)."""
    if not paths.checkpoint_state.is_file():
        return None
    fix = _restart_fix(paths)
    state = read_json(paths.checkpoint_state, "checkpoint state", fix)
    try:
        progress = Progress(int(state["step"]), int(state["tokens"]), float(state["elapsed_s"]))
    except (KeyError, TypeError, ValueError):
        progress = None
    if progress is None or progress.step < 1:
        raise UserError(
            f"checkpoint state {paths.checkpoint_state} is damaged (no valid step): {fix}"
        )
    return progress


def _to_cpu(state: Any) -> Any:
    """The optimizer state with every tensor copied to the CPU (a checkpoint loads anywhere; the
    optimizer moves its state to its parameters' device when it is loaded)."""
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        return {k: _to_cpu(v) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_to_cpu(v) for v in state)
    return state


def read_checkpoint(paths: RunPaths) -> Checkpoint | None:
    """The run's last checkpoint, read whole; None when it has none. Missing or damaged files
    are a UserError naming the file."""
    progress = read_progress(paths)
    if progress is None:
        return None
    fix = _restart_fix(paths)
    files = (paths.checkpoint_weights(progress.step), paths.checkpoint_optimizer(progress.step))
    for file in files:
        if not file.is_file():
            raise UserError(f"the checkpoint of step {progress.step} has no {file}: {fix}")
    weights, readable = read_weights(files[0], fix), check_readable(files[1])
    try:
        optimizer = torch.load(readable, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated file raises RuntimeError, EOFError, UnpicklingError...
        raise UserError(
            f"optimizer state {files[1]} is damaged ({type(exc).__name__}): {fix}"
        ) from None
    if not isinstance(optimizer, dict) or "state" not in optimizer:
        raise UserError(f"optimizer state {files[1]} is damaged (not an optimizer state): {fix}")
    return Checkpoint(progress, weights, optimizer)


def prepare_out(
    paths: RunPaths, *, resume: bool, restart: bool, note: Callable[[str], None]
) -> Start:
    """Check the (locked) run folder before any work and say how training starts in it."""
    if resume and restart:
        raise UserError("--resume and --restart contradict each other: give one of them.")
    entries = sorted(p for p in paths.root.iterdir() if p != paths.lock)
    if restart and entries:
        _discard(paths, entries, note)
        return Start(resumed=False)
    if resume:
        read_config(paths.root)  # not a run, or a damaged config -> UserError
        for file in (
            paths.config,
            paths.vocab,
            paths.weights,
            paths.metrics,
            paths.checkpoint_state,
        ):
            kind = path_kind(file)  # a FIFO here would hang the write at the end
            if kind not in ("a file", "missing"):
                raise UserError(
                    f"{file} is {kind}, not the run's file: remove it (training writes it "
                    "again), then run the command again."
                )
        checkpoint = read_checkpoint(paths)
        if checkpoint is None and paths.weights.is_file():
            raise UserError(
                f"{paths.root} has no checkpoint to resume from (its model was saved without "
                f"one): train it again with --restart, or choose another --out."
            )
        return Start(resumed=True, checkpoint=checkpoint)
    if entries:
        if paths.config.exists():
            raise UserError(
                f"{paths.root} already holds a run ({_describe(paths)}): continue it with "
                "--resume, start it over with --restart, or choose another --out."
            )
        raise UserError(f"{paths.root} is not empty: choose a new or empty folder for --out.")
    return Start(resumed=False)


def _describe(paths: RunPaths) -> str:
    """Where the run in ``paths`` stands, in a few words (for messages; never raises)."""
    try:
        progress = read_progress(paths)
    except UserError:
        return "its checkpoint is damaged"
    rows = read_metrics(paths.root)
    done = "finished" if paths.weights.is_file() else "unfinished"
    if progress is not None:
        return f"{done}, checkpoint at step {progress.step}"
    return f"{done}, no checkpoint, {len(rows)} metrics lines"


def _discard(paths: RunPaths, entries: list[Path], note: Callable[[str], None]) -> None:
    """``--restart``: remove a run's files, saying what goes; refuse a folder that is not a run."""
    foreign = [p.name for p in entries if p not in paths.known()]
    if foreign or not paths.config.exists():
        what = f"holds {', '.join(foreign[:3])}" if foreign else "has no config.json"
        raise UserError(
            f"{paths.root} is not a run folder ({what}): --restart only discards a run; "
            "choose another --out."
        )
    note(
        f"--restart: discarding the run in {paths.root} ({_describe(paths)}): "
        f"{', '.join(p.name for p in entries)}"
    )
    for p in entries:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def continued_configs(
    paths: RunPaths, begin: Start, requested: Configs
) -> tuple[ModelConfig, DataConfig, TrainSettings, str | None]:
    """The recorded configs of the run being resumed, with the requested step budget; a
    UserError when the request differs in anything else, or ends before the checkpoint."""
    config = read_config(paths.root)
    recorded = recorded_configs(config, paths.config)
    diffs = config_differences(recorded, requested, steps=False)
    if diffs:
        raise UserError(
            f"{paths.root} was trained with other settings than asked: {'; '.join(diffs)}. "
            "--resume continues a run as it was configured: leave those options out, or start "
            "it over with them with --restart (discards the run), or choose another --out."
        )
    steps = requested[2].steps
    done = begin.checkpoint.progress.step if begin.checkpoint else 0
    if steps < done:
        raise UserError(
            f"{paths.root} is already at step {done}: ask for --steps {done} or more "
            f"(the run was planned for {recorded[2].steps})."
        )
    model_cfg, data_cfg, train_cfg = recorded
    train_cfg = dataclasses.replace(train_cfg, steps=steps)
    return model_cfg, data_cfg, train_cfg, config["settings"].get("preset")
