"""The post's budget (issue 48, item 3): the natural-text pair trained far past induction's
formation, measured against tokens. The post trained 40-50k steps of 32 x 128 tokens (~200M
tokens); the study stops its text models 3,000 steps after the floor (~8M tokens). Here the text
preset's 1- and 2-layer models train 50,000 steps (51M tokens, 1,024 per step) with no early stop,
keeping their weights at every measured step, and each kept step is measured as the study
measures a model: the post's exams (rank and probability of the target), top-1 over every period
exam and its order effect (the first copy shuffled), the repeated-passage drop and its order
effect on 64 held-out passages, and the in-context score logged in training.

    python experiments/seed_budget.py train --seeds 0,1 --layers 1,2 --out DIR [--steps 50000]
    python experiments/seed_budget.py measure --out DIR [--json experiments/results/seed_budget.json]
    python experiments/seed_budget.py figure [--json ...] [--svg docs/figures/seed_budget.svg]
    python experiments/seed_budget.py run ...   (train, then measure: both commands' options)

``train`` runs each model in its own process (one thread each), two at a time; a stopped run
resumes where it stopped. ``measure`` skips steps already in the JSON. ``--kept`` and
``--prompts`` shrink it (the slow tier runs it a few steps).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "seed_budget.json"
FIGURE = HERE.parent / "docs" / "figures" / "seed_budget.svg"
STEPS = 50_000
#: The steps whose weights are kept and measured.
KEPT = (500, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 10_000, 12_500, 15_000, 17_500,
        20_000, 25_000, 30_000, 35_000, 40_000, 45_000, 50_000)  # fmt: skip


def run_dir(out: Path, seed: int, layers: int) -> Path:
    return out / f"text-{layers}l-s{seed}"


def train_one(out: Path, seed: int, layers: int, steps: int, kept: tuple[int, ...] = KEPT) -> None:
    import torch

    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    torch.set_num_threads(1)
    p = with_overrides(
        get_preset("text", layers),
        steps=steps,
        seed=seed,
        snapshot_steps=tuple(k for k in kept if k <= steps) or (steps,),
    )
    path = run_dir(out, seed, layers)
    resume = (path / "config.json").is_file()
    train_model(str(path), p.model, p.data, p.train, preset=p.name, progress=False, resume=resume)


def train(args: argparse.Namespace) -> None:
    jobs = [(s, n) for s in args.seeds for n in args.layers]
    running: list[subprocess.Popen] = []
    for seed, layers in jobs:
        while len(running) >= args.jobs:
            running = [p for p in running if p.poll() is None]
            time.sleep(5)
        cmd = [
            sys.executable,
            __file__,
            "_train",
            str(args.out),
            str(seed),
            str(layers),
            str(args.steps),
            ",".join(map(str, args.kept)),
        ]
        print("start", " ".join(cmd[2:]), flush=True)
        running.append(subprocess.Popen(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}))
    for p in running:
        if p.wait():
            raise SystemExit(f"a training failed: {' '.join(map(str, p.args[2:]))}")


def measure_step(path: Path, step: int, prompts: int = 200) -> dict:
    import torch

    from interp_toolkit.exams.periods import sit_exams
    from interp_toolkit.exams.prompts import exam_plan
    from interp_toolkit.exams.single import BYTE_EXAMS, run_exam
    from interp_toolkit.exams.text_measures import passage_order_effect, repeated_passage
    from interp_toolkit.exams.verdict import pooled
    from interp_toolkit.measures.run import check_windows
    from interp_toolkit.runs.folder import RunPaths, load_run, read_metrics

    torch.set_num_threads(1)
    run = load_run(path, weights=RunPaths(path).snapshot(step))
    model, codec = run.model, run.codec
    with torch.no_grad():
        n_ctx, d_vocab = int(model.cfg.n_ctx), int(codec.d_vocab)
        controls = exam_plan(codec, n_ctx, n_prompts=prompts, order_control=True)
        exams = sit_exams(model, exam_plan(codec, n_ctx, n_prompts=prompts), d_vocab, controls)
        windows = check_windows(run)
        drop = repeated_passage(model, windows)
        order = passage_order_effect(model, windows)
    p = pooled(exams)
    by_period: dict[str, dict[str, float]] = {}
    for e in exams:
        by_period.setdefault(e.kind, {})[str(e.period)] = e.pass_rate
    row = next((r for r in read_metrics(path) if r.get("step") == step and "icl_score" in r), {})
    return {
        "step": step,
        "tokens": step * 4 * 256,
        "post_exams": {
            e.name: {"rank": r.rank + 1, "prob": r.prob}
            for e in BYTE_EXAMS
            for r in [run_exam(model, codec, e.prompt, e.target, name=e.name)]
        },
        "top1": p.rate,
        "order_effect": None if p.order_effect is None else vars(p.order_effect),
        "top1_by_period": by_period,
        "mean_prob": statistics.fmean(e.mean_prob or 0.0 for e in exams),
        "passage_drop": drop.drop.estimate,
        "passage_order": vars(order),
        "icl_score": row.get("icl_score"),
        "icl_ci": row.get("icl_ci"),
    }


def measure(args: argparse.Namespace) -> None:
    from interp_toolkit.runs.folder import RunPaths

    done = json.loads(args.json.read_text()) if args.json.is_file() else {"runs": {}}
    done["benchmark"] = "seed_budget"
    from interp_toolkit.runtime.machine import machine_record

    done |= {"prompts_per_exam": args.prompts, "machine": machine_record().words()}
    done["date"] = time.strftime("%Y-%m-%d")
    for path in sorted(p for p in args.out.iterdir() if (p / "config.json").is_file()):
        have = {r["step"] for r in done["runs"].get(path.name, [])}
        for step in RunPaths(path).snapshot_steps():
            if step not in have:
                t0 = time.perf_counter()
                done["runs"].setdefault(path.name, []).append(
                    measure_step(path, step, args.prompts)
                )
                done["runs"][path.name].sort(key=lambda r: r["step"])
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(done, indent=1) + "\n")
                print(f"{path.name}@{step}: {time.perf_counter() - t0:.0f} s", flush=True)


def figure(args: argparse.Namespace) -> None:
    from _svg import line_chart

    data = json.loads(args.json.read_text())["runs"]
    series = {}
    for name, rows in sorted(data.items()):
        series[f"{name}: top-1, every period exam"] = [(r["tokens"] / 1e6, r["top1"]) for r in rows]
        series[f"{name}: p(F), ABCXDEF"] = [
            (r["tokens"] / 1e6, r["post_exams"]["ABCXDEF"]["prob"]) for r in rows
        ]
        if "-2l-" in name:  # the other exam for the 2-layer model (the 1-layer's stays near 0)
            series[f"{name}: p(D), ABCD"] = [
                (r["tokens"] / 1e6, r["post_exams"]["ABCD"]["prob"]) for r in rows
            ]
    marks = [
        ("the post's 2-layer p(F) (82.92%)", 0.8292),
        ("the post's 2-layer p(D) (41.64%)", 0.4164),
    ]
    args.svg.parent.mkdir(parents=True, exist_ok=True)
    args.svg.write_text(
        line_chart(
            series,
            marks,
            x_label="tokens trained (M)",
            y_label="share",
            title="The text pair against tokens",
        )
    )
    print(f"wrote {args.svg}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_train":
        out, seed, layers, steps, *kept = sys.argv[2:7]
        kept_steps = tuple(map(int, kept[0].split(","))) if kept else KEPT
        train_one(Path(out), int(seed), int(layers), int(steps), kept_steps)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    for name in ("train", "measure", "run"):
        p = sub.add_parser(name)
        p.add_argument("--out", type=Path, required=True)
        if name != "measure":
            p.add_argument("--seeds", type=ints, default=[0, 1])
            p.add_argument("--layers", type=ints, default=[2, 1])
            p.add_argument("--steps", type=int, default=STEPS)
            p.add_argument("--kept", type=ints, default=list(KEPT))
            p.add_argument("--jobs", type=int, default=2)
        if name != "train":
            p.add_argument("--json", type=Path, default=RESULT)
            p.add_argument("--prompts", type=int, default=200, help="per period exam")
    f = sub.add_parser("figure")
    f.add_argument("--json", type=Path, default=RESULT)
    f.add_argument("--svg", type=Path, default=FIGURE)
    args = ap.parse_args()
    if args.cmd == "run":
        train(args)
        measure(args)
        return
    {"train": train, "measure": measure, "figure": figure}[args.cmd](args)


if __name__ == "__main__":
    main()
