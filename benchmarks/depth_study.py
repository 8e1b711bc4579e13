"""The default study at every depth: ``interp-toolkit reproduce`` (1, 2, 3 and 8 layers), timed;
with ``--mlp``, also ``reproduce --mlp`` (the same plus MLP twins of 1 and 2 layers, their
neurons and the probes) in a fresh folder right after, so the extra cost is measured side by side
(target: at most 10 more minutes on 2 cores).

    python benchmarks/depth_study.py [--mlp] [--workers 2] [--seed 0] [--out DIR]

Per depth: steps, tokens and minutes to induction (a layer>=1 head's logged induction score past
the floor), steps and minutes trained, the route by ablation and the period exam. Also the whole
study's wall time, its CPU time (this process and its training workers; load-robust: other
users' work does not count) and the load average before and after, since the machine is
shared. Writes benchmarks/results/depth_study.json (depth_study_mlp.json with ``--mlp``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import tempfile
import time
from pathlib import Path

from _common import print_table, write_result


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the training workers)."""
    return sum(
        r.ru_utime + r.ru_stime
        for r in (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, default=2, help="runs trained at once")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="study folder (default: a new temporary one)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mlp", action="store_true", help="then reproduce --mlp, side by side")
    args = ap.parse_args()
    from interp_toolkit.stats.thresholds import THRESHOLDS

    root = Path(args.out or tempfile.mkdtemp(prefix="depths-"))
    studies = [("default", False)] + ([("--mlp", True)] if args.mlp else [])
    totals, rows = {}, []
    for label, mlp in studies:
        total, found = run_study(root / ("study-mlp" if mlp else "study"), args, mlp)
        totals[label] = total
        rows += [{"study": label, **r} for r in found]
    print_table(rows, [k for k in rows[0] if k != "exam"])
    if args.mlp:
        extra = totals["--mlp"]["wall_minutes"] - totals["default"]["wall_minutes"]
        totals["mlp_extra_wall_minutes"] = round(extra, 2)
    print(totals)
    write_result(
        "depth_study_mlp" if args.mlp else "depth_study",
        {
            "workers": args.workers,
            "seed": args.seed,
            "thresholds": dataclasses.asdict(THRESHOLDS),
            "total": totals,
            "rows": rows,
        },
        args.json,
    )


def run_study(out: Path, args: argparse.Namespace, mlp: bool) -> tuple[dict, list[dict]]:
    """One fresh study, timed: its totals and one row per model."""
    from interp_toolkit.exams.verdict import exam_verdict
    from interp_toolkit.study.reproduce import StudyConfig, reproduce

    load_before = os.getloadavg()
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    result = reproduce(StudyConfig(out=out, seed=args.seed, workers=args.workers, mlp=mlp))
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    rows = []
    for d in [*result.depths, *result.mlp_depths]:
        v = exam_verdict(d.period_exams)
        rows.append(
            {
                "run": d.name,
                "layers": d.n_layers,
                "induction_step": d.induction_step,
                "induction_tokens": d.induction_tokens,
                "induction_minutes": d.induction_minutes,
                "steps": d.steps,
                "train_minutes": d.train_minutes,
                "induction_heads": len(d.induction_heads),
                "route": d.route.name,
                "exams_passing": f"{v.n_passing}/{v.n_exams}",
                "lowest_pass": v.lowest.pass_rate,
                "lowest_bound": round(v.lowest.interval.low, 3),
                "val_loss": d.val_loss,
                "exam": {f"{e.kind}-{e.period}": e.pass_rate for e in d.period_exams},
            }
        )
    total = {
        "wall_minutes": round(wall / 60, 2),
        "cpu_minutes": round(cpu / 60, 2),
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
    }
    return total, rows


if __name__ == "__main__":
    main()
