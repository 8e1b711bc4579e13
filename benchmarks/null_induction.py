"""Time until a layer-1 induction head passes its null, on natural text only (no repeated-span
windows), and the 1-layer control: what benchmarks/gpu_check.sh runs on a GPU.

    python benchmarks/null_induction.py --out DIR [--preset post] [--layers 2,1] [--device auto]
        [--precision fp32] [--steps 3000] [--score-every 100] [--corpus stdlib]

For each layer count: train the preset into DIR/L-layers with ``repeat_fraction=0`` (head scores
logged every ``--score-every`` steps), then run ``interp-toolkit heads --json`` on the result:
each head's own null (its ``tau``, the 0.95 quantile of the induction score over untrained models
of the same architecture; docs/analysis.md section 7) and the induction score's effect-size floor.
The first logged step at which some head in layers >= 1 (any layer for the 1-layer control) has
an induction score (the plain score, the one metrics.jsonl logs) above its own tau and at or above
the floor is the time to induction; "never" when none does. At the end, the heads ``heads`` gave
the induction role (its ``decides`` score, p-value and floor) are listed.
Prints a table and writes DIR/null_induction.json (or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import print_table, write_result


def run_one(args: argparse.Namespace, layers: int) -> dict:
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    p = with_overrides(
        get_preset(args.preset, layers),
        steps=args.steps,
        score_every=args.score_every,
        repeat_fraction=0.0,
        corpus=args.corpus,
        precision=args.precision,
    )
    out = Path(args.out) / f"{layers}-layers"
    res = train_model(out, p.model, p.data, p.train, preset=p.name, device=args.device)
    heads_json = out.parent / f"{out.name}.heads.json"  # the CLI never writes into what it reads
    subprocess.run(
        [sys.executable, "-m", "interp_toolkit", "heads", str(out), "--device", args.device]
        + ["--json", str(heads_json)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = json.loads(heads_json.read_text())
    floor = found["effect_size_floor"]["induction"]
    first = 1 if layers > 1 else 0
    tau = {(h["layer"], h["index"]): h["tau"]["induction"] for h in found["heads"]}
    scored = [r for r in res.metrics if "induction" in r]

    def passing(grid: list[list[float]]) -> bool:
        return any(
            s > tau[(layer, head)] and s >= floor
            for layer, row in enumerate(grid)
            if layer >= first
            for head, s in enumerate(row)
        )

    best = [max(max(row) for row in r["induction"][first:]) for r in scored]
    hit = next((r for r in scored if passing(r["induction"])), None)
    taus = [t for (layer, _), t in tau.items() if layer >= first]
    return {
        "layers": layers,
        "steps": res.steps_done,
        "minutes": round(res.elapsed_s / 60, 2),
        "tokens_per_s": res.metrics[-1]["tokens_per_s"],
        "tau_induction_range": [round(min(taus), 3), round(max(taus), 3)],
        "floor": floor,
        "first_step_passing": hit["step"] if hit else "never",
        "minutes_to_induction": round(hit["elapsed_s"] / 60, 2) if hit else "never",
        "best_score": round(max(best), 3),
        "final_loss": res.metrics[-1]["loss"],
        "induction_heads_at_end": found["roles"]["induction"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="a new folder for the runs and the JSON")
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--layers", default="2,1")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--score-every", type=int, default=100)
    ap.add_argument("--corpus", default="stdlib")
    ap.add_argument("--json", default=None, help="the result (default: DIR/null_induction.json)")
    args = ap.parse_args()

    rows = [run_one(args, int(n)) for n in args.layers.split(",")]
    print_table(rows, list(rows[0]))
    write_result(
        "null_induction",
        {"preset": args.preset, "device": args.device, "precision": args.precision, "rows": rows},
        args.json or str(Path(args.out) / "null_induction.json"),
    )


if __name__ == "__main__":
    main()
