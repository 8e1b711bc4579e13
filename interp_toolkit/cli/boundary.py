"""The command line's one error boundary: what reaches the user when a command does not succeed.

- bad input (:class:`~interp_toolkit.errors.UserError`) and usage errors (typer's vendored click,
  ``typer._click``, or the ``click`` package: both are recognised by their interface): one line,
  exit 2;
- Ctrl-C or SIGTERM: one line (what was kept and how to go on), exit 128 + signal (130 for Ctrl-C);
- a full disk, a read-only file system or a permission problem: one line naming the file, exit 1;
- anything else is a bug: its traceback goes to a report file, and one line says where; exit 1.

typer turns a ``KeyboardInterrupt`` into a bare exit code, losing its message, so
:class:`BoundaryGroup` (the app's command class) carries it past typer as :class:`_Stopped`.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
import time
import traceback
from typing import Any, NoReturn

from typer.core import TyperGroup

from interp_toolkit.errors import UserError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
NO_ACCESS = (errno.EACCES, errno.EPERM, errno.EROFS)


class _Stopped(Exception):
    """A KeyboardInterrupt (or :class:`~interp_toolkit.errors.Interrupted`) on its way past typer."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(str(interrupt))
        self.exit_code = int(getattr(interrupt, "exit_code", 130))


class BoundaryGroup(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped(exc) from None


def run(app: Any, argv: list[str] | None) -> None:
    """Run the typer ``app`` on ``argv``; return on success, else exit with the boundary's code."""
    try:
        code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        _fail(f"error: {exc}", UserError.exit_code)
    except _Stopped as exc:
        _fail(
            f"interrupted: {exc or 'nothing half-written (files are written whole or not at all).'}",
            exc.exit_code,
        )
    except KeyboardInterrupt:  # while typer parsed the command line
        _fail("interrupted.", 130)
    except SystemExit:
        raise
    except OSError as exc:
        if exc.errno in DISK_FULL + NO_ACCESS:
            _fail(f"error: {_os_problem(exc)}", 1)
        _crash(exc, argv)
    except Exception as exc:
        if callable(getattr(exc, "format_message", None)) and hasattr(exc, "exit_code"):
            _usage(exc)
        _crash(exc, argv)
    if code == 130:  # typer's own Ctrl-C handling returns the code
        _fail("interrupted.", 130)
    if isinstance(code, int) and code:
        sys.exit(code)


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
    if exc.errno in DISK_FULL:
        return (
            f"no space left on the device{where}: free some space and run the command again "
            "(a training run continues from its last checkpoint with --resume)."
        )
    if exc.errno == errno.EROFS:
        return f"the file system is read-only{where}: choose a folder you can write to."
    return f"permission denied{where}: choose a path you may use, or ask its owner for access."


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
        with open(path, "w", encoding="utf-8") as f:
            f.write(report)
    except OSError:
        print(report, file=sys.stderr)
        path = "(could not be written; printed above)"
    _fail(
        f"error: internal error ({type(exc).__name__}: {first}). This is a bug in interp-toolkit, "
        f"not your input; the full report is in {path}",
        1,
    )
