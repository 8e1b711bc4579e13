"""The whole study and a sweep, end to end (tiny step counts)."""

import dataclasses
import json
import re

import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.study import folder
from interp_toolkit.study.reproduce import StudyConfig, reproduce


def test_reproduce_end_to_end_and_reuse(tmp_path, capfd):
    out = tmp_path / "study"
    # --steps fixes every run's length: all five (three depths, two MLP twins) train at once,
    # two worker processes
    cfg = StudyConfig(
        out=out, preset="cpu", layers=(1, 2, 3), steps=12, sample_tokens=8, workers=2, mlp=True
    )
    result = reproduce(cfg)
    assert result.index.is_file()
    # every run is analysed once (a comprehension once re-ran the whole study per run)
    said = capfd.readouterr().err
    for name in ("cpu-1l", "cpu-2l", "cpu-3l", "cpu-1l-mlp", "cpu-2l-mlp"):
        assert said.count(f"[{name}] samples, exams") == 1, (name, said)
    html = result.index.read_text()
    assert "cpu-1l/report.html" in html and "cpu-2l/report.html" in html
    # the findings and the data mix are computed from this study's runs
    assert "90% of every batch are synthetic windows" in html and "2..16 tokens" in html
    assert [d.n_layers for d in result.depths] == [1, 2, 3]
    assert [d.name for d in result.mlp_depths] == ["cpu-1l-mlp", "cpu-2l-mlp"]
    # the MLP twins, the probes and the neurons are on the page, each with its computed sentence
    assert "Models with MLPs" in html and "What each layer knows: linear probes" in html
    assert "2 layers with MLPs (cpu-2l-mlp): no induction head" in html
    assert [p.name for p in result.probes] == ["cpu-1l", "cpu-2l", "cpu-1l-mlp", "cpu-2l-mlp"]
    assert [p.result.rows[-1].boundary for p in result.probes] == [
        "attn 0",
        "attn 1",
        "mlp 0",
        "mlp 1",
    ]
    assert [(n.name, len(n.layers)) for n in result.neurons] == [
        ("cpu-1l-mlp", 1),
        ("cpu-2l-mlp", 2),
    ]
    assert "cpu-2l-mlp layer 1: " in html and "cpu-2l-mlp/report.html" in html
    kinds = [(k, p) for k in ("letters", "random") for p in range(2, 9)]  # 16+ start positions
    assert [(e.kind, e.period) for e in result.depths[1].period_exams] == kinds
    # the 2-layer model's exams carry the untrained model and, on the page, the 1-layer model
    assert {c.model for c in result.depths[1].period_exams[0].chance} == {
        "untrained 2-layer model (same architecture)",
        "1-layer model cpu-1l",
    }
    assert "period exams above the 1-layer model (McNemar)" in html
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
    assert study["status"] == "done" and [r["n_layers"] for r in study["runs"]] == [1, 2, 3, 1, 2]
    assert study["mlp"] == [1, 2] and [d["steps"] for d in study["mlp_depths"]] == [12, 12]
    assert [p["name"] for p in study["probes"]][:2] == ["cpu-1l", "cpu-2l"]
    assert [len(n["layers"]) for n in study["neurons"]] == [1, 2]
    mlp_config = json.loads((out / "cpu-2l-mlp" / "config.json").read_text())
    assert mlp_config["model"]["mlp"] is True
    two = study["depths"][1]
    assert two["route"]["task"] == "induction" and two["route"]["heads"]
    assert set(two["circuit"]["ig"]) >= {"edges", "curve", "circuit"} and two["circuit"]["eap"]
    assert "Route by path</h2>" in html and "Discovered circuits</h2>" in html  # folded, titled
    assert [d["steps"] for d in study["depths"]] == [12, 12, 12]
    assert study["thresholds"]["exam_lower_bound"] == 0.9
    # the verdicts are computed from these runs' own files: each depth's recorded induction heads
    # are the heads heads.json gives the role, its loss is the run's last logged loss, its best
    # head and score are the ones its line on the page names, and the claims (12 steps: no
    # model has an induction head) say "2 layers can" is not reproduced
    for depth in study["depths"]:
        run_dir = out / depth["name"]
        heads = json.loads((run_dir / "heads.json").read_text())["heads"]
        assert sorted(depth["induction_heads"]) == sorted(
            h["head"] for h in heads if h["role"] == "induction"
        ), depth["name"]
        logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert depth["final_loss"] == pytest.approx([r["loss"] for r in logged if "loss" in r][-1])

    # the depth table's strongest-head rows are each depth's recorded top head and score
    def row(label: str) -> list[str]:
        found = re.search(rf"<tr><t[hd][^>]*>{re.escape(label)}</t[hd]>(.*?)</tr>", html)
        assert found, label
        return re.findall(r"<td[^>]*>(.*?)</td>", found.group(1))

    depths = study["depths"]
    assert row("its head") == [d["top_head"] for d in depths]
    label = "strongest induction score (layer ≥ 1; any layer for 1 layer)"
    assert row(label) == [f"{d['top_score']:.2f}" for d in depths]
    lacking = [
        d["n_layers"] for d in study["depths"] if d["n_layers"] > 1 and not d["induction_heads"]
    ]
    assert lacking == [2, 3] and study["claims"]["two_can"]["mark"] == "not reproduced"
    assert study["claims"]["two_can"]["numbers"][0]["checked"] == 0
    assert "Curriculum: 2 layers can: ✗ not reproduced" in "\n".join(result.findings)
    assert "✗ not reproduced" in html and "reproduced when" in html
    claims_md = (out / "claims.md").read_text()  # the same table in Markdown (the README's)
    assert claims_md.startswith("| the post says | its number | Curriculum, seed 0 |")
    assert "| 2 layers can | its 2-layer model passes both | **✗ not reproduced**" in claims_md
    exam = json.loads((out / "cpu-2l" / "exam.json").read_text())
    assert [(r["kind"], r["period"]) for r in exam["periods"]] == kinds and exam["prompts"]
    assert exam["periods"][0]["n_prompts"] == 200 and "wilson95" in exam["periods"][0]
    # running again reuses the finished runs (two of them, to keep the test short)
    before = (out / "cpu-2l" / "model.safetensors").stat().st_mtime_ns
    capfd.readouterr()
    folder.TRAINED_HERE.clear()  # as a new command (a new process) starts
    reproduce(dataclasses.replace(cfg, layers=(2,)))
    err = capfd.readouterr().err
    for name in ("cpu-2l", "cpu-2l-mlp"):  # said once each
        assert err.count(f"[{name}] finished run with the same settings found: reusing it") == 1
    assert "training" not in err
    assert (out / "cpu-2l" / "model.safetensors").stat().st_mtime_ns == before


def test_sweep_over_context_length(tmp_path):
    from interp_toolkit.study.sweep import SweepConfig, sweep

    rows = sweep(SweepConfig(out=tmp_path / "sw", param="n_ctx", values=(16.0, 24.0), steps=6))
    assert [r["n_ctx"] for r in rows] == [16, 24]
    assert all(r["steps_trained"] == 6 for r in rows)
    assert (tmp_path / "sw" / "index.html").is_file() and (tmp_path / "sw" / "sweep.json").is_file()
    with pytest.raises(UserError, match="cannot sweep"):
        sweep(SweepConfig(out=tmp_path / "sw2", param="colour", values=(1.0,)))
