"""Regenerate the notebooks from their script twins (cells split on ``# %%``): walkthrough.py and
quickstart.py. ``--execute`` also runs them (nbclient) and keeps the outputs, as committed::

    INTERP_TOOLKIT_WORK=runs/walkthrough INTERP_TOOLKIT_RUN=runs/walkthrough/cpu-2l \
        python examples/make_notebook.py --execute
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SCRIPTS = ("walkthrough.py", "quickstart.py")


def build(script: Path = HERE / "walkthrough.py") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    for chunk in script.read_text(encoding="utf-8").split("# %%")[1:]:
        head, _, body = chunk.partition("\n")
        if head.strip() == "[markdown]":
            text = "\n".join(
                line[2:] if line.startswith("# ") else line.lstrip("#")
                for line in body.strip().splitlines()
            )
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            nb.cells.append(nbformat.v4.new_code_cell(body.strip()))
    return nb


def execute(nb: nbformat.NotebookNode) -> None:
    from nbclient import NotebookClient

    resources = {"metadata": {"path": str(HERE)}}
    NotebookClient(nb, timeout=3600, kernel_name="python3", resources=resources).execute()


if __name__ == "__main__":
    for name in SCRIPTS:
        out = (HERE / name).with_suffix(".ipynb")
        nb = build(HERE / name)
        if "--execute" in sys.argv[1:]:
            execute(nb)
        nbformat.write(nb, out)
        print("wrote", out)
