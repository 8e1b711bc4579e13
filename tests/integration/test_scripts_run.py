"""The benchmark and experiment scripts run, a few steps at the smallest sizes they take, each in
its own process as a user runs it, and write their JSON (tests/unit/test_scripts.py checks every
script's package imports in the fast tier). Every script is run here, run here on request
(``INTERP_TOOLKIT_ALL_SCRIPTS=1``: a few minutes each on two shared cores), or named in
:data:`NOT_RUN` with why; a new script is one of the three.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_LLC = ("--burn-in", "1", "--draws", "2", "--batches", "2", "--rows", "4")

#: Script -> its arguments at the smallest size (``{tmp}``: a fresh folder; ``{run}``: the slow
#: tier's trained 2-layer run). Each writes ``{tmp}/r.json``. Seconds: on 2 cores shared with
#: other sessions (load 7-9), one thread.
RUN: dict[str, list[str]] = {
    # planted heads only (57 s)
    "experiments/cutoff_sensitivity.py": ["--train", "--out", "{tmp}/r.json"],
    "experiments/exam_text_measures.py": ["--steps", "4", "--json", "{tmp}/r.json"],  # 43 s
    "experiments/llc_calibration.py": [  # 32 s
        *("--run", "{run}", "--steps", "1,2", "--grid", "[[1e-4, 1000, 50]]", *_LLC),
        *("--out", "{tmp}/r.json"),
    ],
    "experiments/neurons_vs_features.py": [  # 66 s
        *("--layers", "1", "--steps", "4", "--sae-tokens", "4096", "--out", "{tmp}/r.json"),
    ],
    "experiments/null_calibration.py": [  # 44 s
        *("--only", "planted", "--n-planted", "2", "--out", "{tmp}/r.json"),
    ],
    "experiments/sae_claims.py": ["--planted", "--tokens", "4096", "--out", "{tmp}/r.json"],
    "experiments/text_repeats.py": ["--tokens", "20000", "--windows", "5", "--out", "{tmp}/r.json"],
    "experiments/text_seeds.py": [  # 68 s
        *("--seeds", "0", "--max-steps", "4", "--window", "2"),
        *("--out", "{tmp}/runs", "--json", "{tmp}/r.json"),
    ],
    "experiments/unk_share.py": [  # 38 s
        *("--vocab-sizes", "256", "--seeds", "0", "--max-steps", "4", "--window", "2"),
        *("--out", "{tmp}/runs", "--json", "{tmp}/r.json"),
    ],
    "experiments/kernel_isa.py": [  # two cpu-preset runs of 3 steps, each in its own process
        *("--only", "cpu fp32, 1 thread", "--steps", "3", "--json", "{tmp}/r.json"),
    ],
    "experiments/seed_budget.py": [  # a 1-layer byte model, 20 steps, measured with 4 prompts
        *("run", "--seeds", "0", "--layers", "1", "--steps", "20", "--kept", "20"),
        *("--prompts", "4", "--out", "{tmp}/runs", "--json", "{tmp}/r.json"),
    ],
    "benchmarks/induction_measure_cost.py": [
        *("--repeats", "1", "--layers", "1", "--json", "{tmp}/r.json"),
    ],
    "benchmarks/stages.py": [  # 39 s
        *("--run", "{run}", "--max-step", "3", *_LLC, "--out", "{tmp}/r.json"),
    ],
}

#: Run on request only (``INTERP_TOOLKIT_ALL_SCRIPTS=1``), at their smallest size; the seconds
#: they took under the same load.
ON_REQUEST: dict[str, list[str]] = {
    "experiments/bf16_equivalence.py": [  # 100 s: both precisions, nulls, every exam period
        *("--layers", "1", "--max-steps", "4", "--json", "{tmp}/r.json"),
    ],
    "experiments/natural_text.py": [  # 129 s: two byte-preset runs and `heads` on each
        *("--steps", "4", "--out", "{tmp}/runs", "--json", "{tmp}/r.json"),
    ],
    "experiments/sae_roles.py": [  # 184 s: SAEs on the trained and the untrained model
        *("--steps", "4", "--tokens", "4096", "--out", "{tmp}/r.json"),
    ],
    "benchmarks/null_induction.py": [  # 85 s: `heads` with its untrained nulls
        *("--out", "{tmp}", "--preset", "cpu", "--layers", "1", "--steps", "4"),
        *("--score-every", "2", "--device", "cpu", "--json", "{tmp}/r.json"),
    ],
    "benchmarks/startup.py": ["--rounds", "1", "--out", "{tmp}/r.json"],  # 63-88 s: 20 processes
    "benchmarks/train_throughput.py": [  # 136 s: five trainers side by side
        *("--steps", "4", "--warmup", "1", "--repeats", "1", "--threads", "1"),
        *("--json", "{tmp}/r.json"),
    ],
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
    "benchmarks/hf_heads_cost.py": "a Qwen2-0.5B shape (8 min a dtype): no smaller",
    "benchmarks/sae_cost.py": "a GPT-2-small-shaped model beside the cpu preset's",
}
#: Shared helpers, not scripts.
HELPERS = {"benchmarks/_common.py", "benchmarks/_flops.py", "experiments/_svg.py"}
ALL = os.environ.get("INTERP_TOOLKIT_ALL_SCRIPTS") == "1"


def test_every_script_is_run_or_says_why_not():
    scripts = {
        str(p.relative_to(ROOT))
        for folder in ("benchmarks", "experiments")
        for p in (ROOT / folder).glob("*.py")
    }
    named = [*RUN, *ON_REQUEST, *NOT_RUN]
    assert scripts - HELPERS == set(named), sorted((scripts - HELPERS) ^ set(named))
    assert len(named) == len(set(named))  # each named once


def test_the_gpu_check_names_scripts_that_exist():
    """benchmarks/gpu_check.sh (run by hand on a GPU, or ``--dry-run``) calls scripts that are
    there (its --dry-run takes ~15 minutes on two shared cores: on request)."""
    text = (ROOT / "benchmarks/gpu_check.sh").read_text()
    called = set(re.findall(r"\b((?:benchmarks|experiments)/\w+\.py)\b", text))
    assert {"benchmarks/train_throughput.py", "experiments/natural_text.py"} <= called
    assert all((ROOT / c).is_file() for c in called), called


def _run(argv: list[str], cwd: Path) -> None:
    """``argv`` as a user runs it (one thread, offline); it must exit 0."""
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.skipif(not ALL, reason="on request: INTERP_TOOLKIT_ALL_SCRIPTS=1 (~15 minutes)")
def test_the_gpu_check_runs_dry(tmp_path):
    out = tmp_path / "out"
    _run(["bash", str(ROOT / "benchmarks/gpu_check.sh"), "--dry-run", str(out)], ROOT)
    for written in ("throughput_fp32.json", "throughput_bf16.json", "natural_text.json"):
        assert json.loads((out / written).read_text())["benchmark"], written
    assert json.loads((out / "runs/null_induction.json").read_text())["rows"]


@pytest.mark.parametrize(
    "script",
    [
        *sorted(RUN),
        *(
            pytest.param(s, marks=pytest.mark.skipif(not ALL, reason="INTERP_TOOLKIT_ALL_SCRIPTS"))
            for s in sorted(ON_REQUEST)
        ),
    ],
)
def test_a_script_runs_a_few_steps(script, tmp_path, request):
    args = [a.replace("{tmp}", str(tmp_path)) for a in {**RUN, **ON_REQUEST}[script]]
    if any("{run}" in a for a in args):
        run = request.getfixturevalue("trained_2l").path
        args = [a.replace("{run}", str(run)) for a in args]
    _run([sys.executable, str(ROOT / script), *args], tmp_path)
    assert json.loads((tmp_path / "r.json").read_text())["benchmark"]  # _common.write_result
