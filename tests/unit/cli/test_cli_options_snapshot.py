"""Every command keeps its options across the layout move (tests/snapshots/cli_options.json was
taken from the command line before the move): a command may gain options, never lose one."""

from __future__ import annotations

import json
from pathlib import Path

import typer.main

import interp_toolkit.cli  # noqa: F401 (registers every command)
from interp_toolkit.cli.app import app

SNAPSHOT = Path(__file__).resolve().parents[2] / "snapshots" / "cli_options.json"


def _options() -> dict[str, set[str]]:
    cmd = typer.main.get_command(app)
    return {
        name: {o for p in sub.params for o in (*p.opts, *p.secondary_opts)}
        for name, sub in cmd.commands.items()
    }


def test_every_command_keeps_its_options():
    before = json.loads(SNAPSHOT.read_text())
    now = _options()
    assert set(before) <= set(now), sorted(set(before) - set(now))
    lost = {name: sorted(set(opts) - now[name]) for name, opts in before.items()}
    assert not {k: v for k, v in lost.items() if v}, lost
