"""Any depth of our own models (issue 46 item 6): ``train --layers N`` for every N >= 1, the API
saying a wrong type as one, the analyses at an untried depth, and a run that ends without
induction saying so (and why, when its model is smaller than its preset's)."""

from __future__ import annotations

import pytest
from cli_helpers import run_cli

from interp_toolkit.errors import UserError
from interp_toolkit.training.presets import get_preset, induction_outcome, with_overrides


@pytest.mark.parametrize("bad, words", [("2", "is a str, not a whole number"), (2.0, "is a float"),
                                        (0, "--layers 0 cannot work")])  # fmt: skip
def test_a_depth_that_cannot_work_is_one_line_naming_why(bad, words):
    """``train(out, layers="2")`` said "--layers 2 is not offered: use one of 1, 2, 3, 8". (The
    API's own call is type-checked under the tests' beartype hook, so the rule is called here.)"""
    from interp_toolkit.training.presets import check_layers

    with pytest.raises(UserError, match=words):
        check_layers(bad)
    assert check_layers(4) == 4 and get_preset("cpu", 7).model.n_layers == 7


def test_the_api_refuses_a_depth_of_zero_before_any_folder(tmp_path):
    from interp_toolkit import train

    with pytest.raises(UserError, match="--layers 0 cannot work"):
        train(tmp_path / "r", layers=0, steps=1, quiet=True)
    assert not (tmp_path / "r").exists()


def test_any_depth_trains_and_is_analysed(tmp_path, capsys):
    """Four layers (never offered before): trained a few steps, then the heads are scored at
    every layer and the run reads back."""
    from interp_toolkit import discover, train

    with pytest.warns(UserWarning, match="induction did not form"):
        run = train(tmp_path / "four", layers=4, steps=3, d_model=32, n_ctx=16, quiet=True)
    assert run.model_cfg.n_layers == 4
    report = discover(run, n_seqs=4).report
    assert report.scores.get("induction").shape == (4, 4)
    run_cli(capsys, "train", "--out", str(tmp_path / "five"), "--layers", "5", "--steps", "2",
            "--d-model", "32", "--n-ctx", "16", "--quiet")  # fmt: skip
    assert (tmp_path / "five" / "model.safetensors").is_file()


def _rows(best: float) -> list[dict]:
    return [{"step": s, "induction": [[0.0, 0.01], [best * s / 30, 0.02]]} for s in (10, 20, 30)]


def test_a_run_without_induction_says_so_and_why():
    text = get_preset("text", 2)
    small = with_overrides(text, d_model=64)
    said = induction_outcome(small, _rows(0.08), 30_000)
    assert said is not None and "did not form" in said and "0.080 (at step 30)" in said
    assert "d_model is 64, the text preset's 128" in said and "train at d_model 128" in said
    said = induction_outcome(text, _rows(0.08), 30_000)
    assert said is not None and "d_model" not in said and "train longer" in said
    assert induction_outcome(text, _rows(0.9), 30_000) is None  # it formed
    assert induction_outcome(get_preset("text", 1), _rows(0.08), 30_000) is None  # no layer 1
