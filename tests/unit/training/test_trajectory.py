"""Training dynamics read from metrics.jsonl (the phase change), on hand-written metrics."""

from __future__ import annotations

import json

import pytest
import torch

from interp_toolkit.heads.dynamics import trajectory
from interp_toolkit.training import first_induction_step

# Scored every 10 steps (2 layers x 2 heads); unscored rows at 5, 15, ... carry a loss only. A
# layer-0 head scores 0.9 from the start (a layer-0 head cannot be an induction head), a layer-1
# head reaches exactly 0.4 at step 30 (not above it) and 0.41 at step 40.
INDUCTION = {
    10: [[0.9, 0.0], [0.1, 0.2]],
    20: [[0.9, 0.0], [0.3, 0.1]],
    30: [[0.9, 0.0], [0.4, 0.35]],
    40: [[0.9, 0.0], [0.1, 0.41]],
    50: [[0.9, 0.0], [0.2, 0.8]],
}
LOSS = {10: 5.0, 20: 4.5, 30: 4.0, 40: 3.0, 50: 2.5}


@pytest.fixture
def run(tmp_path):
    rows = []
    for step in range(5, 55, 5):
        row = {"step": step, "tokens": 100 * step, "loss": LOSS.get(step, 9.0)}
        if step in INDUCTION:
            row["induction"] = INDUCTION[step]
            row["prev_token"] = [[0.0, 0.5], [0.1, 0.1]]
            row["val_loss"] = LOSS[step] + 0.25
        rows.append(row)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_trajectory_holds_the_scored_rows(run):
    tr = trajectory(run)
    assert tr.steps == [10, 20, 30, 40, 50] and tr.tokens == [1000, 2000, 3000, 4000, 5000]
    assert tr.loss == [5.0, 4.5, 4.0, 3.0, 2.5] and tr.val_loss[0] == 5.25
    assert torch.equal(tr.induction, torch.tensor(list(INDUCTION.values())))
    assert tr.previous_token[2, 0, 1] == 0.5


def test_first_step_above_counts_layer_1_and_up_strictly_above(run):
    tr = trajectory(run)
    assert tr.first_step_above(0.4) == 40  # 0.4 at step 30 is not above 0.4; layer 0 never counts
    assert tr.first_step_above(0.35) == 30
    assert tr.first_step_above(0.8) is None
    assert tr.best_induction() == pytest.approx(0.8)
    one_layer = [{**r, "induction": r["induction"][:1]} for r in tr.rows]
    assert first_induction_step(one_layer, 0.85) == 10  # a 1-layer model's rule: layer 0 counts
    vw = [{**r, "induction_vw": [[0.0, 0.0], [0.5, 0.5]]} for r in tr.rows]
    assert first_induction_step(vw, 0.45) == 10  # the deciding score, when logged, is the one read


def test_phase_change_reports_the_losses_around_it(run):
    got = trajectory(run).phase_change(0.4)
    assert got == {
        "threshold": 0.4,
        "step": 40,
        "tokens": 4000,
        "loss_before": 4.0,  # the previous scored row
        "loss_at": 3.0,
        "best_induction": pytest.approx(0.41),  # layers >= 1, as the step itself
    }
    assert trajectory(run).phase_change(0.9) == {"threshold": 0.9, "step": None}
