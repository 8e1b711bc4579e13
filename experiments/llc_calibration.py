"""Calibrating the LLC's SGLD settings on a run: a grid of (step size, γ, nβ) at chosen kept
checkpoints, each read for whether its chains settle and stay local (docs/stages.md, "Settings").

    taskset -c 1 python experiments/llc_calibration.py --run RUN --steps 1,10,20,28,105,1000
        [--grid '[[1e-4,1000,50],[1e-4,10000,50]]'] [--burn-in 50] [--draws 100] [--out F]

For each checkpoint and setting: the LLC and its interval (2 chains), L(w*) and each chain's mean
draw loss (local: within ~0.5 nats of L(w*)), each chain's split-half drift in LLC units
(settled: small against the LLC), R-hat, and seconds. The batches are the ones ``stages`` reads
(4 batches x up to 16 rows of the run's first training steps). Writes
experiments/results/llc_calibration.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result

from interp_toolkit.development.data import llc_batches, next_token_loss
from interp_toolkit.development.llc import SGLDSettings, estimate_llc
from interp_toolkit.runs.folder import RunPaths, apply_weights, load_run, read_weights

#: The grid tried on the text preset's 2-layer run (seed 0), 2026-12-05.
GRID = [
    [1e-4, 1000, 50], [1e-4, 3000, 50], [1e-4, 10000, 50], [3e-5, 10000, 50],
    [1e-4, 1000, 20], [1e-4, 300, 20], [3e-4, 1000, 20], [3e-5, 1000, 100], [1e-3, 10000, 20],
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--steps", required=True, help="kept steps, comma-separated")
    ap.add_argument("--grid", default=json.dumps(GRID), help="JSON [[eps, gamma, nbeta], ...]")
    ap.add_argument("--burn-in", type=int, default=50)
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    steps = [int(s) for s in args.steps.split(",")]
    paths = RunPaths(Path(args.run))
    run = load_run(paths.root, device="cpu", weights=paths.snapshot(steps[0]))
    data = llc_batches(run, n_batches=args.batches, rows=args.rows)
    rows = []
    for step in steps:
        apply_weights(run.model, read_weights(paths.snapshot(step)), paths.snapshot(step))
        for eps, gamma, nbeta in json.loads(args.grid):
            s = SGLDSettings(step_size=eps, gamma=gamma, nbeta=nbeta, chains=2,
                             burn_in=args.burn_in, draws=args.draws)  # fmt: skip
            e = estimate_llc(run.model, data.batches, next_token_loss, s)
            draw_means = [float(t[args.burn_in :].mean()) for t in e.traces]
            row = {
                "step": step, "eps": eps, "gamma": gamma, "nbeta": nbeta,
                "llc": e.to_dict()["llc"], "interval": [e.low, e.high],
                "init_loss": e.init_loss, "draw_loss_above_init": [
                    m - e.init_loss for m in draw_means],
                "drift": e.drift, "r_hat": e.r_hat, "finite": e.finite,
                "seconds": round(e.seconds, 2),
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    print_table(
        [{**r, "above init": max(r["draw_loss_above_init"], default=None),
          "max |drift|": max(map(abs, r["drift"]), default=None)} for r in rows],
        ["step", "eps", "gamma", "nbeta", "llc", "above init", "max |drift|", "r_hat"],
    )  # fmt: skip
    write_result(
        "llc_calibration",
        {"run": args.run, "batches": data.to_dict(), "burn_in": args.burn_in,
         "draws": args.draws, "threads": args.threads, "rows": rows},
        args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
