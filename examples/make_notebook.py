"""Regenerate the notebooks from their script twins (cells split on ``# %%``): walkthrough.py and
quickstart.py. Outputs are not kept: execute the notebooks afterwards (see the README)."""

from __future__ import annotations

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


if __name__ == "__main__":
    for name in SCRIPTS:
        out = (HERE / name).with_suffix(".ipynb")
        nbformat.write(build(HERE / name), out)
        print("wrote", out)
