"""``RUN@STEP``: a run folder's weights kept at a step (``RUN/snapshots/step_STEP.safetensors``),
named on the command line. Nothing here imports torch (the CLI reads it before any model)."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The ``--dtype`` choices: the dtype a model's weights are loaded in (torch's names in
#: :data:`interp_toolkit.runs.hf_checks.DTYPES`).
DTYPE_NAMES = ("fp32", "bf16")

_AT_STEP = re.compile(r"^(?P<run>.+)@(?P<step>[^@/\\]*)$")


def split_step(spec: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """``RUN@STEP`` as (RUN, STEP's text), or None when ``spec`` names no step (no ``@``, or a
    path that exists as given: a folder named ``a@1`` is that folder)."""
    text = os.fspath(spec)
    found = _AT_STEP.match(text)
    if found is None or Path(text).exists():
        return None
    return Path(found["run"]), found["step"]


def run_folder(spec: str | os.PathLike[str]) -> str:
    """The folder ``spec`` reads: RUN for ``RUN@STEP``, else ``spec`` itself."""
    at = split_step(spec)
    return os.fspath(spec) if at is None else os.fspath(at[0])
