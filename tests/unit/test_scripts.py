"""The scripts under benchmarks/ (maintained benchmarks) and experiments/ (finished studies) read
the package as it is today: every ``interp_toolkit`` module they import (at the top or inside a
function), every name they import from it, and every attribute they read off an imported module
exists. A rename in the package fails here, not in a figure months later. (The scripts that run
in the slow tier, a few steps each, are in tests/integration/test_scripts_run.py.)
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("benchmarks", "experiments")
#: Kept as the record of finished tries, not maintained (experiments/archive/README.md): they ran
#: against the package of their day.
FROZEN = "experiments/archive"


def _scripts() -> list[Path]:
    found = [p for f in FOLDERS for p in sorted((ROOT / f).rglob("*.py"))]
    return [p for p in found if not str(p.relative_to(ROOT)).startswith(FROZEN)]


def _uses(path: Path) -> list[tuple[str, str | None, int]]:
    """``(module, name, line)`` for every package import in ``path`` (``name`` None: the module
    itself) and every ``alias.attr`` read off a package module imported under ``alias``."""
    tree = ast.parse(path.read_text("utf-8"))
    uses: list[tuple[str, str | None, int]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("interp_toolkit"):
            for a in node.names:
                uses.append((node.module or "", a.name, node.lineno))
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("interp_toolkit"):
                    uses.append((a.name, None, node.lineno))
                    if a.asname:
                        aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module is not None:
                uses.append((module, node.attr, node.lineno))
    return uses


def importable(dotted: str) -> bool:
    """``interp_toolkit.a.b.c`` is a module, or an attribute (chain) of the longest module that
    prefixes it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_script_reads_only_what_the_package_has(path):
    missing = [
        f"line {line}: {module}{'' if name is None else '.' + name}"
        for module, name, line in _uses(path)
        if not importable(module if name is None else f"{module}.{name}")
    ]
    assert not missing, missing


def test_the_check_finds_a_renamed_name(tmp_path):
    """A planted script that imports a name the package no longer has, and reads a function
    its module never had, is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def main():\n"
        "    from interp_toolkit.stats.thresholds import ALPHA, NO_SUCH_THRESHOLD\n"
        "    from interp_toolkit.weights import circuits as C\n"
        "    return C.full_ov, C.no_such_function, ALPHA\n"
    )
    uses = _uses(bad)
    assert ("interp_toolkit.stats.thresholds", "NO_SUCH_THRESHOLD", 2) in uses
    assert ("interp_toolkit.weights.circuits", "no_such_function", 4) in uses
    assert not importable("interp_toolkit.stats.thresholds.NO_SUCH_THRESHOLD")
    assert not importable("interp_toolkit.weights.circuits.no_such_function")
    assert not importable("interp_toolkit.no_such_folder.x")
    assert importable("interp_toolkit.stats.thresholds.ALPHA")
    assert importable("interp_toolkit.weights.circuits.full_ov")
