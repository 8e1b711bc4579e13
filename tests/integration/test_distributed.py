"""Data-parallel training under torchrun (2 processes, gloo, one CPU machine) against one process.

The DDP run and the single-process run train the same global batch (128 rows: 64 per process) from
the same seed, so their weights differ only by float rounding (gradients are averaged in another
order), which AdamW's normalised steps carry forward. Tolerance: max |w_ddp - w_single| <= 1e-3,
a third of one AdamW step at the cpu preset's lr 3e-3. Measured when this test was written: 1.5e-4
after 4 steps; when the processes skip the gradient all-reduce (each trains on its own half),
0.024.

The early stop after induction is rank 0's decision (it alone scores heads); the other process
must stop at the same step, or it would wait forever in the next step's gradient all-reduce.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from interp_toolkit.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-3


def _args(corpus: Path) -> list[str]:
    return [
        "--preset", "cpu", "--layers", "2", "--d-model", "32", "--n-ctx", "16",
        "--vocab-size", "64", "--corpus", str(corpus), "--quiet",
    ]  # fmt: skip


def _torchrun(*args: str, timeout: int = 600) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(
        [*cmd, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _train(*args: str) -> None:
    stdout = _torchrun("-m", "interp_toolkit", "train", *args)
    assert stdout.count("trained ") == 1, stdout  # rank 0 alone reports


STOP_SCRIPT = """
import sys
from interp_toolkit.training.presets import get_preset, with_overrides
from interp_toolkit.training import train_model

p = with_overrides(
    get_preset("cpu", 2), d_model=32, d_head=8, n_ctx=16, vocab_size=64, corpus=sys.argv[2],
    steps=40, score_every=4, stop_score=-1.0, stop_after=8,
)
res = train_model(sys.argv[1], p.model, p.data, p.train, progress=False)
# one write of a whole line: the two ranks share the pipe (print writes each piece apart)
sys.stdout.write(f"done {res.steps_done} {res.stopped_early}\\n")
sys.stdout.flush()
"""


def _max_diff(a: Path, b: Path) -> float:
    wa, wb = load_file(str(a)), load_file(str(b))
    assert wa.keys() == wb.keys()
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa)


def test_two_processes_train_the_weights_of_one_and_resume(tmp_path):
    words = "alpha beta gamma delta import return self value for while if else def".split()
    g = torch.Generator().manual_seed(0)
    lines = [" ".join(words[i] for i in torch.randint(0, len(words), (12,), generator=g)) for _ in range(3000)]  # fmt: skip
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines))
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    threads = torch.get_num_threads()
    try:  # one process, in this one: 2 steps, then resumed to 4 (bit-identical to 4 at once)
        main(["train", "--out", str(single), "--steps", "2", *_args(corpus)])
        shutil.copy(single / "model.safetensors", tmp_path / "single_2.safetensors")
        main(["train", "--out", str(single), "--steps", "4", "--resume", *_args(corpus)])
    finally:
        torch.set_num_threads(threads)

    _train("--out", str(ddp), "--steps", "2", *_args(corpus))
    settings = json.loads((ddp / "config.json").read_text())["settings"]
    assert settings["runtime"]["processes"] == 2 and settings["train"]["batch_size"] == 128
    assert _max_diff(ddp / "model.safetensors", tmp_path / "single_2.safetensors") <= TOLERANCE

    _train("--out", str(ddp), "--steps", "4", "--resume", *_args(corpus))
    diff = _max_diff(ddp / "model.safetensors", single / "model.safetensors")
    assert diff <= TOLERANCE, diff
    rows = [json.loads(line) for line in (ddp / "metrics.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (single / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [r["step"] for r in want] == [2, 4]  # rank 0 alone writes
    for r, w in zip(rows, want, strict=True):  # the logged loss is the whole global batch's
        assert abs(r["loss"] - w["loss"]) <= 1e-3 and abs(r["val_loss"] - w["val_loss"]) <= 1e-3

    # stop_score -1: rank 0's first scoring (step 4) starts the streak; both stop at step 12
    script = tmp_path / "stop.py"
    script.write_text(STOP_SCRIPT)
    stdout = _torchrun(str(script), str(tmp_path / "stop"), str(corpus), timeout=300)
    assert sorted(line for line in stdout.splitlines() if line.startswith("done")) == [
        "done 12 True",
        "done 12 True",
    ], stdout
