"""What the command line gave a command, before typer converts it: ranges for counts, path
options given ``''`` (typer turns ``''`` into ``Path('.')``, the current folder), the raw text of
each option (``--json newdir/``: typer drops the slash), and what the command reads (its
``target``, ``run`` or ``--chance-run``), which no output may land in (``check_out_file``).

The rules apply by parameter name to every command, as :data:`~.boundary.OPTION_RULES` does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate

#: The largest count any option takes: far past any real use (a trillion steps or tokens), and
#: below where lengths and indices overflow (``train --steps 10**30`` used to crash).
COUNT_MAX = 10**12

#: Parameters that name a path although typed ``str`` (besides every ``Path`` parameter).
PATH_NAMES = ("target", "corpus", "chance_run")

#: Parameters that name what a command reads: a run folder (or a model folder).
READ_NAMES = ("target", "run", "chance_run")


def count(least: int = 1, most: int = COUNT_MAX) -> Callable[[Any, str], int]:
    """The rule of a count option: a whole number from ``least`` to ``most``."""

    def rule(value: Any, name: str) -> int:
        n = validate.count(value, name, least)
        if n > most:
            raise UserError(
                f"{name}={value!r} cannot work: use a whole number from {least} to {most}."
            )
        return n

    return rule


def workers(value: Any, name: str) -> int:
    """Processes trained side by side: at most this machine's CPU cores (2 always works)."""
    cores = os.cpu_count() or 1
    most = max(2, cores)
    n = validate.count(value, name)
    if n > most:
        raise UserError(
            f"{name}={value!r} cannot work: this machine has {cores} CPU cores; use 1 to {most}."
        )
    return n


_raw: dict[str, Any] = {}
_reads: list[str] = []


def _is_path(param: Any) -> bool:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is Path or param.name in PATH_NAMES


def _flag(param: Any) -> str:
    if not hasattr(param, "is_flag"):  # an argument
        return param.name.upper()
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def note_arguments(command: Any, parent: Any, name: str | None, args: list[str]) -> None:
    """Parse ``args`` as ``command`` will, keep each option's raw text (:func:`raw_value`) and
    refuse a path given as ``''`` (or blanks). A parse error is left to the real parse."""
    from typer._click.core import Context

    _raw.clear()
    try:
        ctx = Context(command, parent=parent, info_name=name, resilient_parsing=True)
        opts, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # the real parse says what is wrong, in its words
        return
    for param in command.params:
        raw = opts.get(param.name)
        if raw is None:
            continue
        for opt in param.opts:
            _raw[opt] = raw
        values = raw if isinstance(raw, (list, tuple)) else [raw]
        if _is_path(param) and any(isinstance(v, str) and not v.strip() for v in values):
            raise UserError(
                f"{_flag(param)} is an empty path ('' would mean the current folder): give a "
                "file or folder name (. for the current folder)."
            )


def raw_value(flag: str) -> str | None:
    """The text the command line gave option ``flag`` (before typer made it a Path), if any."""
    raw = _raw.get(flag)
    return raw if isinstance(raw, str) else None


def note_reads(params: dict[str, Any]) -> None:
    """Remember what the running command reads (its :data:`READ_NAMES` parameters)."""
    from interp_toolkit.runs.spec import run_folder  # RUN@STEP reads RUN

    _reads[:] = [run_folder(params[n]) for n in READ_NAMES if params.get(n) is not None]


def reads() -> tuple[str, ...]:
    """The run (or model) folders the running command reads."""
    return tuple(_reads)


def check_target(spec: Any) -> None:
    """A Hugging Face target checked before the command imports torch and TransformerLens
    (seconds): a hub id the cache lacks while offline, or an unknown GPT-2 name, is refused at
    once."""
    if not isinstance(spec, str) or Path(spec).exists():
        return
    from interp_toolkit.runs.hub import is_hf_spec, resolve

    if is_hf_spec(spec):
        resolve(spec)
