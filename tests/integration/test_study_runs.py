"""The whole study and a sweep, end to end (tiny step counts)."""

import json

import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.study import StudyConfig, reproduce


def test_reproduce_end_to_end_and_reuse(tmp_path, capsys):
    out = tmp_path / "study"
    # --steps fixes every run's length: all three train at once, two worker processes
    cfg = StudyConfig(out=out, layers=(1, 2, 3), steps=12, sample_tokens=8, workers=2)
    result = reproduce(cfg)
    assert result.index.is_file()
    html = result.index.read_text()
    assert "cpu-1l/report.html" in html and "cpu-2l/report.html" in html
    # the findings and the data mix are computed from this study's runs
    assert "90% of every batch are synthetic windows" in html and "2..16 tokens" in html
    assert "The seed&#x27;s claim does not hold as measured here" in html  # 12 steps: no induction
    assert [d.n_layers for d in result.depths] == [1, 2, 3]
    assert [e.period for e in result.depths[1].exams] == list(range(2, 17))
    # offline: no external scripts and no ESM import from the circuitsvis CDN
    assert "<script src" not in html and 'from "https://unpkg.com' not in html
    for run in ("cpu-1l", "cpu-2l"):
        for name in (
            "report.html",
            "heads.json",
            "exam.json",
            "samples.json",
            "circuits.json",
            "model.safetensors",
        ):
            assert (out / run / name).is_file(), (run, name)
    study = json.loads((out / "study.json").read_text())
    assert study["status"] == "done" and [r["n_layers"] for r in study["runs"]] == [1, 2, 3]
    assert study["causal"] and study["causal"][0]["run"] == "cpu-2l"
    assert {"q", "k", "v"} <= set(study["composition"][0])
    assert [d["steps"] for d in study["depths"]] == [12, 12, 12]
    assert study["thresholds"]["exam_pass"] == 0.95
    exam = json.loads((out / "cpu-2l" / "exam.json").read_text())
    assert [r["period"] for r in exam["periods"]] == list(range(2, 17)) and exam["prompts"]
    # running again reuses the finished runs
    before = (out / "cpu-2l" / "model.safetensors").stat().st_mtime_ns
    reproduce(cfg)
    assert "reusing" in capsys.readouterr().err
    assert (out / "cpu-2l" / "model.safetensors").stat().st_mtime_ns == before


def test_sweep_over_context_length(tmp_path):
    from interp_toolkit.sweep import SweepConfig, sweep

    rows = sweep(SweepConfig(out=tmp_path / "sw", param="n_ctx", values=(16.0, 24.0), steps=6))
    assert [r["n_ctx"] for r in rows] == [16, 24]
    assert all(r["steps_trained"] == 6 for r in rows)
    assert (tmp_path / "sw" / "index.html").is_file() and (tmp_path / "sw" / "sweep.json").is_file()
    with pytest.raises(UserError, match="cannot sweep"):
        sweep(SweepConfig(out=tmp_path / "sw2", param="colour", values=(1.0,)))
