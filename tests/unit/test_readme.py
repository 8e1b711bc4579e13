"""The README stays short and true: its commands are the ones CI runs verbatim, every command and
option of its CLI table exists, every link resolves, and its API snippet imports what exists
(the slow tier runs the snippet: tests/integration/test_readme_snippet.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_is_short_and_has_no_overlong_lines():
    lines = README.splitlines()
    assert len(lines) <= 150, len(lines)
    # a table row or the one install line may be long; prose wraps at 100 columns
    prose = [ln for ln in lines if not ln.startswith(("|", "python3 -m venv"))]
    assert max(map(len, prose)) <= 100


def test_ci_runs_the_readme_commands_verbatim():
    """.ci/run executes the README's first bash block (install + the main job) and its last
    (every test tier) as written, so CI fails when either stops working on a fresh clone."""
    install, fast, every = blocks("bash")
    assert "pip install torch==2.13.0" in install and "interp-toolkit reproduce" in install
    assert fast.strip() == ".venv/bin/python -m pytest -q"
    assert every.strip() == ".venv/bin/python -m pytest -q --all-tiers"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_block 0" in ci and "readme_block -1" in ci


def test_readme_block_helper_prints_the_blocks():
    import subprocess

    for index, want in (("0", blocks("bash")[0]), ("-1", blocks("bash")[-1])):
        got = subprocess.run(
            ["bash", "-c", f"source .ci/readme_blocks.sh && readme_block {index}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert got.strip() == want.strip()


def _commands() -> dict[str, set[str]]:
    import typer

    from interp_toolkit.cli import main  # noqa: F401  (registers every command)
    from interp_toolkit.cli.app import app

    group = typer.main.get_command(app)
    return {
        name: {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for name, cmd in group.commands.items()
        if not cmd.hidden  # an earlier name kept as an alias (`circuits`: now `copying`)
    }


def test_every_cli_row_names_a_command_and_its_options():
    commands = _commands()
    rows = re.findall(r"^\| `([a-z]+)([^`]*)` \|", README, flags=re.M)
    assert len(rows) >= 12
    for name, rest in rows:
        assert name in commands, name
        for option in re.findall(r"(--[a-z][a-z-]*)", rest):
            assert option in commands[name], (name, option)
    # and the table lists every command
    assert {name for name, _ in rows} == set(commands)


def test_every_link_resolves():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link


def test_api_snippet_imports_exist_and_parses():
    import interp_toolkit

    (snippet,) = blocks("python")
    compile(snippet, "README", "exec")
    first = snippet.splitlines()[0]
    names = shlex.split(first.replace(",", " "))[3:]
    assert names and all(hasattr(interp_toolkit, n) for n in names)


def test_readme_and_api_docs_train_the_same_run():
    """docs/api.md's snippet runs after the README's in one folder: its ``train(...)`` line must
    ask for the same run (one that differed only in ``steps=`` failed on the README's folder)."""
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    (snippet,) = blocks("python")
    (theirs,) = re.findall(r"```python\n(.*?)```", api, flags=re.S)[:1]

    def train_call(code: str) -> str:
        (line,) = [ln for ln in code.splitlines() if ln.startswith("run = train(")]
        return line.split("#")[0].strip()

    assert train_call(snippet) == train_call(theirs)


def test_the_claims_table_is_the_committed_studys():
    """The README's claims table is ``claims.md`` of the committed five-seed study, verbatim
    (experiments/results/study_claims.md): its numbers and marks are computed, not typed."""
    table = (ROOT / "experiments" / "results" / "study_claims.md").read_text(encoding="utf-8")
    assert table.startswith("| the post says | its number |")
    assert table.strip() in README
