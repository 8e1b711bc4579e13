"""The cost of the LLC per checkpoint, and the stages it finds, on trained runs (docs/stages.md).

    taskset -c 0 python benchmarks/stages.py --run RUN2 --run RUN1 [--max-step 1050]
        [--chains N] [--draws N] [--burn-in N] [--rows 16] [--batches 4] [--threads 1]
        (SGLD settings default to those calibrated for each run's preset)

For each run (train them with ``interp-toolkit train --preset cpu --layers 2`` and ``--layers 1``;
their kept checkpoints are the default snapshot schedule): the kept checkpoints' disk size, the
LLC at every kept checkpoint up to ``--max-step`` (seconds per checkpoint: the median and the
total, on ``--threads`` threads), the stage boundaries and stages, and whether the logged
induction phase change falls inside a boundary's interval. Writes benchmarks/results/stages.json
(``--out`` to change), with every checkpoint's estimate but not the traces.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
from _common import print_table, write_result

from interp_toolkit.development.curve import llc_curve, stages
from interp_toolkit.development.llc import calibrated_settings
from interp_toolkit.runs.folder import RunPaths, read_config
from interp_toolkit.training.settings import recorded_preset_name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="a run folder (repeatable)")
    ap.add_argument("--max-step", type=int, default=None)
    for flag, kind in (
        ("--chains", int),
        ("--draws", int),
        ("--burn-in", int),
        ("--step-size", float),
        ("--gamma", float),
        ("--nbeta", float),
    ):
        ap.add_argument(flag, type=kind, default=None, help="default: the run's preset's")  # fmt: skip
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    given = {k: getattr(args, k) for k in ("chains", "draws", "burn_in", "step_size", "gamma",
             "nbeta") if getattr(args, k) is not None}  # fmt: skip
    results, table = [], []
    for run in args.run:
        paths = RunPaths(Path(run))
        cfg = read_config(run)
        kept = [s for s in paths.snapshot_steps() if args.max_step is None or s <= args.max_step]
        sizes = [paths.snapshot(s).stat().st_size for s in paths.snapshot_steps()]

        def tick(i: int, n: int, step: int, run: str = run) -> None:
            print(f"{run}: checkpoint {i + 1}/{n} (step {step})", flush=True)

        settings, source = calibrated_settings(recorded_preset_name(cfg), given)
        curve = llc_curve(run, settings, n_batches=args.batches, rows=args.rows, steps=kept,
                          progress=tick, settings_source=source)  # fmt: skip
        times = [e.seconds for e in curve.estimates]
        found = stages(run, curve=curve)
        data = found.to_dict()
        for c in data["checkpoints"]:
            del c["traces"]  # the estimates, not their chains
        n_layers = cfg["model"]["n_layers"]
        result = {
            "run": str(run),
            "n_layers": n_layers,
            "train_settings": cfg["settings"].get("train"),
            "disk": {
                "kept_checkpoints": len(sizes),
                "bytes_each": sizes[0] if sizes else 0,
                "bytes_total": sum(sizes),
            },
            "llc_seconds_per_checkpoint_median": round(statistics.median(times), 3),
            "llc_seconds_total": round(sum(times), 2),
            "checkpoints_estimated": len(kept),
            **{k: data[k] for k in ("checkpoints", "batches", "settings", "settings_source")},
            "rule": data["rule"],
            **{k: data[k] for k in ("boundaries", "stages", "phase_change")},
        }
        results.append(result)
        table.append({
            "run": Path(run).name,
            "layers": n_layers,
            "ckpts": len(kept),
            "MB kept": round(sum(sizes) / 2**20, 1),
            "s/ckpt": result["llc_seconds_per_checkpoint_median"],
            "boundaries": ", ".join(str(b["step"]) for b in data["boundaries"]) or "-",
            "phase change": data["phase_change"]["phase_change_step"],
            "inside": data["phase_change"]["inside"],
        })  # fmt: skip
        for st in data["stages"]:
            print(f"  stage {st['stage']} ({st['start']}-{st['end']}): {st['summary']}")
    print_table(table, list(table[0]))
    write_result(
        "stages",
        {"threads": args.threads, "runs": results},
        args.out,
    )


if __name__ == "__main__":
    main()
