"""The typer app every command registers on, the one way: ``@app.command("name")`` in a module
of :mod:`interp_toolkit.cli` (imported by the package, so the decorator runs).

Heavy imports (torch, TransformerLens) happen inside commands so that ``--help`` answers fast.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.boundary import BoundaryGroup

app = typer.Typer(
    name="interp-toolkit",
    cls=BoundaryGroup,
    help="Grow attention-only transformers, watch induction heads appear, and find them in GPT-2.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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


def device_option() -> Any:
    """The ``--device`` option of every command that runs a model (checked at the boundary)."""
    where = "auto (a GPU when present), cpu, cuda, cuda:N or mps"
    return typer.Option("auto", "--device", help=f"Where the model runs: {where}.")


def dtype_option() -> Any:
    """The ``--dtype`` option of every command that loads a model (its weights' dtype)."""
    from interp_toolkit.runs.spec import DTYPE_NAMES

    return typer.Option(
        DTYPE_NAMES[0],
        "--dtype",
        help=f"The weights' dtype: {' or '.join(DTYPE_NAMES)} (bf16 halves the weights' memory "
        "once loaded; a checkpoint stored in fp32 is read whole first).",
    )


def target_argument() -> Any:
    """The ``TARGET`` of every command that reads a model."""
    return typer.Argument(
        ...,
        help="A run folder (RUN@STEP: its weights at STEP), or a Hugging Face causal LM: a hub id "
        "(EleutherAI/pythia-70m, gpt2, ...) from the local cache, or a save_pretrained folder.",
    )


def takes(cls: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's ``options: cls`` parameter becomes one option per field that declares flags
    (:func:`interp_toolkit.runtime.options.option`), in field order, at its place (or after the
    parameter a field names); the command is handed ``cls(...)`` built of them, after the
    boundary checked each by its name."""
    from interp_toolkit.runtime.options import FLAGS, flagged

    fields, types = flagged(cls), typing.get_type_hints(cls)
    keyword, anchor = inspect.Parameter.KEYWORD_ONLY, "options"
    blocks: dict[str, list[inspect.Parameter]] = {}
    for f in fields:
        anchor = f.metadata.get("after", anchor)
        required = f.default is f.default_factory  # both MISSING
        default = typer.Option(
            ... if required else f.default, *f.metadata[FLAGS], help=f.metadata["help"]
        )
        blocks.setdefault(anchor, []).append(
            inspect.Parameter(f.name, keyword, default=default, annotation=types[f.name])
        )

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own, hints = inspect.signature(command).parameters, typing.get_type_hints(command)
        params = [
            q
            for p in own.values()
            for q in [p.replace(kind=keyword, annotation=hints[p.name])] * (p.name != "options")
            + blocks.get(p.name, [])
        ]

        def run(**given: Any) -> Any:
            built = cls(**{f.name: given.pop(f.name) for f in fields})
            return command(options=built, **given)

        run.__name__, run.__doc__ = command.__name__, command.__doc__
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return run

    return wrap


def json_option(help: str = "Write the results as JSON here (- for standard output).") -> Any:
    """``--json FILE``: the command's result as JSON."""
    return typer.Option(None, "--json", help=help)


def csv_option(help: str) -> Any:
    """``--csv FILE``: the command's table as CSV."""
    return typer.Option(None, "--csv", help=help)


def out_option(help: str, default: Any = None) -> Any:
    """``--out``/``-o``: what the command writes (a page, a folder)."""
    return typer.Option(default, "--out", "-o", help=help)


def seed_option(help: str) -> Any:
    """``--seed N``: the seed of what the command draws."""
    return typer.Option(0, "--seed", help=help)


def check_out_file(
    path: Path | None, flag: str, example: str = "out.json", owns: tuple[Path, ...] = ()
) -> None:
    """An output file option, checked before any work (:func:`interp_toolkit.files.io.check_output`:
    a folder, a symlink loop, a name too long, an unwritable folder, a socket nobody listens on
    are one line; ``-`` is standard output, a device or FIFO is written in place); two options
    of one command may not write to the same place, and none inside what the command reads (a
    run folder: :func:`interp_toolkit.files.paths.inside_inputs`) but what it ``owns`` there."""
    if path is None:
        return
    from interp_toolkit.cli.boundary import claim_output
    from interp_toolkit.cli.given import current, raw_value
    from interp_toolkit.files.io import check_output
    from interp_toolkit.files.paths import inside_inputs

    raw = raw_value(flag)  # `newdir/` keeps its slash: typer's Path drops it
    target = check_output(raw if raw is not None and Path(raw) == path else path, flag, example)
    if target.kind == "stdout" or target.fd == 1:
        claim_output("stdout", flag)
    elif target.kind == "file":
        inside_inputs(path, flag, current().reads, owns, example)
        claim_output(str(target.path), flag)


def wrote(path: Path) -> None:
    """Say that ``path`` was written (on standard error when standard output carries data)."""
    from interp_toolkit.cli.boundary import stdout_claimed

    if str(path) != "-":
        typer.echo(f"wrote {path}", err=stdout_claimed())


def outputs(*files: tuple[Path | None, str, str]) -> None:
    """Check each output ``(path, flag, example)`` before any work (:func:`check_out_file`),
    then get torch ready (its threads)."""
    for path, flag, example in files:
        check_out_file(path, flag, example)
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))


def show(shown: list[Any]) -> None:
    """Print what a renderer returned (:mod:`interp_toolkit.reports.terminal`) on the terminal's
    width, or unlimited when piped (a table is never cut at 80 columns); lines unwrapped, and a
    table's title on its own line first (wrapped to a narrow table it read as a column)."""
    from rich.console import Console
    from rich.table import Table

    out = Console(width=None if sys.stdout.isatty() else 100_000)
    for item in shown:
        if isinstance(item, Table) and item.title:
            out.print(item.title, highlight=False, soft_wrap=True)
            item.title = None
        out.print(item, soft_wrap=not isinstance(item, Table))


def emit(data: dict[str, Any], shown: list[Any], json_out: Path | None) -> None:
    """Print a result (``shown``: its renderer's tables and lines), and write the same fields as
    JSON when asked; when ``--json`` (or another output) is standard output, only that output
    goes there."""
    from interp_toolkit.cli.boundary import stdout_claimed
    from interp_toolkit.files.io import write_json

    if not stdout_claimed():
        show(shown)
    if json_out:
        write_json(json_out, data)
        wrote(json_out)


def save(path: Path | None, text: str | None) -> None:
    """Write ``text`` to the output ``path`` (when both are given) and say so."""
    from interp_toolkit.files.io import write_text

    if path is not None and text is not None:
        write_text(path, text)
        wrote(path)
