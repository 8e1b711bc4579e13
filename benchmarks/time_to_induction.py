"""Time to induction: train the cpu preset's 1- and 2-layer models and report the wall-clock
minutes until a head's induction score first exceeds 0.4 (layer >= 1 for the 2-layer model; any
layer for the 1-layer one, which should never get there).

    python benchmarks/time_to_induction.py [--preset cpu] [--steps N] [--threads 2] [--seeds 0]

Scores are measured every ``--score-every`` steps on repeated random tokens whose repeat offset
varies (see docs/analysis.md). The 2-layer run stops once a layer-1 head has stayed above 0.4 for two
checks; the 1-layer run trains for the preset's full step count. Writes
benchmarks/results/time_to_induction.json.
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from _common import print_table, write_result

THRESHOLD = 0.4


def first_crossing(metrics: list[dict], layer_min: int) -> dict | None:
    for row in metrics:
        ind = row.get("induction")
        if ind and any(v > THRESHOLD for layer in ind[layer_min:] for v in layer):
            return row
    return None


def run_one(
    preset_name: str, layers: int, seed: int, steps: int | None, score_every: int, stop: bool
) -> dict:
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    p = with_overrides(
        get_preset(preset_name, layers),
        seed=seed,
        steps=steps,
        score_every=score_every,
        stop_score=THRESHOLD if stop else None,
    )
    with tempfile.TemporaryDirectory() as tmp:
        res = train_model(f"{tmp}/run", p.model, p.data, p.train, preset=preset_name, progress=True)
    hit = first_crossing(res.metrics, 1 if layers > 1 else 0)
    scored = [r for r in res.metrics if "induction" in r]
    best = max(
        max(max(layer) for layer in r["induction"][(1 if layers > 1 else 0) :]) for r in scored
    )
    return {
        "layers": layers,
        "seed": seed,
        "steps_trained": res.steps_done,
        "minutes_trained": round(res.elapsed_s / 60, 2),
        "tokens_trained": res.metrics[-1]["tokens"],
        "first_step_over_0.4": hit["step"] if hit else "never",
        "minutes_to_induction": round(hit["elapsed_s"] / 60, 2) if hit else "never",
        "tokens_to_induction": hit["tokens"] if hit else None,
        "best_score": round(best, 3),
        "final_loss": res.metrics[-1]["loss"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", default="cpu")
    ap.add_argument(
        "--steps", type=int, default=None, help="steps for the 1-layer run (default: the preset's)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--score-every", type=int, default=25)
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        rows.append(run_one(args.preset, 2, seed, args.steps, args.score_every, stop=True))
        rows.append(run_one(args.preset, 1, seed, args.steps, args.score_every, stop=False))
    cols = [
        "layers",
        "seed",
        "steps_trained",
        "minutes_trained",
        "first_step_over_0.4",
        "minutes_to_induction",
        "best_score",
        "final_loss",
    ]
    print_table(rows, cols)
    write_result(
        "time_to_induction",
        {"preset": args.preset, "threshold": THRESHOLD, "threads": args.threads, "rows": rows},
        args.json,
    )


if __name__ == "__main__":
    main()
