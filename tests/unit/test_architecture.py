"""The layout's rules, checked on the source: one folder per question and no loose module at the
top; folders import only folders below them in the story (text -> models -> runs -> statistics ->
heads -> ... -> study -> cli); no import cycle anywhere in interp_toolkit (imports at module level
and inside functions both count); no module over 500 lines; views/ never reaches for a model."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "interp_toolkit"
MAX_LINES = 500  # a family lives in one file by meaning (the layout issue raised it from 400)


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, modules: dict[str, Path], prefix: str) -> set[str]:
    """Every module (of ``modules``, or any name starting with ``prefix``) ``path`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{base}" if base else up
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for target in targets:
            if not target.startswith(prefix):
                continue
            while target and target not in modules and target.startswith("interp_toolkit"):
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {n: _imported(n, p, modules, "interp_toolkit") for n, p in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


#: The top level: the package, the notebook API, the CLI entry and the errors; everything else is
#: in a folder named for its question (docs/architecture.md).
TOP_LEVEL = {
    "interp_toolkit",
    "interp_toolkit.__main__",
    "interp_toolkit.api",
    "interp_toolkit.errors",
}

#: The story's order: a folder may import folders of a lower or equal rank, never a higher one.
RANKS = {
    "errors": 0,
    "runtime": 1,
    "files": 1,
    "text": 2,
    "models": 3,
    "runs": 4,
    "stats": 5,
    "heads": 6,
    "weights": 7,
    "causal": 8,
    "exams": 9,
    "probing": 9,
    "units": 9,
    "saes": 10,
    "training": 11,
    "development": 11,
    "measures": 12,
    "views": 13,
    "reports": 14,
    "study": 15,
    "commands": 16,
    "cli": 17,
    "api": 17,
    "__main__": 18,
}


def _folder(module: str) -> str:
    return module.split(".")[1] if "." in module else "api"


def test_one_folder_per_question():
    loose = {n for n, p in _modules().items() if n.count(".") == 1 and p.name != "__init__.py"}
    assert loose <= TOP_LEVEL, sorted(loose - TOP_LEVEL)
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(RANKS) - {"errors", "api", "__main__"}, sorted(folders ^ set(RANKS))


def test_no_arrow_back_up():
    up = [
        f"{a} -> {b}"
        for a, targets in _graph().items()
        for b in targets
        if a != "interp_toolkit" and b != "interp_toolkit"
        if RANKS[_folder(b)] > RANKS[_folder(a)]
    ]
    assert not up, up


def test_no_import_cycles():
    graph = _graph()
    assert "interp_toolkit.heads.scorer" in graph["interp_toolkit.heads.discovery"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_module_over_the_line_cap():
    sizes = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in _modules().items()}
    assert not {n: s for n, s in sizes.items() if s > MAX_LINES}


def test_views_take_data():
    modules = _modules()
    forbidden = ("transformer_lens", "interp_toolkit.training", "interp_toolkit.runs.folder")
    forbidden += ("interp_toolkit.runs.targets", "interp_toolkit.reports")
    for name, path in modules.items():
        if name.startswith("interp_toolkit.views"):
            reached = _imported(name, path, modules, "")
            assert not [m for m in reached if m.startswith(forbidden)], name


def test_the_package_docstring_names_every_folder():
    """interp_toolkit/__init__.py's docstring lists the folders in the story's order: every one
    that exists, none that does not."""
    import re

    doc = ast.get_docstring(ast.parse((PKG / "__init__.py").read_text(encoding="utf-8"))) or ""
    story = doc[doc.index("The folders underneath") : doc.index("Importing this package")]
    named = re.findall(r"``(\w+)``", story)
    assert set(named) == set(RANKS) - {"errors", "api", "__main__"}, named
    assert [RANKS[n] for n in named] == sorted(RANKS[n] for n in named)  # in the story's order
