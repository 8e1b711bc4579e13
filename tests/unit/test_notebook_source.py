"""The walkthrough notebook matches its script twin."""

import sys
from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_notebook_is_generated_from_the_script():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from make_notebook import build
    finally:
        sys.path.pop(0)
    saved = nbformat.read(EXAMPLES / "walkthrough.ipynb", as_version=4)
    assert [c.source for c in saved.cells] == [c.source for c in build().cells], (
        "walkthrough.ipynb is out of date: run python examples/make_notebook.py"
    )
