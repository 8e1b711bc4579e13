"""Deeper curriculum models trained to the whole budget: do their period exams keep improving?

    python experiments/deeper_exams.py [--runs 3:0,8:0,2:0,3:1] [--out runs/deeper] [--every 50]

A study (``reproduce --preset cpu``) stops each 2+-layer model once its layer-1+ induction score
has stayed past 0.4 for 200 steps (step 550 for seed 0), and its 3- and 8-layer models miss the
exam rule at periods 2-3 there. Here each ``LAYERS:SEED`` model is trained with the preset's whole
budget (``interp-toolkit train --layers L --preset cpu --all-steps --seed S``, 1,500 steps; a run
folder already trained to its budget in ``--out`` is reused), then sits the period exams exactly
as the study sets them (``interp-toolkit exam RUN@STEP --periods``: periods 2-8, letters and
random tokens, 200 prompts each, prompt seed 0, with the untrained twin) at kept snapshots: the
step the study would have stopped at, every ``--every`` steps after it, and the last step (plus
the step the induction score first passed the floor, for context).

Per run and step: exams passed of 14, each exam's pass rate and Wilson 95% interval; per run,
the first step passing all 14 and the first from which every later examined step does. Commands run as subprocesses of this
Python (``python -m interp_toolkit``), with this process's environment (PYTHONPATH included).
Writes experiments/results/deeper_exams.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result

PRESET = "cpu"


def cli(*argv: str) -> float:
    """Run ``interp-toolkit ARGV`` in a child process; return its wall seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "interp_toolkit", *argv], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"interp-toolkit {' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def metrics(run: Path) -> list[dict[str, Any]]:
    with open(run / "metrics.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def trained_to(run: Path) -> int:
    rows = metrics(run) if (run / "metrics.jsonl").exists() else []
    return max((int(r["step"]) for r in rows), default=0)


def train(run: Path, layers: int, seed: int, budget: int) -> dict[str, Any]:
    """Train (or reuse) the run to the whole budget; the wall seconds of this call's training."""
    if (run / "model.safetensors").exists() and trained_to(run) >= budget:
        return {"reused": True, "train_wall_s": None}
    argv = ["train", "--layers", str(layers), "--preset", PRESET, "--all-steps"]
    argv += ["--seed", str(seed), "--out", str(run), "--quiet"]
    if run.exists() and (run / "checkpoints").exists():
        argv.append("--resume")
    return {"reused": False, "train_wall_s": round(cli(*argv), 1)}


def study_steps(rows: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    """The first step the induction score passed the floor, and the step a study would have
    stopped at (the training's own stop rule replayed on the logged scorings)."""
    from interp_toolkit.heads.induction import (
        INDUCTION_SCORE,
        first_induction_step,
        logged_induction_key,
    )
    from interp_toolkit.heads.registry import SCORE
    from interp_toolkit.training.presets import get_preset
    from interp_toolkit.training.steplog import InductionStop

    floor = SCORE[INDUCTION_SCORE].floor
    stop = InductionStop(floor, get_preset(PRESET, 2).after_induction)
    for row in rows:
        key = logged_induction_key(row)
        if key is None:
            continue
        stop.track(int(row["step"]), row[key])
        if stop.due(int(row["step"])):
            return first_induction_step(rows), int(row["step"])
    return first_induction_step(rows), None


def snapshot_steps(run: Path) -> set[int]:
    return {int(p.stem.split("_")[1]) for p in (run / "snapshots").glob("step_*.safetensors")}


def exam(run: Path, step: int, cache: Path) -> dict[str, Any]:
    """The period exams of RUN@STEP as ``exam --periods`` gives them (cached as JSON)."""
    out = cache / f"step_{step}.json"
    wall = None
    if not out.exists():
        cache.mkdir(parents=True, exist_ok=True)
        wall = round(cli("exam", f"{run}@{step}", "--periods", "--json", str(out)), 1)
    data = json.loads(out.read_text())
    data["exam_wall_s"] = wall
    return data


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def shown(e: dict[str, Any]) -> str:
    """'85.0% [79.4%, 89.3%] no': the rate, its Wilson 95% interval, and the pass rule."""
    lo, hi = e["wilson95"]
    return f"{pct(e['pass_rate'])} [{pct(lo)}, {pct(hi)}] {'yes' if e['passes_rule'] else 'no'}"


def summarise(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """When the exams stop improving, read three ways off the examined steps: the first step
    passing every exam, the first step from which every later examined step passes every exam
    (None when the last one does not), and the most exams any step passes."""
    n = [s["n_passing"] for s in steps]
    every = [s["n_passing"] == s["n_exams"] for s in steps]
    held = [all(every[i:]) for i in range(len(steps))]
    return {
        "first_all_pass_step": next(
            (s["step"] for s, e in zip(steps, every, strict=True) if e), None
        ),
        "all_pass_from_step": next(
            (s["step"] for s, h in zip(steps, held, strict=True) if h), None
        ),
        "best_n_passing": max(n, default=None),
    }


def others_phrase(others: list[dict[str, Any]]) -> str:
    """The missed exams past period 3: each with its rate, or a count and the range of rates."""
    if not others:
        return "none"
    if len(others) <= 2:
        return "; ".join(f"{e['kind']} {e['period']}: {shown(e)}" for e in others)
    rates = [e["pass_rate"] for e in others]
    return f"{len(others)} exams at periods 4-8 ({pct(min(rates))}-{pct(max(rates))})"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", default="3:0,8:0,2:0,3:1", help="LAYERS:SEED,... to train and exam")
    ap.add_argument("--out", default="runs/deeper", help="folder of the run folders (reused)")
    ap.add_argument("--every", type=int, default=50, help="steps between examined snapshots")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from interp_toolkit.training.presets import get_preset

    root = Path(args.out)
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    runs, rows = [], []
    for spec in args.runs.split(","):
        layers, seed = (int(x) for x in spec.split(":"))
        budget = get_preset(PRESET, layers).train.steps
        name = f"{PRESET}-{layers}l-s{seed}"
        run = root / name
        trained = train(run, layers, seed, budget)
        logged = metrics(run)
        first, stop = study_steps(logged)
        kept = snapshot_steps(run)
        start = stop if stop is not None else budget
        wanted = {s for s in range(start, budget + 1, args.every)} | {budget}
        if first is not None:
            wanted.add(first)
        steps = sorted(s for s in wanted if s in kept)
        record: dict[str, Any] = {
            "run": name,
            "layers": layers,
            "seed": seed,
            "budget": budget,
            "first_induction_step": first,
            "study_stop_step": stop,
            **trained,
            "train_elapsed_s_logged": logged[-1].get("elapsed_s"),
            "steps": [],
        }
        for step in steps:
            data = exam(run, step, root / "exams" / name)
            periods = data["periods"]
            missed = [e for e in periods if not e["passes_rule"]]
            record["steps"].append(
                {
                    "step": step,
                    "n_passing": data["n_passing"],
                    "n_exams": data["n_exams"],
                    "exam_wall_s": data["exam_wall_s"],
                    "exams": [
                        {
                            k: e[k]
                            for k in (
                                "period",
                                "kind",
                                "n_prompts",
                                "passes",
                                "pass_rate",
                                "wilson95",
                                "median_rank",
                                "passes_rule",
                            )
                        }
                        for e in periods
                    ],
                }
            )
            row: dict[str, Any] = {
                "run": name,
                "step": step,
                "passed": f"{data['n_passing']}/{data['n_exams']}",
            }
            for e in periods:  # periods 2-3, where the study's deeper models miss
                if e["period"] <= 3:
                    row[f"{e['kind'][0].upper()}{e['period']}"] = shown(e)
            others = [e for e in missed if e["period"] > 3]
            row["other misses"] = others_phrase(others)
            rows.append(row)
            print_table([row], list(row))
        record.update(summarise(record["steps"]))
        runs.append(record)
    print()
    print_table(rows, list(rows[0]))
    write_result(
        "deeper_exams",
        {
            "preset": PRESET,
            "exam": "interp-toolkit exam RUN@STEP --periods (defaults: periods 2-8, letters and "
            "random, 200 prompts, seed 0, untrained twin), as the study sits them",
            "pass_rule": "Wilson 95% lower bound >= 0.90",
            "every": args.every,
            "runs": runs,
            "table": rows,
            "wall_s": round(time.perf_counter() - t_start, 1),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
