"""Seed robustness of the study: the 2-layer model and its 1-layer control over several seeds
(each seed sets the model's init and the data order), trained and measured exactly as
``interp-toolkit reproduce`` does (each seed is ``reproduce --layers 1,2 --seed S``).

    python experiments/seed_robustness.py [--seeds 0,1,2,3,4] [--threads 1] [--out DIR]

Per seed and depth: the step, tokens and minutes to induction (a layer>=1 head's logged induction
score past the floor), the route by ablation, and the exam pass rate at every period. Then the
median and range of the time to induction per depth. Study folders go to ``--out`` (reused when
re-run). Writes experiments/results/seed_robustness.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="folder for the study folders (default: temporary)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from interp_toolkit.exams.verdict import exam_verdict
    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.study.reproduce import StudyConfig, reproduce

    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.out or tempfile.mkdtemp(prefix="seeds-"))
    rows = []
    for seed in seeds:
        cfg = StudyConfig(out=root / f"seed-{seed}", layers=(1, 2), seed=seed, threads=args.threads)
        for d in reproduce(cfg).depths:
            v = exam_verdict(d.period_exams)
            rows.append(
                {
                    "seed": seed,
                    "layers": d.n_layers,
                    "induction_step": d.induction_step,
                    "induction_tokens": d.induction_tokens,
                    "induction_minutes": d.induction_minutes,
                    "steps": d.steps,
                    "induction_heads": len(d.induction_heads),
                    "route": d.route.name,
                    "exams_passing": f"{v.n_passing}/{v.n_exams}",
                    "all_pass": v.all_pass,
                    "above_untrained": f"{sum(len(x) for x in v.above.values())}/{v.n_exams}",
                    "lowest_pass": v.lowest.pass_rate,
                    "exam": {f"{e.kind}-{e.period}": e.pass_rate for e in d.period_exams},
                }
            )
            print_table(rows[-1:], [k for k in rows[-1] if k != "exam"])
    summary = []
    for layers in sorted({r["layers"] for r in rows}):
        mine = [r for r in rows if r["layers"] == layers]
        steps = [r["induction_step"] for r in mine if r["induction_step"] is not None]
        summary.append(
            {
                "layers": layers,
                "seeds": len(mine),
                "formed": f"{len(steps)}/{len(mine)}",
                "median_step": statistics.median(steps) if steps else None,
                "step_range": f"{min(steps)}-{max(steps)}" if steps else None,
                "routes": ", ".join(sorted({r["route"] for r in mine})),
                "all_periods_pass": f"{sum(r['all_pass'] for r in mine)}/{len(mine)}",
                "none_above_untrained": f"{sum(r['above_untrained'].startswith('0/') for r in mine)}/{len(mine)}",
            }
        )
    columns = [k for k in rows[0] if k != "exam"]
    print_table(rows, columns)
    print_table(summary, list(summary[0]))
    write_result(
        "seed_robustness",
        {
            "thresholds": dataclasses.asdict(THRESHOLDS),
            "threads": args.threads,
            "rows": rows,
            "summary": summary,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
