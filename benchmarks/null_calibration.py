"""Do head roles discriminate? False positives on planted negatives and on trained heads that
cannot have a role, power on planted positives, and the cost of discovery on the cpu preset, the
specificity test beside the rule it replaces, in one run.

1. **Planted heads** (``tests/planted_heads.py``: hand-built heads, each almost but not quite a
   role, and the positives), ``--n-planted`` instances: attention sharpness uniform in [4, 12]
   (a head puts 0.5-1.0 of its attention where it looks), key-token noise std uniform in
   [0.5, 1.5] (an even split is even only on average over rows), model seed and probe seed ``i``,
   discovery with its defaults (64 rows). Per planted head: the share of instances with the right
   role (positives: power) and with a wrong role (negatives: the false-positive rate, the figure
   that can fail). Beside it, the rule before on the first 8 instances: each score against the
   heads of its layer in 5 untrained models of the same architecture (``nulls.untrained_tests``),
   p <= 0.05 and the 0.4 floor.
2. **Trained heads** (the cpu preset, ``--train LAYERS:SEED ...`` (default 1- and 2-layer, seed
   0), ``--steps`` steps: the test fixture's recipe; trained into ``--runs-dir`` unless already
   there; ``--run`` adds folders trained elsewhere with the same recipe). False positives where a
   role cannot exist:

   - the induction role on the heads of 1-layer models (induction needs an earlier layer);
   - every repeat score (duplicate, induction, value-weighted induction) on a probe *without
     repeats* (its control another no-repeat batch): the share of trained heads with p <= 0.05.
     The control comparison is exact there, so this holds by construction; it shows the
     intersection-union p stays at or below alpha on trained heads.

   And per run, the roles under the specificity test beside the rule before, and (descriptive, not
   a false positive) the share of heads under the floor whose test is significant.
3. **Cost** of discovery on the cpu preset's models (1, 2, 3, 8 layers; random init, the cost does
   not depend on the weights), one after the other in this process: the specificity test (the
   default), and the rule before (25 untrained models: nothing cached, then cached). CPU seconds
   and the load average are recorded: the machine is shared.

The calibration of the untrained-vs-untrained null is gone from here: untrained models are
exchangeable with each other, so it held by construction (its arithmetic is a unit test).

Run::

    .venv/bin/python benchmarks/null_calibration.py [--n-planted 40] [--train 1:0 2:0] [--threads 2]
        [--only planted trained cost_cpu]

It prints tables and writes ``benchmarks/results/null_calibration.json`` after each section (a
run with ``--only`` keeps the other sections already in that file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # planted_heads, the letters codec

from _common import RESULTS, print_table, write_result  # noqa: E402

ALPHA = 0.05
REPEAT_SCORES = ("duplicate_token", "induction", "induction_vw")


def _old_roles(
    model: Any, batch: Any, observed: Any, cfg: Any, n_models: int | None = None
) -> list[list[str]]:
    """The rule before: every score against untrained models of the architecture (``n_models``,
    default as before: a pool of 99 per layer), and the floor."""
    from interp_toolkit.heads import nulls
    from interp_toolkit.heads.discovery import classify
    from interp_toolkit.heads.scorer import HeadScores
    from interp_toolkit.heads.untrained import untrained_models

    untrained = untrained_models(model, model_cfg=cfg, n_models=n_models)
    tests, _ = nulls.untrained_tests(model, batch, observed, untrained)
    scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
    return classify(scores, tests.significant(ALPHA))


#: The rule before runs on the first OLD_RULE_INSTANCES planted instances, against OLD_RULE_MODELS
#: untrained models (a pool of 40 per layer, smallest p 1/41: the planted heads are far above
#: every untrained head either way); the machine is shared and this is the slow part.
OLD_RULE_INSTANCES, OLD_RULE_MODELS = 8, 5


def planted(n: int) -> dict[str, Any]:
    """Planted heads: right and wrong roles per head over ``n`` noisy instances, new and old."""
    from circuits_helpers import letters_codec
    from planted_heads import CFG, PLANTED, planted_model

    from interp_toolkit.heads.discovery import discover_heads, discovery_probe
    from interp_toolkit.heads.scorer import row_scores

    codec = letters_codec()
    gen = torch.Generator().manual_seed(2024)
    counts = {h: {"new": 0, "old": 0, "new_wrong": 0, "old_wrong": 0} for h in PLANTED}
    over_floor = dict.fromkeys(PLANTED, 0)
    settings = []
    for i in range(n):
        sharp = 4.0 + 8.0 * float(torch.rand((), generator=gen))
        noise = 0.5 + float(torch.rand((), generator=gen))
        settings.append({"sharpness": round(sharp, 2), "noise": round(noise, 2), "seed": i})
        model = planted_model(sharpness=sharp, noise=noise, seed=i)
        rep = discover_heads(model, codec, seed=i)
        both = [("new", rep.roles)]
        if i < OLD_RULE_INSTANCES:
            batch = discovery_probe(model, codec, seed=i)
            observed = row_scores(model, batch)
            both.append(("old", _old_roles(model, batch, observed, CFG, OLD_RULE_MODELS)))
        for h, (_, want) in PLANTED.items():
            for key, roles in both:
                got = roles[h.layer][h.head]
                counts[h][key] += got == want
                counts[h][f"{key}_wrong"] += got != want and got != "none"
            over_floor[h] += any(
                float(rep.scores.get(k)[h]) >= rep.floors[k] for k in rep.decides.values()
            )
    rows = []
    for h, (what, want) in PLANTED.items():
        c, n_old = counts[h], min(n, OLD_RULE_INSTANCES)
        if want == "none":
            rates = {"new": c["new_wrong"] / n, "old": c["old_wrong"] / n_old}
        else:
            rates = {"new": c["new"] / n, "old": c["old"] / n_old}
        rows.append(
            {
                "head": str(h),
                "planted": what,
                "must_be": want,
                "kind": "negative" if want == "none" else "positive",
                "over_floor_share": over_floor[h] / n,
                "rate": rates["new"],
                "rate_rule_before": rates["old"],
            }
        )
    neg = [r for r in rows if r["kind"] == "negative"]
    pos = [r for r in rows if r["kind"] == "positive"]
    return {
        "n_instances": n,
        "rule_before": {
            "instances": min(n, OLD_RULE_INSTANCES),
            "untrained_models": OLD_RULE_MODELS,
        },
        "settings": settings,
        "rows": rows,
        "fp_rate_negatives": sum(r["rate"] for r in neg) / len(neg),
        "fp_rate_negatives_rule_before": sum(r["rate_rule_before"] for r in neg) / len(neg),
        "fp_rate_negatives_over_floor": _mean(r["rate"] for r in neg if r["over_floor_share"]),
        "power_positives": sum(r["rate"] for r in pos) / len(pos),
        "power_positives_rule_before": sum(r["rate_rule_before"] for r in pos) / len(pos),
    }


def _mean(xs: Any) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def trained_runs(runs_dir: Path, specs: list[str], steps: int, extra: list[str]) -> list[Any]:
    """The cpu preset's models named by ``specs`` (``LAYERS:SEED``), trained into ``runs_dir``
    unless already there, and the run folders ``extra`` (same recipe, trained elsewhere)."""
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    folders = []
    for spec in specs:
        n_layers, seed = (int(x) for x in spec.split(":"))
        out = runs_dir / f"cpu-{n_layers}l-seed{seed}-{steps}"
        if not any(out.glob("*.safetensors")):
            p = with_overrides(get_preset("cpu", n_layers), steps=steps, seed=seed)
            print(f"training {out.name} ...", flush=True)
            train_model(out, p.model, p.data, p.train, preset="cpu", progress=False)
        folders.append(out)
    return [load_run(f, device="cpu") for f in [*folders, *map(Path, extra)]]


def trained(runs: list[Any]) -> dict[str, Any]:
    """False positives where a role cannot exist, and the roles new and old, per run."""
    from interp_toolkit.heads.discovery import discover_heads, discovery_probe
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.heads.repeats import non_repeating_like
    from interp_toolkit.heads.scorer import row_scores
    from interp_toolkit.heads.specificity import comparisons_of, specificity_tests

    out_runs, one_layer_heads, one_layer_induction, one_layer_sig = [], 0, 0, 0
    no_repeat_tests, no_repeat_sig = 0, 0
    for run in runs:
        model, codec, cfg = run.model, run.codec, run.model_cfg
        rep = discover_heads(model, codec, model_cfg=cfg)
        batch = discovery_probe(model, codec)
        old = _old_roles(model, batch, row_scores(model, batch), cfg)
        # a probe without repeats: no repeat score can have a reason to be high
        fake = non_repeating_like(batch, seed=991)
        _, comps = comparisons_of(model, fake, seed=17)
        tests = specificity_tests({k: comps[k] for k in REPEAT_SCORES}, 9999, seed=5)
        for k in REPEAT_SCORES:
            no_repeat_tests += tests.p_value[k].numel()
            no_repeat_sig += int((tests.p_value[k] <= ALPHA).sum())
        if cfg.n_layers == 1:
            one_layer_heads += cfg.n_heads
            one_layer_induction += len(rep.heads_with_role("induction"))
            one_layer_sig += int(rep.significant[rep.decides["induction"]].sum())
        under = {k: rep.scores.get(k) < rep.floors[k] for k in rep.decides.values()}
        labelled = {
            "new": _labelled(rep.roles),
            "rule_before": _labelled(old),
        }
        out_runs.append(
            {
                "run": run.name,
                "n_layers": cfg.n_layers,
                "seed": cfg.seed,
                "steps": run.settings.get("train", {}).get("steps"),
                "roles": labelled,
                "changed": sorted(set(labelled["new"]) ^ set(labelled["rule_before"])),
                "decided_by": {
                    str(HeadId(ly, h)): rep.role_reason((ly, h))
                    for ly, row in enumerate(rep.roles)
                    for h, r in enumerate(row)
                    if r != "none"
                },
                "under_floor_significant_share": {
                    k: float((rep.significant[k] & m).sum()) / max(1, int(m.sum()))
                    for k, m in under.items()
                },
            }
        )
    return {
        "runs": out_runs,
        "one_layer_heads": one_layer_heads,
        "one_layer_induction_roles": one_layer_induction,
        "one_layer_induction_fp_rate": one_layer_induction / max(1, one_layer_heads),
        "one_layer_induction_test_significant_share": one_layer_sig / max(1, one_layer_heads),
        "no_repeat_probe_tests": no_repeat_tests,
        "no_repeat_probe_fp_share": no_repeat_sig / max(1, no_repeat_tests),
    }


def _labelled(roles: list[list[str]]) -> list[str]:
    return [
        f"{ly}.{h}:{r}" for ly, row in enumerate(roles) for h, r in enumerate(row) if r != "none"
    ]


def cost_cpu(threads: int) -> list[dict[str, Any]]:
    """Discovery on the cpu preset's models, new and old, one after the other in this process."""
    from analysis_helpers import tiny_codec

    from interp_toolkit.heads import untrained
    from interp_toolkit.heads.discovery import discover_heads, discovery_probe
    from interp_toolkit.heads.scorer import row_scores
    from interp_toolkit.models.build import build_model
    from interp_toolkit.training.presets import get_preset

    torch.set_num_threads(threads)
    codec, rows = tiny_codec(1024), []
    for n_layers in (1, 2, 3, 8):
        cfg = get_preset("cpu", n_layers).model
        model = build_model(cfg)
        untrained._CACHE.clear()

        def before(m: Any = model, c: Any = cfg) -> Any:
            batch = discovery_probe(m, codec)
            return _old_roles(m, batch, row_scores(m, batch), c)

        cases = {
            "specificity test (now)": lambda m=model, c=cfg: discover_heads(m, codec, model_cfg=c),
            "per-head untrained nulls (before), nothing cached": before,
            "per-head untrained nulls (before), untrained rows cached": before,
        }
        for name, run in cases.items():
            load = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            rows.append(
                {
                    "layers": n_layers,
                    "case": name,
                    "seconds": round(time.perf_counter() - t0, 2),
                    "cpu_seconds": round(time.process_time() - c0, 2),
                    "load_before": round(load, 2),
                    "threads": threads,
                }
            )
    torch.set_num_threads(1)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-planted", type=int, default=40)
    ap.add_argument(
        "--train", nargs="*", default=["1:0", "2:0"], help="LAYERS:SEED cpu-preset runs to use"
    )
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--runs-dir", default="/tmp/null_calibration_runs")
    ap.add_argument("--run", nargs="*", default=[], help="more run folders (same recipe)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for training and cost")
    ap.add_argument("--only", nargs="*", default=["planted", "trained", "cost_cpu"])
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    saved = RESULTS / "null_calibration.json"
    out: dict[str, Any] = {"alpha": ALPHA, "sections_done": []}
    if saved.is_file():  # keep the sections this run does not redo
        kept = json.loads(saved.read_text())
        out |= {k: kept[k] for k in ("planted", "trained", "cost_cpu") if k in kept}
        out["sections_done"] = [s for s in kept.get("sections_done", []) if s not in args.only]

    def save(section: str) -> None:
        out["sections_done"].append(section)
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
        write_result("null_calibration", out)

    if "planted" in args.only:
        out["planted"] = planted(args.n_planted)
        cols = ["head", "planted", "must_be", "over_floor_share", "rate", "rate_rule_before"]
        print_table(out["planted"]["rows"], cols)
        p = out["planted"]
        print(
            f"planted negatives: wrong role {p['fp_rate_negatives']:.1%} (rule before "
            f"{p['fp_rate_negatives_rule_before']:.1%}); positives found "
            f"{p['power_positives']:.1%} (rule before {p['power_positives_rule_before']:.1%})"
        )
        save("planted")
    if "trained" in args.only:
        torch.set_num_threads(args.threads)
        runs = trained_runs(Path(args.runs_dir), args.train, args.steps, args.run)
        torch.set_num_threads(1)
        out["trained"] = trained(runs)
        out["trained"]["recipe"] = {
            "preset": "cpu",
            "runs": [{"folder": str(r.path), "train": r.settings.get("train")} for r in runs],
        }
        tr = out["trained"]
        for r in tr["runs"]:
            print(f"{r['run']}: now {r['roles']['new']}; before {r['roles']['rule_before']}")
        print(
            f"1-layer heads with the induction role: {tr['one_layer_induction_roles']} of "
            f"{tr['one_layer_heads']}; repeat scores on a no-repeat probe: "
            f"{tr['no_repeat_probe_fp_share']:.1%} of {tr['no_repeat_probe_tests']} tests p <= 0.05"
        )
        save("trained")
    if "cost_cpu" in args.only:
        out["cost_cpu"] = cost_cpu(args.threads)
        print_table(out["cost_cpu"], list(out["cost_cpu"][0]))
        save("cost_cpu")


if __name__ == "__main__":
    main()
