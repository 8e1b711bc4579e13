"""The notebooks match their script twins."""

import sys
from pathlib import Path

import nbformat
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
try:
    from make_notebook import SCRIPTS, build
finally:
    sys.path.pop(0)


@pytest.mark.parametrize("script", SCRIPTS)
def test_notebook_is_generated_from_the_script(script):
    saved = nbformat.read((EXAMPLES / script).with_suffix(".ipynb"), as_version=4)
    assert [c.source for c in saved.cells] == [c.source for c in build(EXAMPLES / script).cells], (
        f"{script[:-3]}.ipynb is out of date: run python examples/make_notebook.py"
    )
