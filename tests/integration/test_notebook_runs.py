"""The notebooks run top to bottom: the walkthrough (tiny configuration) and the quickstart (on
the shared trained run)."""

import os
from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _execute(name: str) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.read(EXAMPLES / name, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return nb


def _stream(nb: nbformat.NotebookNode) -> str:
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "stream"
    )


def test_notebook_executes(monkeypatch):
    monkeypatch.setenv("INTERP_TOOLKIT_TINY", "1")
    nb = _execute("walkthrough.ipynb")
    text = _stream(nb)
    assert "target rank" in text and "induction score of" in text
    # the last cell displays the circuitsvis view as HTML
    assert any("text/html" in o.get("data", {}) for o in nb.cells[-1].outputs)
    assert os.environ["INTERP_TOOLKIT_TINY"] == "1"


def test_quickstart_executes_on_a_trained_run(monkeypatch, trained_2l):
    monkeypatch.setenv("INTERP_TOOLKIT_RUN", str(trained_2l.path))
    nb = _execute("quickstart.ipynb")
    text = _stream(nb)
    assert f"{trained_2l.name} 2 layers x 4 heads" in text
    assert "FactoredMatrix (128, 128) full OV (1024, 1024) inner dim 32" in text
    assert "induction [layer, head]" in text and "gpt2 roles:" in text
    view_cell = next(c for c in nb.cells if c.source.startswith("view("))
    html = "".join(o["data"]["text/html"] for o in view_cell.outputs if "data" in o)
    assert "Layer 0" in html and "Layer 1" in html  # one output, every layer
    # no cell floods the notebook (progress bars, warnings)
    assert max(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code") <= 3
