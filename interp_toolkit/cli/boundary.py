"""The command line's one error boundary: what reaches the user when a command does not succeed.

- bad input (:class:`~interp_toolkit.errors.UserError`) and usage errors (typer's vendored click,
  ``typer._click``, or the ``click`` package: both are recognised by their interface): one line,
  exit 2. That includes an option given twice (refused: which one was meant?), an option out of
  its range (:data:`OPTION_RULES`, checked before the command runs) and a path that is a symlink
  loop or too long;
- Ctrl-C, SIGTERM or SIGHUP (each raises an interrupt, :mod:`interp_toolkit.runtime.signals`, so
  every "save on Ctrl-C" path runs): one line saying what was kept and how to go on (the command's
  own, or the files it wrote whole before it stopped), exit 128 + signal (130, 143, 129);
- a full disk (or ``/dev/full``), a read-only file system, a permission problem, the reader of
  a FIFO or socket output closing it, or memory running out: one line naming the file, exit 1
  (standard output closed early, as by ``| head``, exits 1 quietly, as click does);
- anything else is a bug: its traceback goes to a report file, and one line says where; exit 1.

The option table applies to every command by its parameters' names, so a new command with a
``--seed`` or ``--n-seqs`` option is checked without code of its own; :func:`claim_output`
(called by ``check_out_file``) refuses two outputs sent to one place (``--json - --csv -``).

typer turns a ``KeyboardInterrupt`` into a bare exit code, losing its message, so
:class:`BoundaryGroup` (the app's command class) carries it past typer as :class:`_Stopped`.
The boundary hooks into typer through its public seams only: ``typer.Typer(cls=...)`` with a
``typer.core.TyperGroup`` subclass, and a ``typer.Context`` subclass as each command's
``context_class`` (click's documented hook); what a command line claims lives in its
:class:`~.given.Invocation`, not in this module.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from importlib import import_module
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from interp_toolkit.cli.given import (
    check_target,
    check_text,
    count,
    current,
    flag_of,
    invocation,
    note_arguments,
    note_reads,
    workers,
)
from interp_toolkit.errors import UserError, signal_of
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.signals import stop_signals

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
NO_ACCESS = (errno.EACCES, errno.EPERM, errno.EROFS)
BAD_PATH = (errno.ELOOP, errno.ENAMETOOLONG)
TOO_BIG = (errno.EFBIG,)  # past the file-size limit (`ulimit -f`)

#: The range each number option needs, by parameter name, for every command (``None``, an option
#: left out, and text values are never checked: ``circuits --head 1.2`` is text, ``view --head``
#: numbers). :data:`COMMAND_RULES` overrides a name for one command. Counts stop at
#: :data:`~.given.COUNT_MAX`; ``--workers`` at the machine's CPU cores.
OPTION_RULES: dict[str, Callable[[Any, str], Any]] = {
    "seed": validate.seed,
    "temperature": validate.temperature,
    **dict.fromkeys(("tokens", "layer", "head", "neuron"), count(least=0)),
    **dict.fromkeys(("steps", "top_k", "top", "show", "n_seqs", "n_prompts"), count()),
    **dict.fromkeys(("max_step", "untrained_rows"), count()),
    **dict.fromkeys(("seq_len", "period"), count(least=2)),
    "n_untrained": count(most=10_000, cost="each is one more model drawn and scored in full"),
    "seeds": count(most=1_000, cost="each seed is a whole study of its own, in its own folder"),
    "step_size": partial(
        validate.number, least=1e-12, below=1.0, why="far below it no SGLD step moves a weight"
    ),
    "bandwidth": partial(validate.number, least=0.01, below=100.0, why="in natural-log steps"),
    "workers": workers,
}

#: The text options every command's ``--device`` and ``--dtype`` are checked by (each its
#: owner's check, one line; imported when used: they import torch).
TEXT_RULES = {
    "device": ("interp_toolkit.runtime.devices", "resolve_device"),
    "dtype": ("interp_toolkit.runs.hf_checks", "dtype_named"),
}
COMMAND_RULES: dict[tuple[str, str], Callable[[Any, str], Any]] = {
    ("probe", "n_seqs"): count(least=2),  # rows are split into train and test
    ("probe", "seq_len"): count(least=5),
}


def check_options(command: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every value checked against its rule (a UserError naming the option)."""
    checked = dict(params)
    for param in command.params:
        value = checked.get(param.name)
        rule = COMMAND_RULES.get((command.name, param.name)) or OPTION_RULES.get(param.name)
        if value is None or rule is None or isinstance(value, (str, bool)):
            continue
        flag = flag_of(param)
        if isinstance(value, (list, tuple)):
            checked[param.name] = type(value)(
                v if isinstance(v, (str, bool)) else rule(v, flag) for v in value
            )
        else:
            checked[param.name] = rule(value, flag)
    return checked


