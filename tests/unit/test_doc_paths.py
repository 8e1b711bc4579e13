"""Every repository path the docs name exists (docs/*.md and README.md).

How a path is recognised: a token inside backticks, or a Markdown link's target, that (after
dropping a ``:symbol`` or ``::test`` suffix and trailing punctuation) is made of path characters
and either

- starts with a top-level entry of the repository (``interp_toolkit/...``, ``tests/...``,
  ``docs/...``, ``benchmarks/...``, ``experiments/...``, ``examples/...``, ``README.md``), or
- names a Python file with a folder (``heads/registry.py``: the docs name modules from
  ``interp_toolkit/``, so it is looked for at the root and in the package), or
- is a bare file name ending in ``.py`` (``test_owners.py``): some file of that name exists, or
- is a link target: relative to the doc that links it.

A doc may abbreviate a folder by saying so: "`unit/` = `tests/unit/`" makes ``unit/...`` read as
``tests/unit/...`` in that doc.

Tokens with a placeholder (``RUN/snapshots/step_N.safetensors``, ``<path>``, ``*``) and outputs
(``study/index.html``) start with no such entry and are not paths of this repository; nor is what
the repository ignores and builds (``docs/api/``, written by pdoc). A dotted name starting with ``interp_toolkit.``
must import (a module or its attribute).
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "interp_toolkit"
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
TOKEN = re.compile(r"^[\w.\-/]+$")
#: A path component in capitals (``RUN``, ``NAME.jsonl``, ``step_N``'s ``N`` is not one) stands for
#: a name the reader picks.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_0-9]*(\.\w+)?$")
#: What .gitignore names at the root (``/study/``, ``/runs/``, ``*.egg-info/``): a study run
#: in the checkout (CI runs the README's study first) is output, not a path of this repository.
IGNORED = [
    line.strip().strip("/")
    for line in (ROOT / ".gitignore").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
TOP = {
    p.name
    for p in ROOT.iterdir()
    if not p.name.startswith(".") and not any(fnmatch(p.name, pat) for pat in IGNORED)
}
#: Built, not kept (.gitignore): pdoc's API pages.
GENERATED = ("docs/api/",)
#: Paths inside other projects, named from their package folder (SAELens's source).
ELSEWHERE = ("sae_lens/", "transformer_lens/", "devinterp/")


def _tokens(text: str) -> list[tuple[str, bool]]:
    """``(token, is_link)`` for every backtick token and link target in ``text``."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks: commands, output
    found = [(t, False) for span in re.findall(r"`([^`\n]+)`", text) for t in span.split()]
    found += [(t, True) for t in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)]
    return found


def _clean(token: str) -> str:
    token = token.split("::")[0]
    token = re.split(r":(?!/)", token)[0]  # heads/registry.py: SCORES
    return token.strip(",.;()[]'\"")


def repository_path(token: str, is_link: bool) -> str | None:
    """The path ``token`` names, relative to the repository root (or to its doc, for a link:
    ``"doc:"`` prefixed), or None when it names none."""
    token = _clean(token)
    if not token or not TOKEN.match(token) or "://" in token or token.startswith(("-", ".")):
        return None
    parts = token.split("/")
    placeholder = [i for i, p in enumerate(parts) if PLACEHOLDER.match(p) and p not in TOP]
    if placeholder:  # results/text_tries/NAME.jsonl: the folder before it must exist
        if placeholder[0] == 0:
            return None
        token = "/".join(parts[: placeholder[0]]) + "/"
    first = parts[0]
    if is_link:
        return f"doc:{token}"
    if token.startswith(GENERATED + ELSEWHERE):
        return None
    if first in TOP and ("/" in token or "." in token):
        return token
    if "/" in token and token.endswith(".py"):
        return f"either:{token}"
    if "/" not in token and token.endswith(".py") and not token.startswith("__"):
        return f"name:{token}"
    return None


def _exists(path: str, doc: Path) -> bool:
    if path.startswith("doc:"):
        return (doc.parent / path[4:]).exists()
    if path.startswith("either:"):
        return (ROOT / path[7:]).exists() or (PKG / path[7:]).exists()
    if path.startswith("name:"):
        name = path[5:]
        return any(
            True for f in ("interp_toolkit", "tests", "benchmarks", "experiments", "examples")
            for _ in (ROOT / f).rglob(name)
        )  # fmt: skip
    return (ROOT / path).exists()


def _dotted(text: str) -> set[str]:
    return set(re.findall(r"`(interp_toolkit(?:\.\w+)+)", text))


def _abbreviations(text: str) -> dict[str, str]:
    return dict(re.findall(r"`([\w.-]+/)` = `([\w./-]+/)`", text))


def test_every_path_a_doc_names_exists():
    missing = []
    for doc in DOCS:
        text = doc.read_text("utf-8")
        short = _abbreviations(text)
        for token, is_link in _tokens(text):
            for a, full in short.items():
                token = full + token[len(a) :] if token.startswith(a) else token
            path = repository_path(token, is_link)
            if path is not None and not _exists(path, doc):
                missing.append(f"{doc.relative_to(ROOT)}: {token}")
    assert not missing, "\n".join(sorted(set(missing)))


def test_every_dotted_name_a_doc_gives_imports():
    from test_scripts import importable

    missing = [
        f"{d.name}: {n}" for d in DOCS for n in _dotted(d.read_text("utf-8")) if not importable(n)
    ]
    assert not missing, missing


def test_what_counts_as_a_path():
    assert repository_path("interp_toolkit/heads/registry.py", False) == (
        "interp_toolkit/heads/registry.py"
    )
    assert repository_path("`heads/registry.py:", False) is None  # not a clean token
    assert repository_path("heads/registry.py:", False) == "either:heads/registry.py"
    assert repository_path("study/index.html", False) is None  # a study's output
    assert repository_path("tests/unit/test_owners.py::test_x", False) == (
        "tests/unit/test_owners.py"
    )
    assert repository_path("test_owners.py::test_x", False) == "name:test_owners.py"
    assert repository_path("RUN/snapshots/step_N.safetensors", False) is None  # a placeholder
    assert repository_path("experiments/results/NAME.json", False) == "experiments/results/"
    assert repository_path("README.md", False) == "README.md"
    assert repository_path("stages.md", True) == "doc:stages.md"
    assert repository_path("--json", False) is None
    assert _abbreviations("(`unit/` = `tests/unit/`, `int/` = `tests/integration/`;") == {
        "unit/": "tests/unit/",
        "int/": "tests/integration/",
    }
    doc = ROOT / "docs" / "architecture.md"
    assert _exists("interp_toolkit/heads/registry.py", doc)
    assert _exists("either:heads/registry.py", doc)
    for planted in (
        "interp_toolkit/heads/text_scores.py",
        "name:text_scores.py",
        "either:unit/test_cli_core.py",  # moved to tests/unit/cli/
        "doc:nope.md",
    ):
        assert not _exists(planted, doc), planted  # a path that is not there is caught
