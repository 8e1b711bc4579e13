"""Checkpoints: the resumable state of a run (``RUN/checkpoints/``), and checking a run folder.

A checkpoint is the model weights, the optimizer state and ``state.json`` (step, tokens, elapsed
seconds), written in that order; ``state.json`` is written last, so it commits the checkpoint.
Tensors are saved on the CPU, so a run continues on any device.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.io import write_json
from interp_toolkit.runs import RunPaths, read_config, save_weights


@dataclass(frozen=True)
class Progress:
    """Where training stands: optimizer steps done, tokens seen, seconds spent training."""

    step: int = 0
    tokens: int = 0
    elapsed_s: float = 0.0


def save_checkpoint(
    paths: RunPaths, model: TransformerBridge, optimizer: torch.optim.Optimizer, at: Progress
) -> None:
    paths.checkpoints.mkdir(parents=True, exist_ok=True)
    save_weights(model, paths.checkpoint_weights)
    tmp = paths.checkpoint_optimizer.with_suffix(".pt.tmp")
    torch.save(_to_cpu(optimizer.state_dict()), tmp)
    os.replace(tmp, paths.checkpoint_optimizer)
    write_json(
        paths.checkpoint_state,
        {"step": at.step, "tokens": at.tokens, "elapsed_s": round(at.elapsed_s, 3)},
    )


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


def load_optimizer_state(paths: RunPaths) -> dict[str, Any]:
    return torch.load(paths.checkpoint_optimizer, map_location="cpu", weights_only=True)


def prepare_out(paths: RunPaths, resume: bool) -> Progress | None:
    """Check the run folder before any work; return the saved progress when resuming."""
    if resume:
        read_config(paths.root)  # missing / other version -> UserError
        if not paths.checkpoint_state.is_file() or not paths.checkpoint_optimizer.is_file():
            raise UserError(
                f"{paths.root} has no checkpoint to resume from: train it again without --resume."
            )
        state = json.loads(paths.checkpoint_state.read_text(encoding="utf-8"))
        return Progress(int(state["step"]), int(state["tokens"]), float(state["elapsed_s"]))
    if paths.root.exists() and any(paths.root.iterdir()):
        if paths.config.exists():
            raise UserError(
                f"{paths.root} already holds a run: continue it with --resume, or choose another --out."
            )
        raise UserError(f"{paths.root} is not empty: choose a new or empty folder for --out.")
    return None
