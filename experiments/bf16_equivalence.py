"""Does bf16 autocast change the science? The study's cpu-preset models (1 and 2 layers, seed 0)
trained in fp32 and in bf16 side by side, then compared on what the study reports.

    python experiments/bf16_equivalence.py [--layers 2 1] [--seed 0] [--threads 1]

Each model is trained as ``reproduce`` trains it (``study.depth_preset``: the 2-layer model
until its induction score has stayed past 0.4 for 200 steps, the 1-layer control as long as the
longer of the two 2-layer runs), fp32 and bf16 at once in two processes of ``--threads`` each
(the study's own layout: 2 workers x 1 thread). Each run is then analysed in float32 as the
study does: head roles (``discover_heads``, nulls included), the built-in exams and the
two-repeat exams at every period. Compared, with the tolerances stated in ``TOLERANCE``:

- the loss curve: max and mean |loss_bf16 - loss_fp32| over the logged steps both runs reached,
  and the final held-out loss;
- the first scoring step with a layer>=1 induction score > 0.4: equal within one scoring
  interval (``score_every``);
- every head's role: identical;
- the exams: identical pass/fail, and the period exams' pass rates within 0.1.

Prints a table and writes experiments/results/bf16_equivalence.json (with the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result  # noqa: E402

TOLERANCE = {
    "loss_max_abs": 0.1,  # nats, at any logged step both runs reached
    "loss_mean_abs": 0.03,
    "val_loss_final_abs": 0.03,
    "induction_step": "within one scoring interval",
    "roles": "identical",
    "exams": "identical pass/fail",
    "period_pass_rate_abs": 0.1,
}


def train_and_analyse(
    out: Path, layers: int, precision: str, seed: int, steps: int | None, threads: int
) -> dict[str, Any]:
    import torch

    from interp_toolkit.exams.periods import exam_by_period
    from interp_toolkit.exams.single import BUILTIN_EXAMS, run_exam
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.options import DiscoveryOptions
    from interp_toolkit.study.layers import run_name
    from interp_toolkit.study.reproduce import StudyConfig, StudyRun, depth_preset
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import with_overrides

    torch.set_num_threads(threads)
    cfg = StudyConfig(preset="cpu", seed=seed, threads=threads)
    preset = depth_preset(cfg, StudyRun(run_name("cpu", layers), layers), steps)
    preset = with_overrides(preset, precision=precision)
    t0 = time.perf_counter()
    res = train_model(
        out, preset.model, preset.data, preset.train, preset="cpu", progress=False, device="cpu"
    )
    train_s = time.perf_counter() - t0
    model, codec = res.run.model, res.run.codec
    report = discover_heads(model, codec, DiscoveryOptions(seed=seed), model_cfg=res.run.model_cfg)
    exams = {}
    for exam in BUILTIN_EXAMS:
        r = run_exam(model, codec, exam.prompt, exam.target, name=exam.name)
        exams[exam.name] = {"rank": r.rank, "prob": round(r.prob, 4), "passed": r.passed}
    periods = {p.period: round(p.pass_rate, 4) for p in exam_by_period(model, codec, seed=seed)}
    metrics = res.metrics
    return {
        "layers": layers,
        "precision": precision,
        "runtime_precision": res.run.settings.get("runtime", {}).get("precision"),
        "steps": res.steps_done,
        "score_every": preset.train.score_every,
        "train_seconds": round(train_s, 1),
        "tokens_per_s": round(metrics[-1]["tokens"] / max(res.elapsed_s, 1e-9), 1),
        "loss": {int(r["step"]): r["loss"] for r in metrics},
        "val_loss": {int(r["step"]): r["val_loss"] for r in metrics if "val_loss" in r},
        "first_induction_step": res.first_induction_step,
        "roles": [list(row) for row in report.roles],
        "exams": exams,
        "period_pass_rate": periods,
    }


def child(argv: list[str], tmp: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.Popen(
        [sys.executable, __file__, "--child", tmp, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def side_by_side(layers: int, seed: int, steps: int | None, threads: int) -> dict[str, Any]:
    """fp32 and bf16 trained and analysed at once, in two processes."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = {
            p: child(
                [
                    "--layers",
                    str(layers),
                    "--precision",
                    p,
                    "--seed",
                    str(seed),
                    "--threads",
                    str(threads),
                ]
                + (["--steps", str(steps)] if steps else []),
                f"{tmp}/{p}",
            )
            for p in ("fp32", "bf16")
        }
        out = {}
        for p, proc in procs.items():
            stdout, stderr = proc.communicate()
            if proc.returncode != 0:
                raise SystemExit(f"{layers}-layer {p} failed:\n{stderr[-3000:]}")
            out[p] = json.loads(stdout.strip().splitlines()[-1])
    return out


