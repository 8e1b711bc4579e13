"""The natural-text preset (``--preset text``, bytes) over seeds, through the toolkit. Per seed:

1. the 2-layer model, trained until its logged induction score has stayed past the floor for
   ``--window`` steps (the study's stop rule, ``stop_score`` = the induction floor, ``stop_after`` =
   the window; at most the preset's steps), keeping its weights at every scoring (every 1,000
   steps);
2. ``interp-toolkit heads RUN@STEP --json`` at every kept scoring from the first past the floor on,
   until one gives a layer-1 head the induction role (the role rule as it stands: value-weighted
   score above its null's tau, the floor, and the specificity test against the strongest other
   key): the *role step*;
3. its 1-layer control, trained with the same seed as long (to the role step, or to the 2-layer
   model's last step when no role came), and ``heads`` on it.

The role step is what the issue's goal reads ("a layer-1 head with the induction role"); minutes are
training time to that step (the run's own clock, scoring included).

    python experiments/text_seeds.py [--seeds 0,1,2,3,4] [--window 3000] [--out DIR] [--max-steps N]
                                    [--precision fp32|bf16] [--json PATH]
    python experiments/text_seeds.py --merge A.json B.json ...   (per-seed or per-batch runs)

(``--merge``: one table and summary from per-seed runs, each run on its own, written to
experiments/results/text_seeds.json.)

One thread, one run at a time (pin it to a core with ``taskset`` for the "one idle core" figure).
A seed that does not form within the budget is reported (``induction_step`` null), not dropped.
Prints a table and writes experiments/results/text_seeds.json (or ``--json``); the run folders stay
in ``--out`` (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result
from natural_text import curve, heads_report

PRESET = "text"


def train(
    out: Path,
    layers: int,
    seed: int,
    steps: int,
    stop_after: int | None,
    precision: str | None,
    **changes: Any,
) -> dict[str, Any]:
    """The preset at ``layers``, trained with ``seed`` for at most ``steps``; ``changes`` are
    further :func:`with_overrides` fields (experiments/unk_share.py: ``codec``, ``vocab_size``,
    ``d_vocab``)."""
    import torch

    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    torch.set_num_threads(1)
    p = with_overrides(
        get_preset(PRESET, layers),
        steps=steps,
        seed=seed,
        threads=1,
        precision=precision,
        **changes,
    )
    if stop_after is not None:  # the study's rule: past the floor for stop_after steps
        p = with_overrides(p, stop_score=THRESHOLDS.induction, stop_after=stop_after)
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


def roles(run: Path | str, layers: int) -> dict[str, Any]:
    found = heads_report(Path(run), "cpu")
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


def role_step(
    run: Path, curve2: list[dict[str, Any]], floor: float
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``heads`` at every kept scoring of ``run`` from the first past ``floor`` on; the first
    scoring whose report gives a layer-1 head the induction role (None if none), and every report
    read (step, heads)."""
    from interp_toolkit.runs.folder import RunPaths

    kept = set(RunPaths(run).snapshot_steps())
    last = curve2[-1]["step"]
    tried = []
    past = [r for r in curve2 if r["best_induction"] > floor]
    for row in curve2[curve2.index(past[0]) :] if past else []:
        step = row["step"]
        target = run if step == last else f"{run}@{step}"
        if step != last and step not in kept:
            continue
        found = roles(target, 2)
        tried.append({"step": step, **found})
        if found["induction_heads"]:
            return row, tried
    return None, tried


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-steps", type=int, default=None, help="default: the preset's steps")
    ap.add_argument(
        "--window", type=int, default=3000, help="steps trained past the floor (role search)"
    )
    ap.add_argument("--precision", default=None, help="fp32 | bf16 (default: the preset's)")
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
        run2, run1 = root / f"s{seed}-2", root / f"s{seed}-1"
        two = train(run2, 2, seed, budget, stop_after=args.window, precision=args.precision)
        curve2 = curve(two["metrics"], 2)
        hit = first_past(curve2, THRESHOLDS.induction)
        role, tried = role_step(run2, curve2, THRESHOLDS.induction)
        control_steps = role["step"] if role else two["steps"]
        one = train(run1, 1, seed, control_steps, stop_after=None, precision=args.precision)
        curve1 = curve(one["metrics"], 1)
        r2 = tried[-1] if tried else roles(run2, 2)
        r1 = roles(run1, 1)
        rows.append(
            {
                "seed": seed,
                "budget_steps": budget,
                "precision": args.precision or get_preset(PRESET, 2).train.precision,
                "window_steps": args.window,
                "floor_step": hit["step"] if hit else None,
                "floor_minutes": round(hit["elapsed_s"] / 60, 2) if hit else None,
                "role_step": role["step"] if role else None,
                "role_tokens": role["tokens"] if role else None,
                "role_minutes": round(role["elapsed_s"] / 60, 2) if role else None,
                "role_2l": ", ".join(r2["induction_heads"]) or "none",
                "best_vw_2l": r2["best_induction_vw"],
                "tau_2l": r2["best_tau"],
                "steps_2l": two["steps"],
                "tokens_per_s_2l": curve2[-1].get("tokens_per_s"),
                "prev_token_l0_2l": round(curve2[-1]["best_prev_token_l0"], 3),
                "steps_1l": one["steps"],
                "role_1l": ", ".join(r1["induction_heads"]) or "none",
                "best_vw_1l": r1["best_induction_vw"],
                "minutes_1l": round(one["elapsed_s"] / 60, 2),
                "load_1min_before": round(load, 2),
                "heads_tried_2l": tried,
                "heads_1l": r1,
                "curve_2l": curve2,
                "curve_1l": curve1,
            }
        )
        print_table([rows[-1]], [k for k in rows[-1] if not k.startswith(("heads_", "curve_"))])
    finish(rows, args.json)


#: The issue's goal: the role within this many minutes of one idle core.
GOAL_MINUTES = 8


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    formed = [r for r in rows if r["role_step"] is not None]
    minutes = [r["role_minutes"] for r in formed]
    return {
        "seeds": len(rows),
        "seeds_with_layer1_role": len(formed),
        f"seeds_with_role_within_{GOAL_MINUTES}_min": sum(m <= GOAL_MINUTES for m in minutes),
        "controls_with_role": sum(r["role_1l"] != "none" for r in rows),
        "median_role_step": statistics.median(r["role_step"] for r in formed) if formed else None,
        "median_minutes_to_role": statistics.median(minutes) if minutes else None,
        "max_minutes_to_role": max(minutes) if minutes else None,
        "steps_from_floor_to_role": [r["role_step"] - r["floor_step"] for r in formed],
    }


def finish(rows: list[dict[str, Any]], out: str | None) -> None:
    summary = summarise(rows)
    cols = [k for k in rows[0] if not k.startswith(("heads_", "curve_"))]
    cols = [k for k in cols if k not in ("budget_steps", "window_steps", "load_1min_before")]
    print_table(rows, cols)
    print(summary)
    write_result("text_seeds", {"preset": PRESET, "summary": summary, "rows": rows}, out)


if __name__ == "__main__":
    main()
