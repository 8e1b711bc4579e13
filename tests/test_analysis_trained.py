"""The checks that must hold on trained cpu-preset models (slow; fixtures from conftest.py).

``trained_2l`` / ``trained_1l`` are session-scoped :class:`interp_toolkit.runs.Run` objects trained
with the cpu preset (2 and 1 layers).
"""

from __future__ import annotations

import pytest

from interp_toolkit.analysis.ablation import induction_after_ablation
from interp_toolkit.analysis.batches import default_layout, default_token_range, repeated_tokens
from interp_toolkit.analysis.exam import BUILTIN_EXAMS, run_exam
from interp_toolkit.analysis.scores import discover_heads

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report_2l(trained_2l):
    return discover_heads(trained_2l.model, trained_2l.codec, n_seqs=64, n_null=4, seed=0)


def test_prev_and_induction_heads_above_tau(report_2l):
    s, taus = report_2l.scores, report_2l.taus
    detail = report_2l.to_dict()["heads"]
    assert (s.previous_token[0] > taus["previous_token"]).any(), detail
    assert (s.induction[1] > taus["induction"]).any(), detail
    # and the roles (tau and the 0.4 floor) name them
    assert any(layer == 0 for layer, _ in report_2l.heads_with_role("previous-token")), detail
    assert any(layer == 1 for layer, _ in report_2l.heads_with_role("induction")), detail


def test_fresh_init_null_agrees(trained_2l):
    rep = discover_heads(trained_2l.model, trained_2l.codec, n_seqs=32, null="fresh_init", n_null=2)
    assert any(layer == 1 for layer, _ in rep.heads_with_role("induction"))


def test_exam_rank0_for_2l_not_for_1l(trained_2l, trained_1l):
    for exam in BUILTIN_EXAMS:
        res = run_exam(trained_2l.model, trained_2l.codec, exam.prompt, exam.target)
        assert res.rank == 0, (exam.name, res.to_dict())
    ranks_1l = [
        run_exam(trained_1l.model, trained_1l.codec, e.prompt, e.target).rank for e in BUILTIN_EXAMS
    ]
    assert any(r > 0 for r in ranks_1l), ranks_1l


def test_ablating_prev_head_lowers_induction(trained_2l, report_2l):
    model, codec = trained_2l.model, trained_2l.codec
    prev = (0, int(report_2l.scores.previous_token[0].argmax()))
    ind = (1, int(report_2l.scores.induction[1].argmax()))
    period, prefix_max = default_layout(int(model.cfg.n_ctx))
    low, high = default_token_range(codec)
    batch = repeated_tokens(
        32, period, low=low, high=high, bos_id=codec.bos_id, prefix_max=prefix_max, seed=123
    )
    clean = float(induction_after_ablation(model, batch, []).induction[ind])
    ablated = float(induction_after_ablation(model, batch, [prev]).induction[ind])
    assert ablated < 0.8 * clean, (prev, ind, clean, ablated)
