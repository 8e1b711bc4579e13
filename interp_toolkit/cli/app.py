"""The typer app every command registers on, the one way: ``@app.command("name")`` in a module
of :mod:`interp_toolkit.cli` (imported by the package, so the decorator runs).

Heavy imports (torch, TransformerLens) happen inside commands so that ``--help`` answers fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from interp_toolkit.cli.boundary import BoundaryGroup
from interp_toolkit.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="interp-toolkit",
    cls=BoundaryGroup,
    help="Grow attention-only transformers, watch induction heads appear, and find them in GPT-2.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

STDOUT = Path("-")


def _version(value: bool | None) -> None:
    if value:
        from interp_toolkit import __version__

        typer.echo(f"interp-toolkit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool | None = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Grow attention-only transformers, watch induction heads appear, and find them in GPT-2."""


TARGET_HELP = "A run folder, or a GPT-2 model (gpt2, gpt2-medium… or an HF folder)."
DEVICE_HELP = "Where the model runs: auto (a GPU when present), cpu, cuda, cuda:N or mps."


def device_option() -> Any:
    """The ``--device`` option of every command that runs a model."""
    return typer.Option("auto", "--device", help=DEVICE_HELP)


def check_device(spec: str) -> None:
    """Fail fast (one line, exit 2) on a device that is absent or misnamed, before any work."""
    from interp_toolkit.devices import resolve_device

    resolve_device(spec)


def check_out_file(path: Path | None, flag: str, example: str = "out.json") -> None:
    """An output file option must name a file in a folder we can write, checked before any work
    (``-`` is standard output)."""
    if path is None or path == STDOUT:
        return
    from interp_toolkit.io import check_writable_dir

    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder: give a file name such as {path / example}.")
    check_writable_dir(path.parent if str(path.parent) else Path("."), "output folder")


def console() -> Console:
    """The console tables print on: the terminal's width, or unlimited when output is piped (a
    table is never cut at 80 columns)."""
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 100_000)


def setup_torch() -> None:
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))


def emit(
    data: dict[str, Any], show: Callable[[dict[str, Any]], None], json_out: Path | None
) -> None:
    """Print a result (``show`` draws its table), and write the same fields as JSON when asked;
    ``--json -`` prints only the JSON, on standard output."""
    if json_out == STDOUT:
        import json

        typer.echo(json.dumps(data, indent=2))
        return
    show(data)
    if json_out:
        from interp_toolkit.io import write_json

        write_json(json_out, data)
        typer.echo(f"wrote {json_out}")