def refuse_repeated_options(command: Any, args: list[str]) -> None:
    """An option that takes one value, given twice, is refused: typer would keep the last one
    silently, and the user meant one of them."""
    options = {o: p for p in command.params if hasattr(p, "is_flag") for o in p.opts}
    seen: dict[str, str] = {}
    rest = iter(args)
    for arg in rest:
        value = None
        if arg == "--":
            return
        if arg.startswith("--") and "=" in arg:
            arg, value = arg.split("=", 1)
        elif not arg.startswith("--") and len(arg) > 2 and arg[:2] in options:
            arg, value = arg[:2], arg[2:]
        param = options.get(arg)
        if param is None:
            continue
        if not param.is_flag and value is None:
            value = next(rest, "")  # the option's value (none left: the parse says so)
        if param.multiple or getattr(param, "count", False):
            continue
        shown = arg if value is None else f"{arg} {value}"
        if param.name in seen:
            raise UserError(
                f"{arg} is given twice ({seen[param.name]}, then {shown}): give it once."
            )
        seen[param.name] = shown


def claim_output(key: str, flag: str) -> None:
    """Two output options of one command may not write to one place (``key``: ``stdout`` or a
    file's resolved path): ``--json - --csv -`` would interleave two formats."""
    other = current().claimed.setdefault(key, flag)
    if other != flag:
        where = "standard output" if key == "stdout" else key
        raise UserError(f"{other} and {flag} both write to {where}: send one of them elsewhere.")


def stdout_claimed() -> bool:
    """True when an output option of the running command writes to standard output (its tables
    and notes then stay off it)."""
    return "stdout" in current().claimed


class CheckedContext(typer.Context):
    """The context of every command: its options are checked (:func:`check_options`) before
    its function runs, and the outputs it claims start afresh."""

    def invoke(self, callback: Any, /, *args: Any, **kwargs: Any) -> Any:
        if callback is getattr(self.command, "callback", None):
            current().claimed.clear()
            check_text(self.command, kwargs)
            kwargs = check_options(self.command, kwargs)
            note_reads(kwargs)
            check_target(kwargs.get("target"))
            for name, (module, rule) in TEXT_RULES.items():  # after the target: they import torch
                if isinstance(kwargs.get(name), str):
                    getattr(import_module(module), rule)(kwargs[name])
        return super().invoke(callback, *args, **kwargs)


class _Stopped(Exception):
    """A KeyboardInterrupt (or :class:`~interp_toolkit.errors.Interrupted`) on its way past typer
    (its cause)."""


class _PipeClosed(Exception):
    """The reader of a FIFO or socket output closed it (its cause, an OSError): carried past
    click, which would exit 1 without a word on any EPIPE."""


class BoundaryGroup(TyperGroup):
    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            refuse_repeated_options(command, rest)
            note_arguments(command, ctx, name, rest)
            command.context_class = CheckedContext
            _flag_without_type(command.get_help_option(ctx))
        return name, command, rest

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_type(super().get_help_option(ctx))

    def invoke(self, ctx: Any) -> Any:
        try:
            with invocation():
                return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped from exc
        except BrokenPipeError as exc:
            if exc.filename is None:  # standard output closed (`| head`): quiet, as click does
                raise
            raise _PipeClosed from exc


def _flag_without_type(option: Any) -> Any:
    """``--help`` is a flag: no ``<bool>`` type beside it in the help (see :mod:`.help`)."""
    if option is not None and option.metavar is None:
        option.metavar = ""
    return option


def run(app: Any, argv: list[str] | None) -> None:
    """Run the typer ``app`` on ``argv``; return on success, else exit with the boundary's code."""
    if sys.stdout is None:  # started with `>&-`: nothing could print a result
        _fail(
            "error: standard output is closed (started with >&-): give it somewhere to go, "
            "e.g. >/dev/null or > out.txt.",
            1,
        )
    from interp_toolkit.files.io import WRITTEN

    _print_anything()
    try:
        os.getcwd()
    except FileNotFoundError:  # torch's oneMKL then dies with "FATAL ERROR"
        _fail(
            "error: the current folder no longer exists (it was deleted or moved): cd to a "
            "folder that exists and run the command again.",
            2,
        )
    before = len(WRITTEN)
    try:
        with stop_signals():
            code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        _fail(f"error: {exc}", UserError.exit_code)
    except _Stopped as exc:
        stop = exc.__cause__
        _fail(_interrupt_line(stop, [str(p) for p in WRITTEN[before:]]), _code_of(stop))
    except _PipeClosed as exc:
        _fail(f"error: {_os_problem(exc.__cause__)}", 1)
    except KeyboardInterrupt as exc:  # while typer parsed the command line
        _fail(f"interrupted ({signal_of(exc)}): nothing was written.", _code_of(exc))
    except SystemExit:
        raise
    except OSError as exc:
        if exc.errno in BAD_PATH:
            _fail(f"error: {_os_problem(exc)}", 2)
        if exc.errno in (*DISK_FULL, *NO_ACCESS, *TOO_BIG):
            _fail(f"error: {_os_problem(exc)}", 1)
        _crash(exc, argv)
    except Exception as exc:
        if _out_of_memory(exc):
            _fail(
                "error: out of memory: ask for less (fewer sequences, tokens or rows) or use a "
                "machine with more memory.",
                1,
            )
        if callable(getattr(exc, "format_message", None)) and hasattr(exc, "exit_code"):
            _usage(exc)
        _crash(exc, argv)
    if code == 130:  # typer's own Ctrl-C handling returns the code
        _fail("interrupted (SIGINT): nothing was written.", 130)
    if isinstance(code, int) and code:
        sys.exit(code)


