"""What a terminal, a pipe and a notebook see: --version, --json - (stdout), tables that are not
cut at 80 columns when piped, progress bars that stay sparse off a terminal."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from _views_fixtures import make_tiny_run
from cli_helpers import run_cli
from tqdm import std as tqdm_std

from interp_toolkit.runtime.progress import PIPED_INTERVAL, progress_bar

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def cli(capsys, monkeypatch):
    """The command as a user pipes it: stdout is not a terminal (pytest captures it)."""
    monkeypatch.setenv("COLUMNS", "80")

    return lambda *args: run_cli(capsys, *args)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_tiny_run(tmp_path_factory.mktemp("cli") / "run")


def test_version_prints_the_package_metadata_version(cli):
    code, out, err = cli("--version")
    assert code == 0, err
    assert out == f"interp-toolkit {metadata.version('interp-toolkit')}\n"


@pytest.mark.parametrize(
    "args",
    [
        ("heads", "--n-seqs", "4", "--n-untrained", "2", "--untrained-rows", "4"),
        ("exam", "--prompt", " the cat the", "--target", " cat"),
        ("copying", "--head", "1.0", "--token", " cat"),
    ],
)
def test_json_dash_is_json_alone_on_stdout(cli, run, args):
    code, out, err = cli(args[0], str(run), *args[1:], "--json", "-")
    assert code == 0, err
    tool = subprocess.run(
        [sys.executable, "-m", "json.tool"], input=out, capture_output=True, text=True
    )
    assert tool.returncode == 0, out[:500]
    assert json.loads(out)["target"] == "run"
    assert not (ROOT / "-").exists()


def test_piped_heads_table_is_not_cut_at_80_columns(cli, run):
    code, out, err = cli(
        "heads", str(run), "--n-seqs", "4", "--n-untrained", "2", "--untrained-rows", "4"
    )
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("│0.0 ")]
    assert len(rows) == 1 and len(rows[0]) > 80
    # the role and every score column are on the head's one line
    cells = [c.strip() for c in rows[0].strip("│").split("│")]
    assert cells[1] == "none" and rows[0].count("│") == 9


class FakeClock:
    """tqdm's clock, advanced by the test: redraw counts that do not depend on the machine."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_off_a_terminal_redraws_sparsely(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(tqdm_std, "time", clock)
    monkeypatch.setattr(tqdm_std.tqdm, "monitor_interval", 0)  # no monitor thread

    def redraws(make_bar) -> int:
        out = io.StringIO()  # not a terminal, like a notebook's stderr or a CI log
        for _ in make_bar(range(30), file=out):
            clock.now += 0.5  # 15 s of work in all, half a second per step
        return out.getvalue().count("\r")

    assert PIPED_INTERVAL >= 10
    bar = progress_bar(range(1), file=io.StringIO())  # tqdm's monitor redraws after maxinterval
    assert bar.mininterval == bar.maxinterval == PIPED_INTERVAL
    bar.close()
    assert redraws(progress_bar) == 2  # the first and the last
    assert redraws(tqdm_std.tqdm) == 32  # plain tqdm (0.1 s): the first, every step, the last
    silent = io.StringIO()
    for _ in progress_bar(range(3), file=silent, enabled=False):
        pass
    assert silent.getvalue() == ""
