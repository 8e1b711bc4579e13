"""``interp-toolkit circuit``: ranked edges, the curve and the circuit as JSON, the drawing, and bad
input answered in one line (exit 2) before any work."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_main
from planting import letters_codec
from planting.circuits import CFG, k_composition_model

from interp_toolkit.views.page import Section, render_report


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from interp_toolkit.runs.folder import save_run

    return save_run(tmp_path_factory.mktemp("k") / "k", k_composition_model(), letters_codec(), CFG)


def test_circuit_json_and_drawing(run_dir, tmp_path, capsys):
    out, page = tmp_path / "c.json", tmp_path / "c.html"
    argv = ["circuit", str(run_dir), "--task", "induction", "--n-prompts", "8", "--ig-steps", "5"]
    assert run_main([*argv, "--json", str(out), "--out", str(page)]) == 0
    data = json.loads(out.read_text())
    edges = data["edges"]
    assert len(edges) == data["total_edges"] == 29  # 6 + 3 x 6 head inputs, 5 into the logits
    assert set(edges[0]) == {"source", "target", "input", "score"}
    scores = [abs(e["score"]) for e in edges]
    assert scores == sorted(scores, reverse=True)  # ranked
    circuit = data["circuit"]
    got = {(e["source"], e["target"], e["input"]) for e in circuit["edges"]}
    assert got == {
        ("embed", "0.0", "v"),
        ("0.0", "1.0", "k"),
        ("embed", "1.0", "v"),
        ("1.0", "logits", "logits"),
    }
    assert circuit["faithfulness"] == pytest.approx(1.0, abs=1e-3) and data["threshold"] == 0.8
    assert [p["edges"] for p in data["curve"]] == sorted(p["edges"] for p in data["curve"])
    html = page.read_text()
    assert "plotly-graph-div" in html and "into k" in html and "recover 100% of the gap" in html
    assert 'src="http' not in html  # offline: plotly is inlined, nothing loads from a CDN
    stdout = " ".join(capsys.readouterr().out.split())
    assert "circuit: 4 edges recover 100.0% of the gap" in stdout
    # the number not chosen on its own prompts: the held-out draw, with its interval
    held = circuit["heldout_faithfulness"]
    assert circuit["heldout_prompts"] == 8 and held["low"] <= held["value"] <= held["high"]
    said = f"recovers {held['value']:.1%} [{held['low']:.1%}, {held['high']:.1%}]"
    assert f"held out: on 8 prompts of the task drawn again (seed {circuit['heldout_seed']})" in (
        stdout
    )
    assert said in stdout
    page_said = f"on 8 held-out prompts (the task drawn again) it recovers {held['value']:.0%}"
    assert page_said in " ".join(html.split())


def test_fixed_edges_and_per_position(run_dir, tmp_path):
    out = tmp_path / "c.json"
    argv = ["circuit", str(run_dir), "--n-prompts", "4", "--edges", "2", "--ig-steps", "1"]
    assert run_main([*argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["circuit"]["top_k"] == 2 and len(data["circuit"]["edges"]) == 2
    assert data["circuit"]["faithfulness"] < 0.8  # two edges do not do the task
    assert run_main([*argv[:-2], "--per-position", "--json", str(out)]) == 0
    assert "position" in json.loads(out.read_text())["edges"][0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--task", "nope"], "--task 'nope' is unknown"),
        (["--task", "ioi"], "needs GPT-2's vocabulary"),
        (["--ig-steps", "0"], "--ig-steps 0 cannot work"),
        (["--edges", "0"], "--edges 0 cannot work"),
        (["--n-prompts", "1"], "cannot give an interval"),
    ],
)
def test_bad_input_is_one_line_exit_2(run_dir, capsys, extra, message):
    assert run_main(["circuit", str(run_dir), *extra]) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


def test_circuit_figure_is_data_in_figure_out():
    from interp_toolkit.views.circuit import circuit_figure

    edges = [
        {"source": "0.0", "target": "1.0", "input": "k", "score": 2.0},
        {"source": "1.0", "target": "logits", "input": "logits", "score": 4.0},
    ]
    fig = circuit_figure(edges, n_layers=2, n_heads=2)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == ["0.0 -> 1.0 (k)", "1.0 -> logits (logits)"]
    assert lines[1].line.width > lines[0].line.width  # width follows |score|
    assert lines[0].line.color != lines[1].line.color  # colour names the input
    assert "plotly-graph-div" in render_report([Section("c", [fig])])


def test_circuit_on_a_gpt2_folder(gpt2_dirs, tmp_path):
    """The GPT-2 path (MLPs, LayerNorm, JointQKV attention): a random GPT-2-shaped model does
    not do the IOI task, so every edge is ranked and no circuit is claimed."""
    out = tmp_path / "g.json"
    argv = ["circuit", str(gpt2_dirs["good"]), "--task", "ioi", "--n-prompts", "4"]
    assert run_main([*argv, "--ig-steps", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["total_edges"] == len(data["edges"]) > 0
    assert {e["input"] for e in data["edges"]} == {"q", "k", "v", "mlp", "logits"}
    assert (
        data["circuit"]["edges"] == [] and "does not do the ioi task" in data["circuit"]["reason"]
    )
