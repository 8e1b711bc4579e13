"""The walkthrough notebook runs top to bottom (tiny configuration)."""

import os
from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
