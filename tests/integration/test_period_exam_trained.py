"""The recipe's claim on the trained fixtures, measured as behaviour: the period exams (pass rule
on the Wilson lower bound, chance measured on the 1-layer and an untrained model) and induction
on held-out text (the in-context score, the repeated-passage drop, induction scores on text)."""

from __future__ import annotations

import pytest
import torch

from interp_toolkit.exams.periods import exam_by_period, exam_with_chance, with_chance
from interp_toolkit.exams.verdict import exam_verdict

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def untrained_2l(trained_2l):
    from interp_toolkit.models.build import build_model

    return build_model(trained_2l.model_cfg.replace(seed=12345), codec=trained_2l.codec)


@pytest.fixture(scope="module")
def held_out(trained_2l):
    """256 held-out text windows of the fixtures' corpus (as training read them: no BOS)."""
    from interp_toolkit.text.stream import DataConfig, tokenize_corpus, windows

    d = DataConfig(**trained_2l.settings["data"])
    corpus = tokenize_corpus(d.corpus, d.val_fraction, d.max_tokens, progress=False)
    w = windows(corpus.val_ids, trained_2l.codec, trained_2l.model_cfg.n_ctx)
    assert len(w) >= 256
    return w[:256]


def test_two_layers_pass_every_exam_one_layer_none(trained_2l, trained_1l, untrained_2l):
    """The 2-layer model passes every period exam of both token kinds (Wilson lower bound >=
    0.90) and is above the 1-layer model and an untrained one on the same prompts at every
    exam; the 1-layer model and the untrained one pass none."""
    codec = trained_2l.codec
    two = exam_with_chance(trained_2l.model, codec, model_cfg=trained_2l.model_cfg)
    one = exam_by_period(trained_1l.model, codec)
    two = with_chance(two, one, "1-layer model")
    # periods 2..8: the longest with 16 or more start positions at context 32 (exams/prompts.py)
    assert {(e.kind, e.period) for e in two} == {
        (k, p) for k in ("letters", "random") for p in range(2, 9)
    }
    v = exam_verdict(two)
    detail = [(e.kind, e.period, e.passes, round(e.interval.low, 3)) for e in two]
    assert v.all_pass, detail
    assert len(v.above["1-layer model"]) == len(v.above[next(iter(v.above))]) == 14, detail
    for rows in (one, exam_by_period(untrained_2l, codec)):
        w = exam_verdict(rows)
        assert w.n_passing == 0, [(e.kind, e.period, e.passes) for e in rows]


def test_induction_shows_on_held_out_text(trained_2l, trained_1l, untrained_2l, held_out):
    """On held-out text the 2-layer model's repeated-passage drop is larger than the 1-layer
    model's and an untrained model's by more than the intervals' widths, and its best layer-1
    induction score on the text is higher. (The in-context score does not separate them at this
    context of 32 tokens: -0.65 [-1.02, -0.27] for 2 layers, -0.49 [-0.86, -0.11] for 1 layer and
    -0.75 [-0.89, -0.61] untrained, experiments/results/exam_text_measures.json; it is reported,
    read against the untrained model, and not asserted.)"""
    from interp_toolkit.exams.text_measures import text_induction

    with torch.no_grad():
        two, one, raw = (
            text_induction(m, held_out, passage_rows=256)
            for m in (trained_2l.model, trained_1l.model, untrained_2l)
        )
    detail = {
        n: (m.icl.score, m.passage.drop, m.best())
        for n, m in (("2l", two), ("1l", one), ("0", raw))
    }
    for other in (one, raw):
        assert two.passage.drop.low > other.passage.drop.high, detail
        assert two.best()[1] > other.best()[1], detail
    # the logged curves carry the same measures, from the first scoring on
    logged = [r for r in trained_2l.metrics() if "icl_score" in r]
    assert logged and logged[0]["step"] == 25 and "passage_drop" in logged[-1]
