"""``cli.app.takes``: an options dataclass's flagged fields become a command's options, at the
``options`` parameter's place in field order (``after=`` moves a run of them), and the command
gets the object built of them; a field without flags is no option."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import typer
from typer.testing import CliRunner

from interp_toolkit.cli.app import takes
from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import REQUIRED, option


@dataclass(frozen=True)
class Toy:
    name: str = option(REQUIRED, "--name", "-n", help="A name.")
    alpha: float = option(0.5, "--alpha", help="A share.")
    inner: int = 3  # no flags: not an option
    late: int = option(7, "--late", help="Shown after --device.", after="device")
    later: bool = option(False, "--later", help="Follows --late.")

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise UserError("--alpha must be a share.")


def _app(seen: list[Toy]) -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command()
    @takes(Toy)
    def toy(
        *,
        json_out: str | None = typer.Option(None, "--json", help="Out."),
        options: Toy,
        device: str = typer.Option("auto", "--device", help="Where."),
    ) -> None:
        seen.append(options)
        typer.echo(device)

    return app


def test_fields_become_options_in_place_and_the_command_gets_the_object():
    seen: list[Toy] = []
    command = typer.main.get_command(_app(seen))
    assert [p.opts[0] for p in command.params if p.name != "help"] == [
        "--json",
        "--name",
        "--alpha",
        "--device",
        "--late",
        "--later",
    ]
    assert [p for p in command.params if p.name == "name"][0].required
    result = CliRunner().invoke(_app(seen), ["-n", "x", "--late", "9", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert seen == [Toy(name="x", late=9)] and result.output == "cpu\n"


def test_the_objects_own_check_refuses_a_bad_value():
    seen: list[Toy] = []
    result = CliRunner().invoke(_app(seen), ["--name", "x", "--alpha", "2"])
    assert isinstance(result.exception, UserError) and not seen
    with pytest.raises(UserError):
        Toy(name="x", alpha=0)
