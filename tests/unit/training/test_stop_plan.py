"""The stop a run is planned with: a study's rule for ``train`` without ``--steps``
(:func:`~interp_toolkit.training.presets.until_induction`), the line that says it, and a progress
bar whose total is the step the stop falls due at."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.training.presets import get_preset, until_induction, with_overrides
from interp_toolkit.training.steplog import InductionStop, StepLog, planned_steps


def test_until_induction_is_the_studys_stop_for_deeper_models_only():
    text = until_induction(get_preset("text", 2))
    assert text.train.stop_score == THRESHOLDS.induction
    assert text.train.stop_after == get_preset("text", 2).after_induction
    assert text.train.steps == get_preset("text", 2).train.steps  # the budget stays
    assert until_induction(get_preset("cpu", 8), 50).train.stop_after == 50
    assert until_induction(get_preset("text", 1)) == get_preset("text", 1)  # no layer-1 head
    bpe = get_preset("text-bpe", 2)  # trains its fixed steps in a study too
    assert until_induction(bpe) == bpe
    assert (
        planned_steps(get_preset("text", 1).train) == f"{get_preset('text', 1).train.steps:,} steps"
    )
    line = planned_steps(with_overrides(text, steps=30_000).train)
    assert line == (
        "up to 30,000 steps (stopping once the induction score has stayed above "
        f"{THRESHOLDS.induction:g} for {text.after_induction:,} steps)"
    )


class _Bar:
    def __init__(self, total):
        self.total, self.refreshed = total, 0

    def refresh(self):
        self.refreshed += 1


def test_the_bar_counts_to_the_stop_once_the_floor_is_passed():
    stop = InductionStop(stop_score=0.4, wait=3000)
    log = SimpleNamespace(early_stop=stop, cfg=SimpleNamespace(steps=30_000), bar=_Bar(30_000))
    StepLog._bar_total(log)
    assert log.bar.total == 30_000 and log.bar.refreshed == 0  # below the floor: the budget
    stop.track(8000, [[0.0], [0.45]])
    StepLog._bar_total(log)
    assert log.bar.total == 11_000 and stop.due_step() == 11_000
    stop.track(9000, [[0.0], [0.39]])  # the streak ends: the budget again
    StepLog._bar_total(log)
    assert log.bar.total == 30_000
    stop.track(29_000, [[0.0], [0.5]])  # due past the budget: the budget ends it
    StepLog._bar_total(log)
    assert log.bar.total == 30_000


def test_train_without_steps_stops_as_a_study_does(tmp_path, capsys, monkeypatch):
    """``train`` hands train_model the study's stop unless --steps or --all-steps, and says so
    first; the API's train() does the same."""
    import interp_toolkit.training as training
    from interp_toolkit import api
    from interp_toolkit.errors import UserError
    from tests.cli_helpers import run_cli

    seen = []

    def fake(out, model, data, train, **kw):
        seen.append(train)
        raise UserError("stopped here by the test.")

    monkeypatch.setattr(training, "train_model", fake)
    base = ("train", "--preset", "text", "--layers", "2")
    res = run_cli(capsys, *base, "--out", tmp_path / "a")
    assert res.code == 2 and res.err.splitlines() == [
        "training: 2 layer(s), up to 50,000 steps (stopping once the induction score has stayed "
        f"above {THRESHOLDS.induction:g} for 3,000 steps), preset text",
        "error: stopped here by the test.",
    ]
    assert seen[-1].stop_score == THRESHOLDS.induction and seen[-1].stop_after == 3000
    run_cli(capsys, *base, "--out", tmp_path / "b", "--all-steps")
    assert seen[-1].stop_score is None and seen[-1].steps == 50_000
    run_cli(capsys, *base, "--out", tmp_path / "c", "--steps", "40")
    assert seen[-1].stop_score is None and seen[-1].steps == 40
    run_cli(capsys, *base, "--out", tmp_path / "d", "--steps", "40", "--all-steps").one_line_error(
        "--steps and --all-steps"
    )
    assert not (tmp_path / "d").exists()
    with pytest.raises(UserError, match="give one"):
        api.train(tmp_path / "e", preset="text", steps=40, all_steps=True)
    for kw, stops in (({}, True), ({"steps": 40}, False), ({"all_steps": True}, False)):
        try:
            api.train(tmp_path / f"api{len(seen)}", preset="text", **kw)
        except UserError:
            pass
        assert (seen[-1].stop_score is not None) == stops
