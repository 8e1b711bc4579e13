"""How much do head roles depend on the role rule's cut-offs? Roles as the effect-size floor, the
rival ratio and the rival window vary one at a time around the defaults (floor 0.4, ratio 2,
every other key), on trained models and on planted heads with known answers.

Models:

- the cpu preset's 1- and 2-layer models (``--train LAYERS:SEED``, default ``1:0 2:0``, ``--steps``
  700: the test fixtures' recipe, trained into ``--runs-dir`` with one thread unless already
  there): no answer is known; the table shows which roles move;
- the planted heads of ``tests/planting/heads.py`` (16 heads, each with the role it must get):
  sharp (sharpness 20), and soft and noisy (sharpness 6, key-token noise std 1, seed 3);
- the split heads (``planting.heads.split_model``: 50/50, 60/40, 64/36 splits between a score's
  key and another key, near or far, and 75/25, 80/20 positives).

A last row gives the roles of the floor alone (every test counted significant).

For each model and setting: the roles (``L.H:role``), and for the planted models the number of
heads whose role is wrong (``errors``: a negative given a role, or a positive not given its own).
Discovery's defaults otherwise (64 rows, seed 0, 9,999 draws: every test here has the same draws,
so a change is the cut-off's doing). The floor applies to the score and, for a repeat score, to its
repeat effect (docs/statistics.md §1).

Run::

    taskset -c 0 .venv/bin/python experiments/cutoff_sensitivity.py [--runs-dir DIR]

It prints the table and writes ``experiments/results/cutoff_sensitivity.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the planting kit, the letters codec

sys.path.insert(0, str(ROOT / "benchmarks"))  # _common
from _common import print_table, write_result  # noqa: E402

FLOORS = (0.2, 0.3, 0.4, 0.5, 0.6)
RATIOS = (1.0, 1.5, 2.0, 3.0, 4.0)
WIDTHS: tuple[int | None, ...] = (1, 2, 4, 8, None)
DRAWS = 9999


def settings() -> list[dict[str, Any]]:
    """The defaults, then one cut-off varied at a time."""
    from interp_toolkit.stats.thresholds import ARENA_FLOOR, RIVAL_RATIO, RIVAL_WIDTH

    base = {"floor": ARENA_FLOOR, "ratio": RIVAL_RATIO, "width": RIVAL_WIDTH}
    out = [{**base, "varied": "default"}]
    out += [{**base, "floor": f, "varied": "floor"} for f in FLOORS if f != base["floor"]]
    out += [{**base, "ratio": r, "varied": "ratio"} for r in RATIOS if r != base["ratio"]]
    out += [{**base, "width": w, "varied": "window"} for w in WIDTHS if w != base["width"]]
    out.append({**base, "varied": "no test (floor alone)", "test": False})
    return out


def roles_under(model: Any, codec: Any, cases: list[dict[str, Any]]) -> list[list[list[str]]]:
    """The roles of ``model`` under every setting of ``cases`` (one forward pass per window)."""
    from interp_toolkit.heads.discovery import classify, discovery_batch
    from interp_toolkit.heads.registry import DEFAULT_DECIDERS, SCORE_KINDS
    from interp_toolkit.heads.scorer import HeadScores
    from interp_toolkit.heads.specificity import BOOTSTRAP_T, comparisons_of, specificity_tests

    batch = discovery_batch(model, codec)
    by_width: dict[Any, Any] = {}
    out = []
    for case in cases:
        if case["width"] not in by_width:  # one forward pass per window; the ratio is a number
            by_width[case["width"]] = comparisons_of(model, batch, rival_width=case["width"])
        observed, comps = by_width[case["width"]]
        comps = {
            kind: {
                n: replace(p, ratio=case["ratio"]) if p.test == BOOTSTRAP_T else p
                for n, p in named.items()
            }
            for kind, named in comps.items()
        }
        tests = specificity_tests(comps, DRAWS)
        scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
        effects = {k: tests.repeat_effect(k) for k in SCORE_KINDS}
        floors = dict.fromkeys(DEFAULT_DECIDERS.values(), case["floor"])
        significant = tests.significant()
        if not case.get("test", True):
            significant = {k: torch.ones_like(v) for k, v in significant.items()}
        out.append(classify(scores, significant, None, effects, floors))
    return out


def margins(model: Any, codec: Any) -> list[dict[str, Any]]:
    """Per head and deciding score: the score, its mean at the strongest other key and their
    ratio, and its repeat effect: how far each head sits from the cut-offs."""
    from interp_toolkit.heads.discovery import discovery_batch
    from interp_toolkit.heads.registry import DEFAULT_DECIDERS, HeadId, rival_name
    from interp_toolkit.heads.specificity import comparisons_of

    batch = discovery_batch(model, codec)
    observed, comps = comparisons_of(model, batch)
    out = []
    for kind in DEFAULT_DECIDERS.values():
        pair = comps[kind][f"vs {rival_name()}"]
        n = pair.counts.sum()
        key, rival = pair.target.sum(0) / n, pair.rival.sum(0) / n
        control = comps[kind].get("vs no-repeat control")
        for ly in range(key.shape[0]):
            for h in range(key.shape[1]):
                row = {
                    "head": str(HeadId(ly, h)),
                    "score": kind,
                    "value": round(float(observed[kind].mean()[ly, h]), 4),
                    "key_on_rival_queries": round(float(key[ly, h]), 4),
                    "strongest_rival": round(float(rival[ly, h]), 4),
                    "ratio": round(float(key[ly, h] / rival[ly, h].clamp_min(1e-12)), 2),
                }
                if control is not None:
                    eff = (control.target - control.rival).sum(0) / control.counts.sum()
                    row["repeat_effect"] = round(float(eff[ly, h]), 4)
                out.append(row)
    return out


def _labelled(roles: list[list[str]]) -> list[str]:
    return [
        f"{ly}.{h}:{r}" for ly, row in enumerate(roles) for h, r in enumerate(row) if r != "none"
    ]


def _errors(roles: list[list[str]], want: list[list[str]]) -> list[str]:
    return [
        f"{ly}.{h}:{got}"
        for ly, (row, wrow) in enumerate(zip(roles, want, strict=True))
        for h, (got, w) in enumerate(zip(row, wrow, strict=True))
        if got != w
    ]


def trained_runs(runs_dir: Path, specs: list[str], steps: int) -> list[Any]:
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    runs = []
    for spec in specs:
        n_layers, seed = (int(x) for x in spec.split(":"))
        out = runs_dir / f"cpu-{n_layers}l-seed{seed}-{steps}"
        if not any(out.glob("*.safetensors")):
            p = with_overrides(
                get_preset("cpu", n_layers), steps=steps, seed=seed, score_every=50, threads=1
            )
            print(f"training {out.name} ...", flush=True)
            train_model(out, p.model, p.data, p.train, preset="cpu", progress=False)
        runs.append(load_run(out, device="cpu"))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", nargs="*", default=["1:0", "2:0"])
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--runs-dir", default="/tmp/cutoff_runs")
    ap.add_argument("--out", default=None, help="result JSON (default: results/ beside this)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()

    from planting import letters_codec
    from planting.heads import expected_roles, planted_model, split_model, split_roles

    cases = settings()
    codec = letters_codec()
    models: list[tuple[str, Any, Any, list[list[str]] | None]] = [
        ("planted, sharp", planted_model(), codec, expected_roles()),
        (
            "planted, soft + noisy",
            planted_model(sharpness=6.0, noise=1.0, seed=3),
            codec,
            expected_roles(),
        ),  # fmt: skip
        ("split heads", split_model(), codec, split_roles()),
    ]
    for run in trained_runs(Path(args.runs_dir), args.train, args.steps):
        models.append((f"trained {run.model_cfg.n_layers}-layer ({run.name})", run.model,
                       run.codec, None))  # fmt: skip
    results, margin = [], {}
    for name, model, cdc, want in models:
        print(f"{name} ...", flush=True)
        if want is None:
            margin[name] = margins(model, cdc)
        for case, roles in zip(cases, roles_under(model, cdc, cases), strict=True):
            row = {"model": name, **case, "roles": _labelled(roles)}
            if want is not None:
                row["errors"] = _errors(roles, want)
            results.append(row)
    default_roles = {r["model"]: r["roles"] for r in results if r["varied"] == "default"}
    for r in results:
        r["same_as_default"] = r["roles"] == default_roles[r["model"]]
    table = []
    for case in cases:
        line: dict[str, Any] = {
            "varied": case["varied"],
            "floor": case["floor"],
            "ratio": case["ratio"],
            "window": "every key" if case["width"] is None else f"±{case['width']}",
        }
        for r in results:
            same = (r["floor"], r["ratio"], r["width"]) == (
                case["floor"],
                case["ratio"],
                case["width"],
            )
            if not same or r["varied"] != case["varied"]:
                continue
            if "errors" in r:
                line[r["model"]] = f"{len(r['errors'])} wrong" + (
                    f" ({', '.join(r['errors'])})" if r["errors"] else ""
                )
            else:
                line[r["model"]] = ", ".join(r["roles"]) or "none"
        table.append(line)
    print_table(table, list(table[0]))
    write_result(
        "cutoff_sensitivity",
        {
            "defaults": cases[0],
            "draws": DRAWS,
            "rows": 64,
            "table": table,
            "results": results,
            "trained_margins": margin,
            "wall_s": round(time.perf_counter() - t0, 1),
        },
        args.out,
    )
    for name, rows in margin.items():
        near = [m for m in rows if m["value"] >= 0.2]
        print(name, "(heads with a deciding score >= 0.2)" if near else "(no score >= 0.2)")
        if not near:
            continue
        print_table(near, list(dict.fromkeys([*rows[0], "repeat_effect"])))


if __name__ == "__main__":
    main()
