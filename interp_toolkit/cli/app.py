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


TARGET_HELP = (
    "A run folder (RUN@STEP: its weights at STEP), or a Hugging Face causal LM: a hub id "
    "(EleutherAI/pythia-70m, gpt2, ...) from the local cache, or a save_pretrained folder."
)
DEVICE_HELP = "Where the model runs: auto (a GPU when present), cpu, cuda, cuda:N or mps."


def device_option() -> Any:
    """The ``--device`` option of every command that runs a model."""
    return typer.Option("auto", "--device", help=DEVICE_HELP)


def dtype_option() -> Any:
    """The ``--dtype`` option of every command that loads a model (its weights' dtype)."""
    from interp_toolkit.runs.spec import DTYPE_NAMES

    return typer.Option(
        DTYPE_NAMES[0],
        "--dtype",
        help=f"The weights' dtype: {' or '.join(DTYPE_NAMES)} (bf16 halves the weights' memory "
        "once loaded; a checkpoint stored in fp32 is read whole first).",
    )


def check_dtype(name: str) -> None:
    """Fail fast (one line, exit 2) on a dtype that is not offered."""
    from interp_toolkit.errors import UserError
    from interp_toolkit.runs.spec import DTYPE_NAMES

    if name not in DTYPE_NAMES:
        raise UserError(f"--dtype {name}: unknown: use {' or '.join(DTYPE_NAMES)}.")


def check_device(spec: str) -> None:
    """Fail fast (one line, exit 2) on a device that is absent or misnamed, before any work."""
    from interp_toolkit.runtime.devices import resolve_device

    resolve_device(spec)


def check_out_file(
    path: Path | None, flag: str, example: str = "out.json", owns: tuple[Path, ...] = ()
) -> None:
    """An output file option, checked before any work (:func:`interp_toolkit.files.io.check_output`:
    a folder, a symlink loop, a name too long, an unwritable folder, a socket nobody listens on
    are one line; ``-`` is standard output, a device or FIFO is written in place); two options
    of one command may not write to the same place, and none inside what the command reads (a
    run folder: :func:`check_not_an_input`) but what it ``owns`` there."""
    if path is None:
        return
    from interp_toolkit.cli.boundary import claim_output
    from interp_toolkit.cli.given import raw_value
    from interp_toolkit.files.io import check_output

    raw = raw_value(flag)  # `newdir/` keeps its slash: typer's Path drops it
    target = check_output(raw if raw is not None and Path(raw) == path else path, flag, example)
    if target.kind == "stdout" or target.fd == 1:
        claim_output("stdout", flag)
    elif target.kind == "file":
        check_not_an_input(path, flag, example, owns)
        claim_output(str(target.path), flag)


def check_not_an_input(
    path: Path, flag: str, example: str = "out.json", owns: tuple[Path, ...] = ()
) -> None:
    """An output may not land in a run folder (or model folder) the command reads: the weights,
    config or checkpoints would be written over (symlinks followed); ``owns`` are the exceptions
    (``report``'s RUN/report.html)."""
    from interp_toolkit.cli.given import reads
    from interp_toolkit.files.paths import inside_inputs

    inside_inputs(path, flag, reads(), owns, example)


def wrote(path: Path) -> None:
    """Say that ``path`` was written (on standard error when standard output carries data)."""
    from interp_toolkit.cli.boundary import stdout_claimed

    if str(path) != str(STDOUT):
        typer.echo(f"wrote {path}", err=stdout_claimed())


def console() -> Console:
    """The console tables print on: the terminal's width, or unlimited when output is piped (a
    table is never cut at 80 columns). A table's title prints as its own line first, never
    wrapped to the table's width (a long title over a narrow table read as a column)."""
    from rich.console import Console
    from rich.table import Table

    class TitledConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            for obj in objects:
                if isinstance(obj, Table) and obj.title:
                    super().print(obj.title, highlight=False, soft_wrap=True)
                    obj.title = None
            super().print(*objects, **kwargs)

    return TitledConsole(width=None if sys.stdout.isatty() else 100_000)


def setup_torch() -> None:
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))


def emit(
    data: dict[str, Any], show: Callable[[dict[str, Any]], None], json_out: Path | None
) -> None:
    """Print a result (``show`` draws its table), and write the same fields as JSON when asked;
    when ``--json`` (or another output) is standard output, only that output goes there."""
    from interp_toolkit.cli.boundary import stdout_claimed
    from interp_toolkit.files.io import write_json

    if not stdout_claimed():
        show(data)
    if json_out:
        write_json(json_out, data)
        wrote(json_out)