def compare(runs: dict[str, Any]) -> dict[str, Any]:
    a, b = runs["fp32"], runs["bf16"]
    common = sorted(set(a["loss"]) & set(b["loss"]), key=int)
    diffs = [abs(a["loss"][s] - b["loss"][s]) for s in common]
    val_common = sorted(set(a["val_loss"]) & set(b["val_loss"]), key=int)
    last = val_common[-1] if val_common else None
    ind_a, ind_b = a["first_induction_step"], b["first_induction_step"]
    interval = a["score_every"]
    same_induction = (ind_a is None and ind_b is None) or (
        ind_a is not None and ind_b is not None and abs(ind_a - ind_b) <= interval
    )
    roles_differ = [
        f"{layer}.{head}: {ra} vs {rb}"
        for layer, (row_a, row_b) in enumerate(zip(a["roles"], b["roles"], strict=True))
        for head, (ra, rb) in enumerate(zip(row_a, row_b, strict=True))
        if ra != rb
    ]
    exams_differ = [n for n in a["exams"] if a["exams"][n]["passed"] != b["exams"][n]["passed"]]
    period_diff = max(
        (abs(a["period_pass_rate"][p] - b["period_pass_rate"][p]) for p in a["period_pass_rate"]),
        default=0.0,
    )
    row = {
        "layers": a["layers"],
        "steps fp32/bf16": f"{a['steps']}/{b['steps']}",
        "loss max|d|": round(max(diffs), 4),
        "loss mean|d|": round(sum(diffs) / len(diffs), 4),
        "val final|d|": round(abs(a["val_loss"][last] - b["val_loss"][last]), 4) if last else None,
        "induction fp32/bf16": f"{ind_a}/{ind_b}",
        "roles differ": len(roles_differ),
        "exams fp32": " ".join(f"{n}:{e['rank']}" for n, e in a["exams"].items()),
        "exams bf16": " ".join(f"{n}:{e['rank']}" for n, e in b["exams"].items()),
        "period max|d|": round(period_diff, 3),
        "tok/s fp32/bf16": f"{a['tokens_per_s']:.0f}/{b['tokens_per_s']:.0f}",
    }
    verdict = {
        "loss": row["loss max|d|"] <= TOLERANCE["loss_max_abs"]
        and row["loss mean|d|"] <= TOLERANCE["loss_mean_abs"]
        and (row["val final|d|"] or 0.0) <= TOLERANCE["val_loss_final_abs"],
        "induction_step": same_induction,
        "roles": not roles_differ,
        "exams": not exams_differ and period_diff <= TOLERANCE["period_pass_rate_abs"],
    }
    return {
        "row": row,
        "verdict": verdict,
        "roles_differ": roles_differ,
        "exams_differ": exams_differ,
        "logged_steps_compared": len(common),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None, help="(child) steps for a 1-layer control")
    ap.add_argument("--precision", default=None, help="(child)")
    ap.add_argument("--child", default=None, help="(child) run folder")
    ap.add_argument("--json", default=None)
    ap.add_argument("--max-steps", type=int, default=None, help="every run's steps at most")
    args = ap.parse_args()
    if args.child:
        out = train_and_analyse(
            Path(args.child), args.layers[0], args.precision, args.seed, args.steps, args.threads
        )
        print(json.dumps(out))
        return
    loads = [os.getloadavg()[0]]
    results: dict[int, Any] = {}
    control_steps = None
    for layers in sorted(args.layers, reverse=True):  # the 2-layer runs fix the control's length
        print(f"training {layers}-layer fp32 and bf16 side by side ...", flush=True)
        steps = args.max_steps or (control_steps if layers == 1 else None)
        runs = side_by_side(layers, args.seed, steps, args.threads)
        loads.append(os.getloadavg()[0])
        if layers > 1:
            control_steps = max(r["steps"] for r in runs.values())
        results[layers] = {"runs": runs, **compare(runs)}
        print(
            json.dumps(results[layers]["row"]), json.dumps(results[layers]["verdict"]), flush=True
        )
    rows = [results[n]["row"] for n in sorted(results)]
    print_table(rows, list(rows[0]))
    same = all(all(r["verdict"].values()) for r in results.values())
    print(f"bf16 {'does not change' if same else 'CHANGES'} the science (tolerances: {TOLERANCE})")
    write_result(
        "bf16_equivalence",
        {
            "seed": args.seed,
            "threads_per_run": args.threads,
            "tolerance": TOLERANCE,
            "same_science": same,
            "load_avg_1min": {"min": min(loads), "max": max(loads)},
            "results": {str(k): v for k, v in results.items()},
        },
        args.json,
    )


if __name__ == "__main__":
    main()
