"""The ``interp-toolkit`` command line: a thin typer shell over the Python API.

Commands live in one module per group (:mod:`.analysis`, :mod:`.internals`, :mod:`.study`,
:mod:`.train`, :mod:`.views`), each registering with ``@app.command`` on :data:`.app.app`; a
command parses its options, calls one function (:mod:`interp_toolkit.commands`) and prints what
:mod:`interp_toolkit.reports.terminal` renders. Bad input raises
:class:`~interp_toolkit.errors.UserError`; what reaches the user when a command fails is decided
in one place, :mod:`.boundary` (one line, exit 2 for bad input; never a traceback).
"""

from __future__ import annotations

from interp_toolkit.cli import (  # noqa: F401  (registers commands, in --help's order)
    analysis,
    internals,
    study,
    train,
    views,
)
from interp_toolkit.cli.app import app
from interp_toolkit.cli.boundary import run
from interp_toolkit.cli.help import tidy

tidy(app)

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    run(app, argv)
