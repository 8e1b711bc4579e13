"""The benchmark and experiment scripts run, a few steps at the smallest sizes they take, each in
its own process as a user runs it, and write their JSON (tests/unit/test_scripts.py checks every
script's package imports in the fast tier). Every script is either run here or named in
:data:`NOT_RUN` with why; a new script is one or the other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Script -> its arguments at the smallest size (``{tmp}``: a fresh folder; ``{run}``: the slow
#: tier's trained 2-layer run). Each writes ``{tmp}/r.json``.
RUN: dict[str, list[str]] = {
    "experiments/bf16_equivalence.py": ["--layers", "1", "--steps", "4", "--json", "{tmp}/r.json"],
    "experiments/cutoff_sensitivity.py": ["--train", "--out", "{tmp}/r.json"],  # planted heads
    "experiments/exam_text_measures.py": ["--steps", "4", "--json", "{tmp}/r.json"],
    "experiments/llc_calibration.py": [
        *("--run", "{run}", "--steps", "1,2", "--grid", "[[1e-4, 1000, 50]]"),
        *(
            "--burn-in",
            "1",
            "--draws",
            "2",
            "--batches",
            "2",
            "--rows",
            "4",
            "--out",
            "{tmp}/r.json",
        ),
    ],
    "experiments/neurons_vs_features.py": [
        *("--layers", "1", "--steps", "4", "--sae-tokens", "4096", "--out", "{tmp}/r.json"),
    ],
    "experiments/null_calibration.py": [
        *("--only", "planted", "--n-planted", "2", "--out", "{tmp}/r.json"),
    ],
    "experiments/sae_claims.py": ["--planted", "--tokens", "4096", "--out", "{tmp}/r.json"],
    "experiments/sae_roles.py": ["--steps", "4", "--tokens", "4096", "--out", "{tmp}/r.json"],
    "experiments/text_repeats.py": ["--tokens", "20000", "--windows", "5", "--out", "{tmp}/r.json"],
    "experiments/text_seeds.py": [
        *("--seeds", "0", "--max-steps", "4", "--window", "2"),
        *("--out", "{tmp}/runs", "--json", "{tmp}/r.json"),
    ],
    "experiments/unk_share.py": [
        *("--shares-only", "--vocab-sizes", "256", "--json", "{tmp}/r.json"),
    ],
    "benchmarks/induction_measure_cost.py": [
        *("--repeats", "1", "--layers", "1", "--json", "{tmp}/r.json"),
    ],
    "benchmarks/stages.py": [
        *("--run", "{run}", "--max-step", "3", "--draws", "2", "--burn-in", "1"),
        *("--rows", "4", "--batches", "2", "--out", "{tmp}/r.json"),
    ],
    "benchmarks/startup.py": ["--rounds", "1", "--out", "{tmp}/r.json"],
}

#: Scripts not run here, each with why (their imports are still checked in the fast tier).
NOT_RUN: dict[str, str] = {
    "experiments/deeper_exams.py": "trains deeper models to the whole budget: no smaller size",
    "experiments/seed_robustness.py": "runs `reproduce` per seed at the study's budget",
    "experiments/stages_seeds.py": "reads a multi-seed study with its stages (hours to make)",
    "benchmarks/depth_study.py": "times `reproduce` at every depth (minutes at any size)",
    "benchmarks/time_to_induction.py": "trains until induction forms (minutes)",
    "benchmarks/token_store.py": "tokenizes all of stdlib into a fresh cache (minutes)",
    "benchmarks/roofline.py": "times matmuls at every shape of every hot path (minutes)",
    "benchmarks/analysis_cost.py": "a GPT-2-small-shaped model: no smaller size",
    "benchmarks/circuit_cost.py": "1- to 8-layer studies and a GPT-2-small-shaped model",
    "benchmarks/full_vocab_circuits.py": "a GPT-2-small-shaped model: no smaller size",
    "benchmarks/gpt2_discovery_cost.py": "a GPT-2-small-shaped model: no smaller size",
    "benchmarks/probe_neuron_cost.py": "a GPT-2-small-shaped model: no smaller size",
    "benchmarks/sae_cost.py": "a GPT-2-small-shaped model beside the cpu preset's",
}
#: Run by benchmarks/gpu_check.sh --dry-run (below), which is how they are run on a GPU.
IN_GPU_CHECK = {
    "benchmarks/train_throughput.py",
    "experiments/natural_text.py",
    "benchmarks/null_induction.py",
}
#: Shared helpers, not scripts.
HELPERS = {"benchmarks/_common.py", "benchmarks/_flops.py"}


def test_every_script_is_run_or_says_why_not():
    scripts = {
        str(p.relative_to(ROOT))
        for folder in ("benchmarks", "experiments")
        for p in (ROOT / folder).glob("*.py")
    }
    named = set(RUN) | set(NOT_RUN) | IN_GPU_CHECK
    assert scripts - HELPERS == named, sorted((scripts - HELPERS) ^ named)
    assert len(named) == len(RUN) + len(NOT_RUN) + len(IN_GPU_CHECK)  # each named once


def test_the_gpu_check_runs_dry(tmp_path):
    """benchmarks/gpu_check.sh --dry-run: its steps, shrunk to seconds on the CPU (the throughput
    in both precisions, the natural-text pair, the time to induction over the null)."""
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu_check.sh"), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "out"
    for written in ("throughput_fp32.json", "throughput_bf16.json", "natural_text.json"):
        assert json.loads((out / written).read_text())["benchmark"], written
    assert json.loads((out / "runs/null_induction.json").read_text())["rows"]


@pytest.mark.parametrize("script", sorted(RUN))
def test_a_script_runs_a_few_steps(script, tmp_path, request):
    args = [a.replace("{tmp}", str(tmp_path)) for a in RUN[script]]
    if any("{run}" in a for a in args):
        run = request.getfixturevalue("trained_2l").path
        args = [a.replace("{run}", str(run)) for a in args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "r.json").read_text())["benchmark"]  # _common.write_result
