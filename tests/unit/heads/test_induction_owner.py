"""One owner for "the induction head(s)": on a hand-built model where the old rules named three
different heads (``tests/planting/disagreeing.py``), the run report, the study page and the stop rule
name the same one."""

from __future__ import annotations

import pytest
import torch
from planting import letters_codec
from planting.circuits import CFG
from planting.disagreeing import PLAIN, VALUE_WEIGHTED, disagreeing_model

from interp_toolkit.heads.induction import (
    best_induction_score,
    first_induction_step,
    logged_induction_key,
    strongest_induction_head,
)
from interp_toolkit.heads.registry import HeadId, top_head
from interp_toolkit.heads.repeats import default_probe
from interp_toolkit.training.metrics import score_grids
from interp_toolkit.training.steplog import InductionStop

WANT = HeadId(1, 1)


@pytest.fixture(scope="module")
def row():
    """A metrics.jsonl row as training logs it (the stop rule's input)."""
    batch = default_probe(letters_codec(), 32, n_seqs=32, seed=7)
    return {"step": 50, **score_grids(disagreeing_model(), batch)}


def test_the_old_rules_disagree_on_this_model(row):
    plain, vw = torch.tensor(row["induction"]), torch.tensor(row["induction_vw"])
    assert plain[1].tolist() == pytest.approx([PLAIN[(1, 0)], PLAIN[(1, 1)]], abs=1e-3)
    assert vw[1].tolist() == pytest.approx(
        [VALUE_WEIGHTED[(1, 0)], VALUE_WEIGHTED[(1, 1)]], abs=1e-3
    )
    assert top_head(vw) == HeadId(0, 1)  # the old run report: any layer
    assert top_head(plain, layers=range(1, 2)) == HeadId(1, 0)  # the old stop rule
    assert top_head(vw, layers=range(1, 2)) == WANT  # the old causal check


def test_the_stop_rule_watches_the_one_head(row):
    assert logged_induction_key(row) == "induction_vw"
    assert strongest_induction_head(row["induction_vw"]) == WANT
    assert best_induction_score(row["induction_vw"]) == pytest.approx(0.75, abs=1e-3)
    # 0.7 lies between the old rule's value (plain 0.6 of 1.0) and the one rule's (0.75 of 1.1)
    assert first_induction_step([row], 0.7) == 50
    stop = InductionStop(stop_score=0.7, wait=100)
    stop.track(50, row[logged_induction_key(row)])
    assert stop.above_since == 50 and not stop.due(149) and stop.due(150)
    stop.track(200, [[0.0], [0.69]])  # a scoring at or below the score ends the streak
    assert stop.above_since is None and not stop.due(400)
    old = {k: v for k, v in row.items() if k != "induction_vw"}  # a run logged before
    assert logged_induction_key(old) == "induction" and first_induction_step([old], 0.7) is None


def test_run_report_and_study_page_name_the_same_head(tmp_path, row):
    from interp_toolkit.measures.run import analyse_run
    from interp_toolkit.runs.folder import load_run, save_run

    run = load_run(save_run(tmp_path / "disagree", disagreeing_model(), letters_codec(), CFG))
    analysis = analyse_run(run, samples=[], n_seqs=8)
    summary = analysis.summary()
    assert analysis.induction_head == WANT  # the run report draws it
    assert summary.top_induction.head == str(WANT)  # the study page names it
    assert strongest_induction_head(row["induction_vw"]) == WANT  # the stop rule watches it
    assert WANT in analysis.key_heads()