def _print_anything() -> None:
    """Standard output and error write what their encoding cannot (``PYTHONIOENCODING=ascii``
    and an emoji, a byte that was not UTF-8 echoed back) as an escape, never an error."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            with suppress(ValueError, OSError):  # closed, or not reconfigurable here
                stream.reconfigure(errors="backslashreplace")


def _code_of(interrupt: BaseException) -> int:
    return int(getattr(interrupt, "exit_code", 130))


def _interrupt_line(stop: Any, written: list[str]) -> str:
    """The command's own line (what it kept, how to go on), or the files it wrote whole."""
    if str(stop):
        return f"interrupted: {stop}"
    by = signal_of(stop)
    if not written:
        return f"interrupted ({by}): nothing was written; run the command again to finish."
    names = list(dict.fromkeys(written))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"interrupted ({by}): wrote {shown} (each whole) before it stopped; the rest "
        "was not written: run the command again to finish."
    )


def _out_of_memory(exc: BaseException) -> bool:
    """Python's MemoryError, torch's CUDA OutOfMemoryError, or its CPU allocator's RuntimeError."""
    name = type(exc).__name__
    return (
        isinstance(exc, MemoryError)
        or name == "OutOfMemoryError"
        or (isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc))
    )


def _fail(line: str, code: int) -> NoReturn:
    print(line, file=sys.stderr, flush=True)
    sys.exit(code)


def _usage(exc: Any) -> NoReturn:
    """A click usage error (typer's vendored click or the click package) as one line."""
    message = " ".join(exc.format_message().split())
    if type(exc).__name__ == "NoArgsIsHelpError":  # the help was shown: it is the message
        if message:
            print(message, file=sys.stderr)
        sys.exit(2)
    where = getattr(getattr(exc, "ctx", None), "command_path", None) or "interp-toolkit"
    _fail(f"error: {message} (see {where} --help)", 2)


def _os_problem(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in DISK_FULL and _is_device(exc.filename):
        return f"the device {exc.filename} is full (no space left): write to another path."
    if exc.errno in DISK_FULL:
        return (
            f"no space left on the device{where}: free some space and run the command again "
            "(a training run continues from its last checkpoint with --resume)."
        )
    if exc.errno == errno.EROFS:
        return f"the file system is read-only{where}: choose a folder you can write to."
    if exc.errno in TOO_BIG:
        return (
            f"{exc.filename or 'a file'} would pass this process's file-size limit "
            f"({_size_limit()}, set by ulimit -f): raise it (ulimit -f unlimited) or write less."
        )
    if exc.errno == errno.EPIPE:
        return f"the reader closed its end before all was written{where}: nothing more was sent."
    if exc.errno == errno.ELOOP:
        return f"a symlink loop{where}: fix or remove the link, or give another path."
    if exc.errno == errno.ENAMETOOLONG:
        return f"a path too long for the file system{where}: give a shorter name."
    return f"permission denied{where}: choose a path you may use, or ask its owner for access."


def _size_limit() -> str:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return "no limit" if soft == resource.RLIM_INFINITY else f"{soft} bytes"


def _is_device(path: Any) -> bool:
    import stat

    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except (OSError, TypeError, ValueError):
        return False


def _crash(exc: BaseException, argv: list[str] | None) -> NoReturn:
    """An unexpected exception: the full report goes to a file; one line says where."""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    name = f"interp-toolkit-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    path = os.path.join(tempfile.gettempdir(), name)
    report = (
        f"command: interp-toolkit {' '.join(sys.argv[1:] if argv is None else argv)}\n"
        f"python: {sys.version.split()[0]}; torch: {getattr(sys.modules.get('torch'), '__version__', '-')}\n\n"
        + "".join(traceback.format_exception(exc))
    )
    try:
        with open(path, "w", encoding="utf-8", errors="replace") as f:
            f.write(report)
    except OSError:
        print(report, file=sys.stderr)
        path = "(could not be written; printed above)"
    _fail(
        f"error: internal error ({type(exc).__name__}: {first}). This is a bug in interp-toolkit, "
        f"not your input; the full report is in {path}",
        1,
    )
