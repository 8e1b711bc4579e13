"""The README's API snippet runs verbatim in a fresh folder (it trains the cpu preset for 700
steps) and gives what its comments say."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch

from interp_toolkit.errors import UnknownTokensWarning

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_readme_api_snippet_runs_verbatim(tmp_path, monkeypatch):
    (snippet,) = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(2)
    try:
        ns: dict = {}
        exec(compile(snippet, "README.md", "exec"), ns)
        # each line's value, recomputed from the names it left behind
        with warnings.catch_warnings():  # the README's text is one the model can read
            warnings.simplefilter("error", UnknownTokensWarning)
            scores = ns["scores_on"](ns["m"], "import os\nimport sys\n" * 2).induction
        assert tuple(scores.shape) == (2, 4)
        roles = ns["discover"](ns["m"]).report.to_dict()["roles"]
        assert roles.get("induction"), roles  # the trained model has induction heads
        assert ns["exam"](ns["m"])[0].rank == 0
        # the notebook idiom: the same cell again loads the run instead of training
        before = (tmp_path / "runs/cpu-2l/model.safetensors").stat().st_mtime_ns
        exec(compile(snippet, "README.md", "exec"), {})
        assert (tmp_path / "runs/cpu-2l/model.safetensors").stat().st_mtime_ns == before
    finally:
        torch.set_num_threads(1)
