"""The walkthrough notebook runs top to bottom (tiny configuration) and matches its script twin."""

import os
import sys
from pathlib import Path

import nbformat
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


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


@pytest.mark.slow
def test_notebook_executes(monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("INTERP_TOOLKIT_TINY", "1")
    nb = nbformat.read(EXAMPLES / "walkthrough.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "target rank" in text and "induction score of" in text
    # the last cell displays the circuitsvis view as HTML
    assert any("text/html" in o.get("data", {}) for o in nb.cells[-1].outputs)
    assert os.environ["INTERP_TOOLKIT_TINY"] == "1"
