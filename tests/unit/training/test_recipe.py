"""A training's recipe is assembled in one place (``training/presets.py: recipe``), by ``train``
and by the notebook API's ``train`` alike."""

from __future__ import annotations

import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.training.presets import recipe


def _seen(monkeypatch) -> list[tuple]:
    import interp_toolkit.training as training

    seen: list[tuple] = []

    def fake_train_model(out, model_cfg, data_cfg, train_cfg, **kwargs):
        seen.append((model_cfg, data_cfg, train_cfg, kwargs["preset"]))
        raise SystemExit(0)  # seen: nothing is trained

    monkeypatch.setattr(training, "train_model", fake_train_model)
    return seen


def test_the_cli_and_the_api_train_the_same_recipe(monkeypatch, tmp_path):
    """The same settings asked for both ways give the same configs (d_head following d_model,
    the seed in the model and the training, the stop on induction): a second assembly that drifted
    (the API once skipped what the CLI did) fails here."""
    from interp_toolkit import api
    from interp_toolkit.cli import main

    seen = _seen(monkeypatch)
    argv = ["train", "--out", str(tmp_path / "a"), "--quiet", "--layers", "3", "--d-model", "96"]
    with pytest.raises(SystemExit):
        main([*argv, "--seed", "7", "--preset", "text"])
    with pytest.raises(SystemExit):
        api.train(tmp_path / "b", layers=3, preset="text", d_model=96, seed=7, quiet=True)
    cli, notebook = seen
    assert cli == notebook
    model, data, train, name = cli
    assert model.d_head * model.n_heads == 96 and model.seed == train.seed == 7 and name == "text"
    assert train.stop_score == THRESHOLDS.induction  # no --steps: stops once induction formed


def test_the_recipe_stops_on_induction_unless_told_how_long():
    assert recipe("cpu", 2).train.stop_score == THRESHOLDS.induction
    assert recipe("cpu", 2, steps=40).train.stop_score is None
    assert recipe("cpu", 2, all_steps=True).train.stop_score is None
    assert recipe("cpu", 1).train.stop_score is None  # no layer-1 head to wait for


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"steps": 40, "all_steps": True}, "both say how long"),
        ({"bogus": 1}, "no setting 'bogus'"),
        ({"d_model": 97}, "cannot work with"),
    ],
)
def test_the_recipe_refuses_in_one_line(changes, says):
    with pytest.raises(UserError, match=says):
        recipe("cpu", 2, **changes)


def test_the_api_takes_the_commands_options_object_or_its_fields_as_keywords(monkeypatch, tmp_path):
    """``api.train(out, TrainOptions(...))`` trains what the same fields as keywords train; a
    keyword replaces the object's value (seed 8 over 7); any other keyword sets the recipe's
    field (``batch_size``); ``quiet`` reaches the training; options of another type are one line."""
    import interp_toolkit.training as training
    from interp_toolkit import api
    from interp_toolkit.runtime.options import replaced
    from interp_toolkit.training.options import TrainOptions

    seen, progress = [], []

    def fake_train_model(out, model_cfg, data_cfg, train_cfg, **kwargs):
        seen.append((model_cfg, data_cfg, train_cfg))
        progress.append(kwargs["progress"])
        raise SystemExit(0)

    monkeypatch.setattr(training, "train_model", fake_train_model)
    opts = TrainOptions(layers=3, preset="text", d_model=96, seed=7, quiet=True)
    for call in (
        lambda: api.train(tmp_path / "a", opts),
        lambda: api.train(tmp_path / "b", layers=3, preset="text", d_model=96, seed=7, quiet=True),
        lambda: api.train(tmp_path / "c", opts, seed=8, batch_size=2),
    ):
        with pytest.raises(SystemExit):
            call()
    (m_obj, d_obj, t_obj), (m_kw, d_kw, t_kw), (m_8, _, t_8) = seen
    assert (m_obj, d_obj, t_obj) == (m_kw, d_kw, t_kw) and m_obj.seed == 7
    assert (m_8.seed, t_8.seed, t_8.batch_size) == (8, 8, 2) and progress == [False] * 3
    with pytest.raises(UserError, match="options must be a TrainOptions, got int"):
        replaced(TrainOptions, 3, "train")  # (api.train's annotation stops it first in the tests)
    with pytest.raises(UserError, match="repeat-fraction 2"):
        api.train(tmp_path / "e", repeat_fraction=2.0)  # TrainOptions' own check
    assert not (tmp_path / "e").exists()
