"""The stages over seeds: the cost of the LLC per checkpoint and per run, and whether the
boundaries move with the seed, read from the ``stages.json`` that ``interp-toolkit stages RUN``
left in the runs of a multi-seed study (docs/stages.md, "Over seeds").

    python experiments/stages_seeds.py --study DIR --seeds 5 [--out F]

DIR is a ``reproduce --seeds N --out DIR`` folder (seed 0 in DIR, seed S in DIR/seed-S); every
1- and 2-layer run that holds ``stages.json`` is read. Per run and seed: kept checkpoints, their
disk size, seconds per checkpoint (median) and per run (the estimates' sum: what ``stages`` spent
on the LLC, on the core it ran on), the boundaries, the checkpoints not read (below 0), the phase
change and where it falls (``reports/stage_findings.py``, the study page's reading). Per run name:
the page's sentence on how far the boundaries move with the seed. And the rule's sensitivity: the
boundaries of the same kept LLC under bandwidths 0.15 / 0.25 / 0.4 and floors 0.05 / 0.1 / 0.2
(P = peak, T = trough, at the step). Writes
experiments/results/stages_seeds.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result

from interp_toolkit.development.stages import stage_boundaries
from interp_toolkit.reports.stage_findings import StagesOfRun, seeds_move_sentence, stage_sentence
from interp_toolkit.runs.folder import RunPaths, read_config
from interp_toolkit.study.seeds import read_stages, study_folders

BANDWIDTHS = (0.15, 0.25, 0.4)
SWINGS = (0.05, 0.1, 0.2)


def rule_sensitivity(found: list[StagesOfRun]) -> list[dict[str, object]]:
    """The boundaries each run's kept LLC gives under other rule settings (the same estimates,
    the same not-read checkpoints): one row per run and seed, one column per (bandwidth, floor)."""
    out = []
    for s in found:
        steps, read = s.stages.curve.steps, s.stages.curve.read
        row: dict[str, object] = {"run": s.name, "seed": s.seed}
        for bw in BANDWIDTHS:
            for sw in SWINGS:
                bounds = stage_boundaries(steps, read, bandwidth=bw, min_swing=sw)
                row[f"bw {bw} floor {sw}"] = (
                    " ".join(f"{b.kind[0].upper()}{b.step}" for b in bounds) or "-"
                )
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", required=True)
    ap.add_argument("--seed", type=int, default=0, help="the study's first seed")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(args.study)
    folders = study_folders(root, args.seed, args.seeds)
    found: list[StagesOfRun] = []
    runs, table = [], []
    for seed, folder in folders:
        for run in sorted(p for p in folder.iterdir() if RunPaths(p).stages.is_file()):
            n_layers = read_config(run)["model"]["n_layers"]
            if n_layers > 2:
                continue
            s = read_stages(seed, run, n_layers)
            data = s.stages.to_dict()
            found.append(s)
            secs = [c["seconds"] for c in data["checkpoints"]]
            sizes = [p.stat().st_size for p in RunPaths(run).snapshots.glob("*.safetensors")]
            fall = s.loss_fall
            row = {
                "run": run.name, "seed": seed, "checkpoints": len(secs),
                "bytes_kept": sum(sizes), "seconds_per_checkpoint": statistics.median(secs),
                "llc_seconds": round(sum(secs), 1), "stages_seconds": data["seconds"],
                "settings": data["settings"], "settings_source": data.get("settings_source"),
                "not_read_steps": data["rule"].get("not_read_steps", []),
                "boundaries": data["boundaries"], "phase_change": data["phase_change"],
                "loss_fall": None if fall is None else {"from": fall[1], "to": fall[2],
                                                        "by": round(fall[0], 4)},
                "in_loss_fall": s.in_loss_fall(), "rise_meets_fall": s.rise_meets_fall(),
                "sentence": stage_sentence(s),
            }  # fmt: skip
            runs.append(row)
            rise = data["phase_change"].get("steepest_rise") or {}
            table.append({
                "run": run.name, "seed": seed, "ckpts": len(secs),
                "s/ckpt": row["seconds_per_checkpoint"], "s/run": row["llc_seconds"],
                "not read": len(row["not_read_steps"]),
                "boundaries": ", ".join(f"{b['kind']} {b['step']}" for b in data["boundaries"])
                or "-",
                "phase": data["phase_change"]["phase_change_step"],
                "rise": f"{rise.get('from')}-{rise.get('to')}" if rise else "-",
                "loss fall": f"{fall[1]}-{fall[2]}" if fall else "-",
            })  # fmt: skip
    print_table(table, list(table[0]))
    sensitivity = rule_sensitivity(found)
    print_table(sensitivity, list(sensitivity[0]))
    names = sorted({s.name for s in found})
    moves = {n: seeds_move_sentence([s for s in found if s.name == n]) for n in names}
    for sentence in moves.values():
        print(sentence)
    write_result(
        "stages_seeds",
        {
            "study": str(root),
            "seeds": [s for s, _ in folders],
            "runs": runs,
            "over_seeds": moves,
            "rule_sensitivity": sensitivity,
        },  # fmt: skip
        args.out,
    )


if __name__ == "__main__":
    main()
