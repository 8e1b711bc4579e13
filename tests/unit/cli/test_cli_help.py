"""``--help`` reads as prose (a docstring's source wraps are not line breaks), flags carry no
``<bool>`` type, and a table's title is never squeezed to its table's width when piped."""

from __future__ import annotations

import pytest
from _views_fixtures import make_tiny_run
from cli_helpers import run_cli

from interp_toolkit.cli.help import unwrap

COMMANDS = ["train", "sample", "heads", "exam", "circuit", "probe", "sae", "view", "reproduce"]


def test_unwrap_joins_lines_within_paragraphs_only():
    doc = """First line
    goes on here.

    Second paragraph
    too."""
    assert unwrap(doc) == "First line goes on here.\n\nSecond paragraph too."
    assert unwrap(None) is None


@pytest.mark.parametrize("argv", [["--help"], *[[c, "--help"] for c in COMMANDS]])
def test_help_shows_no_bool_type(capsys, argv):
    result = run_cli(capsys, *argv)
    assert result.code == 0 and "Usage" in result.out
    assert "<bool>" not in result.out


def test_command_list_is_reflowed(capsys):
    """The exam's summary wrapped in its source after "with"; on screen "with --periods" stays
    together (a rich panel wraps it where the terminal needs)."""
    out = run_cli(capsys, "--help").out
    flat = " ".join(line.strip(" │") for line in out.splitlines())
    assert "next tokens; with --periods, the pass rate" in " ".join(flat.split())
    assert not any(line.rstrip(" │").endswith(" with") for line in out.splitlines())


def test_piped_table_title_is_one_line(tmp_path, capsys):
    run = make_tiny_run(tmp_path / "run", n_layers=1, metrics=False)
    out = run_cli(capsys, "exam", run, "--prompt", " the cat sat on the", "--target", " mat").out
    first = out.splitlines()[0]
    assert first.startswith("run exam custom: ' the cat sat on the' -> ' mat': rank ")
    assert first.endswith(")")  # "(PASS)" or "(fail)": the whole title on its line


def test_an_uncached_gpt2_offline_is_refused_before_transformerlens_loads(tmp_path):
    """``heads gpt2`` offline without the weights cached took 15 s to refuse (the command
    imported TransformerLens first); it is refused before any heavy import."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\nfrom interp_toolkit.cli import main\n"
        "try:\n    main(['heads', 'gpt2'])\nexcept SystemExit as e:\n    code = e.code\n"
        "print(code, 'transformer_lens' in sys.modules, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.stdout.split() == ["2", "False", "False"], (proc.stdout, proc.stderr)
    assert "not in the Hugging Face cache" in proc.stderr
