"""What the command line gave a command, before typer converts it: ranges for counts, path
options given ``''`` (typer turns ``''`` into ``Path('.')``, the current folder), the raw text of
each option (``--json newdir/``: typer drops the slash), and what the command reads (its
``target``, ``run`` or ``--chance-run``), which no output may land in (``check_out_file``).

The rules apply by parameter name to every command, as :data:`~.boundary.OPTION_RULES` does.
What one command line gave and claimed lives in its :class:`Invocation` (one per command run,
made by the boundary and dropped after it: :func:`invocation`), never in module state.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import typer

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate

#: The largest count any option takes: far past any real use (a trillion steps or tokens), and
#: below where lengths and indices overflow (``train --steps 10**30`` used to crash).
COUNT_MAX = 10**12

#: Parameters that name a path although typed ``str`` (besides every ``Path`` parameter).
PATH_NAMES = ("target", "corpus", "chance_run")

#: Parameters that name what a command reads: a run folder (or a model folder).
READ_NAMES = ("target", "run", "chance_run")


def count(least: int = 1, most: int = COUNT_MAX, cost: str = "") -> Callable[[Any, str], int]:
    """The rule of a count option: a whole number from ``least`` to ``most`` (``cost``: what
    each one costs, said when a count is refused)."""
    return partial(validate.count, least=least, most=most, cost=cost)


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


@dataclass
class Invocation:
    """One command line's state: each option's raw text (``raw``), the folders it reads
    (``reads``), and the outputs claimed so far, by place (``claimed``)."""

    raw: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    claimed: dict[str, str] = field(default_factory=dict)


#: The running command's :class:`Invocation` (None outside one: nothing is remembered).
_CURRENT: ContextVar[Invocation | None] = ContextVar("interp_toolkit_invocation", default=None)


@contextmanager
def invocation() -> Iterator[Invocation]:
    """A fresh :class:`Invocation` for one command run, dropped when it ends."""
    token = _CURRENT.set(Invocation())
    try:
        yield _CURRENT.get() or Invocation()
    finally:
        _CURRENT.reset(token)


def current() -> Invocation:
    """The running command's :class:`Invocation` (a throwaway one outside a command)."""
    return _CURRENT.get() or Invocation()


def _is_path(param: Any) -> bool:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return annotation is Path or param.name in PATH_NAMES


def flag_of(param: Any) -> str:
    if not hasattr(param, "is_flag"):  # an argument
        return param.name.upper()
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def note_arguments(command: Any, parent: Any, name: str | None, args: list[str]) -> None:
    """Parse ``args`` as ``command`` will, keep each option's raw text (:func:`raw_value`) and
    refuse a path given as ``''`` (or blanks). A parse error is left to the real parse."""
    raw_of = current().raw
    raw_of.clear()
    try:
        ctx = typer.Context(command, parent=parent, info_name=name, resilient_parsing=True)
        opts, _, _ = command.make_parser(ctx).parse_args(args=list(args))
    except Exception:  # the real parse says what is wrong, in its words
        return
    for param in command.params:
        raw = opts.get(param.name)
        if raw is None:
            continue
        raw_of.update(dict.fromkeys(param.opts, raw))
        values = raw if isinstance(raw, (list, tuple)) else [raw]
        if _is_path(param) and any(isinstance(v, str) and not v.strip() for v in values):
            raise UserError(
                f"{flag_of(param)} is an empty path ('' would mean the current folder): give a "
                "file or folder name (. for the current folder)."
            )


def raw_value(flag: str) -> str | None:
    """The text the command line gave option ``flag`` (before typer made it a Path), if any."""
    raw = current().raw.get(flag)
    return raw if isinstance(raw, str) else None


def note_reads(params: dict[str, Any]) -> None:
    """Remember what the running command reads (its :data:`READ_NAMES` parameters)."""
    from interp_toolkit.runs.spec import run_folder  # RUN@STEP reads RUN

    current().reads = tuple(run_folder(params[n]) for n in READ_NAMES if params.get(n) is not None)


def check_text(command: Any, params: dict[str, Any]) -> None:
    """Every text option (not a path) is text a codec can encode: bytes that are not UTF-8 on
    the command line are one line naming the option (:func:`~interp_toolkit.runtime.validate.
    unicode`); a path may hold them (Linux file names are bytes)."""
    for param in (p for p in command.params if not _is_path(p)):
        value = params.get(param.name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str):
                validate.unicode(v, flag_of(param))


def check_target(spec: Any) -> None:
    """A Hugging Face target checked before the command imports torch and TransformerLens
    (seconds): a hub id the cache lacks while offline, or an unknown GPT-2 name, is refused at
    once."""
    if not isinstance(spec, str) or Path(spec).exists():
        return
    from interp_toolkit.runs.hub import is_hf_spec, resolve

    if is_hf_spec(spec):
        resolve(spec)
