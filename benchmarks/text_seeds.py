"""The natural-text preset (``--preset text``, bytes) over seeds, through the toolkit: per seed, the
2-layer model trained until its logged induction score passes the floor (the study's stop rule,
``stop_score`` = the induction floor, at most the preset's steps), then its 1-layer control
trained the same number of steps with the same seed; then ``interp-toolkit heads RUN --json`` on
both (the role rule as it stands: value-weighted score above its null's tau, the floor, and the
specificity test).

    python benchmarks/text_seeds.py [--seeds 0,1,2,3,4] [--out DIR] [--max-steps N] [--json PATH]
    python benchmarks/text_seeds.py --merge results/text_seeds_s0.json results/text_seeds_s1.json ...

(``--merge``: one table and summary from per-seed runs, each run on its own, written to
benchmarks/results/text_seeds.json.)

One thread, one run at a time (pin it to a core with ``taskset`` for the "one idle core" figure).
A seed that does not form within the budget is reported (``induction_step`` null), not dropped.
Prints a table and writes benchmarks/results/text_seeds.json (or ``--json``); the run folders stay
in ``--out`` (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import print_table, write_result
from natural_text import curve, heads_report

PRESET = "text"


def train(out: Path, layers: int, seed: int, steps: int, stop: bool) -> dict[str, Any]:
    import torch

    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    torch.set_num_threads(1)
    p = with_overrides(get_preset(PRESET, layers), steps=steps, seed=seed, threads=1)
    if stop:  # stop at the first scoring past the floor (the study's rule, without its extra steps)
        p = with_overrides(p, stop_score=THRESHOLDS.induction, stop_after=1)
    t0 = time.perf_counter()
    res = train_model(str(out), p.model, p.data, p.train, preset=p.name, progress=False)
    return {
        "steps": res.steps_done,
        "elapsed_s": res.elapsed_s,
        "wall_s": time.perf_counter() - t0,
        "metrics": res.metrics,
    }


def first_past(rows: list[dict[str, Any]], floor: float) -> dict[str, Any] | None:
    for r in rows:
        if r["best_induction"] > floor:
            return r
    return None


def roles(run: Path, layers: int) -> dict[str, Any]:
    found = heads_report(run, "cpu")
    first = 1 if layers > 1 else 0
    ind = [h for h in found["heads"] if h["role"] == "induction" and h["layer"] >= first]
    prev = [h for h in found["heads"] if h["role"] == "previous-token"]
    best = max(
        (h for h in found["heads"] if h["layer"] >= first),
        key=lambda h: h["scores"]["induction_vw"],
    )
    return {
        "induction_heads": [f"{h['layer']}.{h['index']}" for h in ind],
        "previous_token_heads": [f"{h['layer']}.{h['index']}" for h in prev],
        "best_head": f"{best['layer']}.{best['index']}",
        "best_induction_vw": round(best["scores"]["induction_vw"], 3),
        "best_tau": round(best["tau"]["induction_vw"], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-steps", type=int, default=None, help="default: the preset's steps")
    ap.add_argument("--json", default=None)
    ap.add_argument("--merge", nargs="+", default=None, help="per-seed JSON files to combine")
    args = ap.parse_args()
    if args.merge:
        import json

        merged = [row for f in args.merge for row in json.loads(Path(f).read_text())["rows"]]
        finish(sorted(merged, key=lambda r: r["seed"]), args.json)
        return
    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.training.presets import get_preset

    budget = args.max_steps or get_preset(PRESET, 2).train.steps
    root = Path(args.out or tempfile.mkdtemp(prefix="text-seeds-"))
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        load = os.getloadavg()[0]
        two = train(root / f"s{seed}-2", 2, seed, budget, stop=True)
        curve2 = curve(two["metrics"], 2)
        hit = first_past(curve2, THRESHOLDS.induction)
        one = train(root / f"s{seed}-1", 1, seed, two["steps"], stop=False)
        curve1 = curve(one["metrics"], 1)
        r2, r1 = roles(root / f"s{seed}-2", 2), roles(root / f"s{seed}-1", 1)
        rows.append(
            {
                "seed": seed,
                "budget_steps": budget,
                "induction_step": hit["step"] if hit else None,
                "induction_tokens": hit["tokens"] if hit else None,
                "induction_minutes": round(hit["elapsed_s"] / 60, 2) if hit else None,
                "steps_2l": two["steps"],
                "minutes_2l": round(two["elapsed_s"] / 60, 2),
                "tokens_per_s_2l": curve2[-1].get("tokens_per_s"),
                "role_2l": ", ".join(r2["induction_heads"]) or "none",
                "best_vw_2l": r2["best_induction_vw"],
                "prev_token_l0_2l": round(curve2[-1]["best_prev_token_l0"], 3),
                "role_1l": ", ".join(r1["induction_heads"]) or "none",
                "best_vw_1l": r1["best_induction_vw"],
                "minutes_1l": round(one["elapsed_s"] / 60, 2),
                "load_1min_before": round(load, 2),
                "heads_2l": r2,
                "heads_1l": r1,
                "curve_2l": curve2,
                "curve_1l": curve1,
            }
        )
        print_table([rows[-1]], [k for k in rows[-1] if not k.startswith(("heads_", "curve_"))])
    finish(rows, args.json)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    formed = [r for r in rows if r["role_2l"] != "none"]
    minutes = [r["induction_minutes"] for r in rows if r["induction_minutes"] is not None]
    return {
        "seeds": len(rows),
        "seeds_with_layer1_role": len(formed),
        "seeds_with_role_within_8_min": sum(
            r["induction_minutes"] is not None and r["induction_minutes"] <= 8 for r in formed
        ),
        "controls_with_role": sum(r["role_1l"] != "none" for r in rows),
        "median_minutes_to_floor": statistics.median(minutes) if minutes else None,
        "max_minutes_to_floor": max(minutes) if minutes else None,
    }


def finish(rows: list[dict[str, Any]], out: str | None) -> None:
    summary = summarise(rows)
    cols = [k for k in rows[0] if not k.startswith(("heads_", "curve_"))]
    print_table(rows, cols)
    print(summary)
    write_result("text_seeds", {"preset": PRESET, "summary": summary, "rows": rows}, out)


if __name__ == "__main__":
    main()
