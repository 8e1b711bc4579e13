"""The text measures in training logs and on the run report: logged every scoring beside the
synthetic-probe scores, the same held-out loss as before, and old logs without them still render."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from interp_toolkit.reports.text_findings import steepest_fall, text_sentences
from interp_toolkit.training.metrics import text_metrics

#: The keys the text measures add to a scored row of metrics.jsonl (TextInduction.metrics).
TEXT_KEYS = (
    "icl_score",
    "icl_ci",
    "icl_tokens",
    "text_windows",
    "icl_documents",
    "passage_drop",
    "passage_ci",
    "passage_loss",
    "passage_rows",
    "passage_tokens",
    "text_induction",
    "text_induction_best",
    "text_induction_head",
)


def _row(step: int, icl: float, drop: float, best: float | None) -> dict:
    return {
        "step": step, "tokens": step * 100, "loss": 3.0, "val_loss": 3.1,
        "icl_score": icl, "icl_ci": [icl - 0.05, icl + 0.05], "icl_tokens": [2, 4, 30, 32, 32],
        "text_windows": 64, "passage_drop": drop, "passage_ci": [drop - 0.1, drop + 0.1],
        "passage_loss": [4.0, 4.0 - drop], "passage_rows": 16, "passage_tokens": 16,
        "text_induction": [[0.1, 0.2], [best or 0.0, 0.3]], "text_induction_best": best,
        "text_induction_head": "1.0" if best is not None else None,
    }  # fmt: skip


def test_training_logs_the_text_measures_every_scoring(tmp_path):
    from interp_toolkit.models.build import ModelConfig
    from interp_toolkit.text import stream as data
    from interp_toolkit.training import TrainSettings, train_model

    words = np.array("alpha beta gamma delta import return self value for while".split())
    text = " ".join(words[np.random.default_rng(0).integers(0, len(words), 120_000)])
    (tmp_path / "c.txt").write_text(text)
    res = train_model(
        tmp_path / "run",
        ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=1),
        data.DataConfig(corpus=str(tmp_path / "c.txt"), vocab_size=32),
        TrainSettings(steps=4, batch_size=4, log_every=1, score_every=2, checkpoint_every=4),
        progress=False,
    )
    from interp_toolkit.text.stream import tokenize_corpus, windows
    from interp_toolkit.training.metrics import TEXT_WINDOWS

    n_val = len(
        windows(tokenize_corpus(str(tmp_path / "c.txt"), progress=False).val_ids, res.run.codec, 16)
    )
    rows = res.run.metrics()
    scored = [r for r in rows if "induction" in r]
    assert [r["step"] for r in scored] == [2, 4]
    for r in scored:
        assert set(TEXT_KEYS) <= set(r), set(TEXT_KEYS) - set(r)
        lo, hi = r["icl_ci"]
        assert lo <= r["icl_score"] <= hi and r["icl_tokens"] == [2, 3, 15, 16, 16]
        assert r["text_windows"] == min(TEXT_WINDOWS, n_val)
        assert len(r["text_induction"]) == 2 and r["passage_tokens"] == 8
    assert all("icl_score" not in r for r in rows if "induction" not in r)
    # val_loss is still the model's loss on the same held-out windows
    from interp_toolkit.training.metrics import VAL_WINDOWS

    run = res.run
    corpus = tokenize_corpus(str(tmp_path / "c.txt"), progress=False)
    val = windows(corpus.val_ids, run.codec, 16)[:TEXT_WINDOWS]
    assert len(val) > VAL_WINDOWS  # the text measures read more windows than val_loss
    with torch.no_grad():
        want = float(run.model(val[:VAL_WINDOWS], return_type="loss"))
        got = text_metrics(run.model.eval(), val)
    assert got["val_loss"] == pytest.approx(want, abs=1e-5)
    assert rows[-1]["val_loss"] == pytest.approx(got["val_loss"], abs=1e-4)


def test_text_sentences_are_computed_from_the_rows():
    rows = [_row(50, -0.05, 0.2, 0.1), _row(100, -0.08, 0.3, 0.2), _row(150, -0.4, 1.5, 0.7)]
    s = text_sentences(rows)
    assert s[0].startswith("In-context-learning score at step 150: -0.400 [-0.450, -0.350] nats")
    assert "tokens 30-31 minus tokens 2-3 of 32-token windows" in s[0]
    assert "over 64 held-out windows); at step 50 it was -0.050" in s[0]
    assert s[1] == "Its steepest fall between two scorings: 0.320 nats, from step 100 to step 150."
    assert "+1.500 [+1.400, +1.600] nats lower than on the first (4.000 -> 2.500)" in s[2]
    assert "head 1.0 0.700 at step 150; 0.100 at step 50." in s[3]
    # change a number, the words change
    later = [*rows[:2], {**rows[2], "icl_score": -0.1, "icl_ci": [-0.2, 0.0]}]
    assert "from step 100" not in " ".join(text_sentences(later))
    assert steepest_fall(later, "icl_score") == pytest.approx((0.03, 50, 100))
    # old logs: no text keys, no sentence; a run with nothing repeated in its text: no head
    assert text_sentences([{"step": 5, "loss": 3.0}]) == []
    assert len(text_sentences([_row(50, -0.1, 0.2, None)])) == 2


def test_run_report_text_section_old_and_new_logs(tmp_path):
    from _views_fixtures import make_tiny_run

    from interp_toolkit.measures.run import analyse_run
    from interp_toolkit.reports.run_report import text_section
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.views.page import render_report

    analysis = analyse_run(load_run(make_tiny_run(tmp_path / "run")))  # metrics without the keys
    old = render_report([text_section(analysis)], title="t")
    assert "has no text measures" in old
    rows = [_row(10, -0.1, 0.2, 0.1), _row(20, -0.3, 0.9, 0.5)]
    new = render_report([text_section(dataclasses.replace(analysis, rows=rows))], title="t")
    assert "In-context-learning score at step 20: -0.300" in new
    assert new.count('class="plotly-graph-div"') == 1
    json.dumps(rows)


def test_the_study_table_reads_each_depths_last_text_measures():
    from findings_helpers import depth

    from interp_toolkit.reports.study_report import text_rows

    curves = {"cpu-2l": [_row(50, -0.05, 0.2, 0.1), _row(100, -0.4, 1.5, 0.7), {"step": 110}]}
    icl, drop = text_rows([depth(1), depth(2)], curves)
    assert icl[1:] == ["-", "-0.400 [-0.450, -0.350]"]  # cpu-1l logged none
    assert drop[1:] == ["-", "+1.500 [+1.400, +1.600]"]
