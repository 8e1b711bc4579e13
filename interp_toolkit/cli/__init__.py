"""The ``interp-toolkit`` command line: a thin typer shell over the Python API.

Commands live in one module per group (:mod:`.train`, :mod:`.analysis`, :mod:`.probes`,
:mod:`.neurons`, :mod:`.views`, :mod:`.study`), each registering with ``@app.command`` on :data:`.app.app`. Bad input raises
:class:`~interp_toolkit.errors.UserError`; :func:`main` prints it as one line and exits with code 2.
"""

from __future__ import annotations

import sys

from interp_toolkit.cli import (  # noqa: F401  (registers commands)
    analysis,
    neurons,
    probes,
    study,
    train,
    views,
)
from interp_toolkit.cli.app import app
from interp_toolkit.errors import UserError

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=False)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(UserError.exit_code)
    except KeyboardInterrupt:
        print(
            "interrupted: nothing half-written; a training run can continue with --resume.",
            file=sys.stderr,
        )
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as exc:  # usage errors: click's, or the click typer >= 0.29 vendors
        if callable(getattr(exc, "format_message", None)) and hasattr(exc, "exit_code"):
            where = getattr(getattr(exc, "ctx", None), "command_path", None) or "interp-toolkit"
            print(f"error: {exc.format_message()} (see {where} --help)", file=sys.stderr)
            sys.exit(2)
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        raise
