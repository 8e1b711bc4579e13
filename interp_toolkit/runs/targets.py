"""What a command-line target names: a registry of target kinds instead of if/else dispatch.

A kind is a name, a test "does this spec name one of mine?" and a loader; the first kind that
claims a spec loads it. ``snapshot`` claims ``RUN@STEP`` (a run folder's kept weights at STEP,
``RUN/snapshots/step_STEP.safetensors``; a path that exists as given is never read as one);
``hf`` claims Hugging Face causal LMs of any architecture TransformerLens boots: hub ids,
GPT-2's short names and ``save_pretrained`` folders (:mod:`.hub`, :mod:`.hf`); ``toy`` (a run
folder) takes everything else, so a missing folder gets the run folder's error. A new kind is
one :class:`TargetKind` entry in :data:`TARGET_KINDS`. ``dtype`` (``fp32``/``bf16``) is the
dtype of the loaded weights, whatever the kind.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from interp_toolkit.runs.hub import is_hf_spec
from interp_toolkit.runs.spec import split_step
from interp_toolkit.runs.target import Target
from interp_toolkit.runtime.devices import resolve_device

__all__ = ["TARGET_KINDS", "Target", "TargetKind", "load_target", "split_step"]

Spec = str | os.PathLike[str]


@dataclass(frozen=True)
class TargetKind:
    """``claims(spec)`` says whether the spec is this kind's; ``load(spec, device, for_weights,
    dtype)`` loads it (imported only when used, so claiming stays cheap)."""

    name: str
    claims: Callable[[Spec], bool]
    load: Callable[[Spec, str, bool, str], Target]


def _load_hf(spec: Spec, device: str, for_weights: bool, dtype: str) -> Target:
    from interp_toolkit.runs.hf import load_hf_target

    return load_hf_target(spec, device=device, dtype=dtype, compat=for_weights)


def _load_run(spec: Spec, device: str, for_weights: bool, dtype: str) -> Target:
    from interp_toolkit.runs.folder import load_run

    run = load_run(Path(spec), device=device)
    return Target(name=run.name, kind="toy", model=run.model, codec=run.codec, source=run)


def _load_snapshot(spec: Spec, device: str, for_weights: bool, dtype: str) -> Target:
    from interp_toolkit.errors import UserError
    from interp_toolkit.runs.folder import RunPaths, load_run, read_config

    run_path, step_text = split_step(spec) or (Path(spec), "")
    read_config(run_path)  # not a run folder: the run folder's own error
    paths = RunPaths(run_path)
    kept = paths.snapshot_steps()
    # '²' is a digit to str.isdigit
    step = int(step_text) if step_text.isascii() and step_text.isdigit() else None
    if step not in kept:
        what = f"step {step_text!r} is not a whole number"
        if step is not None:
            what = f"{run_path} kept no weights at step {step}"
        raise UserError(f"{what}: give RUN@STEP with a kept step ({_steps_list(kept)}).")
    run = load_run(run_path, device=device, weights=paths.snapshot(step))
    return Target(f"{run.name}@{step}", "toy", run.model, run.codec, source=run)


def _steps_list(kept: list[int]) -> str:
    if not kept:
        return "this run kept none: train it with snapshots, e.g. the default snapshot_log"
    if len(kept) <= 80:
        return f"kept: {', '.join(map(str, kept))}"
    head, tail = ", ".join(map(str, kept[:40])), ", ".join(map(str, kept[-20:]))
    return f"kept: {head}, ... ({len(kept) - 60} more) ..., {tail}"


TARGET_KINDS: tuple[TargetKind, ...] = (
    TargetKind("snapshot", lambda spec: split_step(spec) is not None, _load_snapshot),
    TargetKind("hf", is_hf_spec, _load_hf),
    TargetKind("toy", lambda spec: True, _load_run),
)


def load_target(
    spec: Spec,
    device: str | torch.device = "auto",
    *,
    for_weights: bool = True,
    dtype: str = "fp32",
) -> Target:
    """``spec`` is a run folder (``RUN@STEP``: its weights kept at STEP), a Hugging Face hub id
    (``EleutherAI/pythia-70m``, ``gpt2``...) or a ``save_pretrained`` folder of any causal LM
    TransformerLens boots, loaded onto ``device`` (``auto``: a GPU when present) with weights in
    ``dtype`` (``fp32`` or ``bf16``).

    ``for_weights=False`` (commands that only read activations: ``heads``, ``exam``, ``view``) loads
    a Hugging Face model without TL's compatibility mode: attention patterns and every head score
    are the same, and GPT-2 small peaks at ~0.8 GiB instead of ~2.5 GiB (see docs/models.md).
    """
    from interp_toolkit.runs.hf_checks import dtype_named

    torch_dtype = dtype_named(dtype)
    kind = next(k for k in TARGET_KINDS if k.claims(spec))
    target = kind.load(spec, str(resolve_device(device)), for_weights, dtype)
    if kind.name != "hf" and torch_dtype != torch.float32:
        target.model.to(torch_dtype)
    return target
