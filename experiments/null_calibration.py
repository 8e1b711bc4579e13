"""Do head roles discriminate? False positives on planted negatives and on trained heads that
cannot have a role, power on planted positives, and the cost of discovery on the cpu preset, the
specificity test beside the rule it replaces, in one run.

1. **Planted heads** (``tests/planting/heads.py``: hand-built heads, each almost but not quite a
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
3. **Boundary** (``--only boundary``): the rejection rate of the specificity test's rival
   comparison exactly at its null's boundary, "the key holds c times the strongest rival". For
   every (head, score) of ``--boundary-instances`` noisy planted models and of the trained runs
   whose key and strongest rival both hold attention (means >= 0.1 and >= 0.05 per query), of
   as many planted models whose heads 0.2-0.6 and 1.1, 1.2, 1.5, 1.6 put 2/3 of their attention
   on the score's key and 1/3 on another (near or far; key-token noise std 0.5-2), the
   per-row sums of a large probe (``--boundary-rows`` rows) form a pool, and ``c`` is the pool's
   own ratio (sum at the key / sum at the rival): drawing rows from the pool with replacement,
   the mean difference ``key - c x rival`` is exactly 0. Each test draws 64 rows (discovery's
   default), and runs the sign flip (the test before) and the studentized bootstrap (now) at
   ratio ``c`` with 9,999 draws; the share with p <= 0.05 is the rejection rate at nominal 5%.
4. **Cost** of discovery on the cpu preset's models (1, 2, 3, 8 layers; random init, the cost does
   not depend on the weights), one after the other in this process: the specificity test (the
   default), and the rule before (25 untrained models: nothing cached, then cached). CPU seconds
   and the load average are recorded: the machine is shared.

The calibration of the untrained-vs-untrained null is gone from here: untrained models are
exchangeable with each other, so it held by construction (its arithmetic is a unit test).

Run::

    .venv/bin/python experiments/null_calibration.py [--n-planted 40] [--train 1:0 2:0] [--threads 2]
        [--only planted trained boundary cost_cpu] [--boundary-instances 4]

It prints tables and writes ``experiments/results/null_calibration.json`` after each section (a
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
sys.path.insert(0, str(ROOT / "tests"))  # the planting kit, the letters codec

sys.path.insert(0, str(ROOT / "benchmarks"))  # _common
from _common import print_table, results_dir, write_result  # noqa: E402

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
    tests = nulls.untrained_tests(model, batch, observed, untrained)
    scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
    return classify(scores, tests.significant(ALPHA))


#: The rule before runs on the first OLD_RULE_INSTANCES planted instances, against OLD_RULE_MODELS
#: untrained models (a pool of 40 per layer, smallest p 1/41: the planted heads are far above
#: every untrained head either way); the machine is shared and this is the slow part.
OLD_RULE_INSTANCES, OLD_RULE_MODELS = 8, 5


def planted(n: int) -> dict[str, Any]:
    """Planted heads: right and wrong roles per head over ``n`` noisy instances, new and old."""
    from planting import letters_codec
    from planting.heads import CFG, PLANTED, planted_model

    from interp_toolkit.heads.discovery import DiscoveryOptions, discover_heads
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
        rep = discover_heads(model, codec, DiscoveryOptions(seed=i))
        both = [("new", rep.roles)]
        if i < OLD_RULE_INSTANCES:
            batch = rep.batch
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
    from interp_toolkit.files.serialize import to_json
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.heads.repeats import non_repeating_like
    from interp_toolkit.heads.scorer import row_scores
    from interp_toolkit.heads.specificity import comparisons_of, specificity_tests

    out_runs, one_layer_heads, one_layer_induction, one_layer_sig = [], 0, 0, 0
    no_repeat_tests, no_repeat_sig = 0, 0
    for run in runs:
        model, codec, cfg = run.model, run.codec, run.model_cfg
        rep = discover_heads(model, codec, model_cfg=cfg)
        batch = rep.batch
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
                    str(HeadId(ly, h)): to_json(rep.role_reason((ly, h)))
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


def _pools(model: Any, codec: Any, n_rows: int, seed: int, label: str) -> list[dict[str, Any]]:
    """Per (head, score) whose key and strongest rival both hold attention: the per-row sums at
    the key and at the rival on a ``n_rows``-row discovery probe."""
    from interp_toolkit.heads.discovery import DiscoveryOptions, discovery_batch
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.heads.scorer import row_pairs

    batch = discovery_batch(model, codec, DiscoveryOptions(n_seqs=n_rows, seed=seed))
    _, pairs = row_pairs(model, batch)
    out = []
    for kind, named in pairs.items():
        for pair in named.values():
            n_q = float(pair.counts.sum())
            tm, rm = pair.target.sum(0) / n_q, pair.rival.sum(0) / n_q
            for ly, h in ((tm >= 0.1) & (rm >= 0.05)).nonzero().tolist():
                t, r = pair.target[:, ly, h], pair.rival[:, ly, h]
                c = float(t.sum() / r.sum())
                if float((t - c * r).std()) < 1e-6 * float(t.abs().mean()):
                    continue  # a noiseless positional head: every row the same, no test
                out.append(
                    {
                        "source": label,
                        "head": str(HeadId(ly, h)),
                        "score": kind,
                        "ratio": c,
                        "target": t,
                        "rival": r,
                        "counts": pair.counts,
                    }
                )
    return out


def _two_to_one(sharpness: float, noise: float, seed: int) -> Any:
    """Planted heads at the boundary by construction: 2/3 of the attention at the score's key and
    1/3 at another (q-2, q-3, q-4, q-6, q-9 for previous-token; q-Δ+2, q-4, q-7, q-2 beside the
    induction key), each with key-token noise of std ``noise`` (seeded)."""
    from planting import BLOCK, Head
    from planting.heads import induction_split, planted_model, positional_rows

    from interp_toolkit.heads.registry import HeadId

    model = planted_model(seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for h, far in zip(range(2, 7), (2, 3, 4, 6, 9), strict=True):
            head = Head(model, HeadId(0, h))
            positional_rows(head, {1: 2 / 3, far: 1 / 3}, sharpness, 0)
            head.key_noise(torch.randn(BLOCK, generator=gen) * noise)
        for h, far in zip((1, 2, 5, 6), (None, 4, 7, 2), strict=True):
            head = Head(model, HeadId(1, h))
            induction_split(head, 2 / 3, far=far, sharpness=sharpness)
            head.key_noise(torch.randn(BLOCK, generator=gen) * noise)
    return model


def boundary(n_instances: int, n_rows: int, runs: list[Any], n_tests: int) -> dict[str, Any]:
    """The rival comparison's rejection rate at its boundary, sign flip (before) and studentized
    bootstrap (now): module docstring, section 3."""
    from planting import letters_codec
    from planting.heads import planted_model

    from interp_toolkit.heads.scorer import RowPair
    from interp_toolkit.heads.specificity import Pair, specificity_tests

    codec = letters_codec()
    gen = torch.Generator().manual_seed(4242)
    pools: list[dict[str, Any]] = []
    for i in range(n_instances):
        sharp = 4.0 + 8.0 * float(torch.rand((), generator=gen))
        noise = 0.5 + float(torch.rand((), generator=gen))
        model = planted_model(sharpness=sharp, noise=noise, seed=500 + i)
        pools += _pools(model, codec, n_rows, 500 + i, f"planted {i}")
    for i in range(n_instances):
        sharp = 4.0 + 8.0 * float(torch.rand((), generator=gen))
        noise = 0.5 + 1.5 * float(torch.rand((), generator=gen))
        model = _two_to_one(sharp, noise, 700 + i)
        pools += _pools(model, codec, n_rows, 700 + i, f"planted 2:1 {i}")
    for run in runs:
        pools += _pools(run.model, run.codec, n_rows, 77, run.name)
    reps = max(1, -(-n_tests // len(pools)))
    rows, n = [], 64
    for j, pool in enumerate(pools):
        idx = torch.randint(0, n_rows, (reps, n), generator=gen)
        t, r, c = pool["target"], pool["rival"], pool["ratio"]
        target = t[idx].T[:, :, None]  # [row, rep, 1]: each rep one test
        rival = r[idx].T[:, :, None]
        counts = pool["counts"][idx[0]]
        before = Pair(target, rival, counts, c)  # the sign flip
        now = Pair.of(RowPair(target, rival, counts), c)
        res = specificity_tests({"b": {"x": before}, "n": {"x": now}}, 9999, seed=j)
        pool["p_before"] = res.p_value["b"].flatten()
        pool["p_now"] = res.p_value["n"].flatten()
        d = t - c * r
        skew = float(((d - d.mean()) ** 3).mean() / d.var(unbiased=False) ** 1.5)
        rows.append(
            {
                "source": pool["source"],
                "head": pool["head"],
                "score": pool["score"],
                "ratio": round(c, 3),
                "skew": round(skew, 3),
                "tests": reps,
                "rejected_before": int((pool["p_before"] <= ALPHA).sum()),
                "rejected_now": int((pool["p_now"] <= ALPHA).sum()),
            }
        )
    total = sum(r["tests"] for r in rows)

    def rate(key: str, keep: Any = lambda _r: True) -> dict[str, Any]:
        sel = [r for r in rows if keep(r)]
        k, m = sum(r[key] for r in sel), sum(r["tests"] for r in sel)
        iv = _wilson(k, m)
        return {"rejected": k, "tests": m, "rate": k / max(1, m), "wilson95": iv}

    groups = {
        "all": lambda _r: True,
        "planted": lambda r: r["source"].startswith("planted") and "2:1" not in r["source"],
        "planted 2:1": lambda r: "2:1" in r["source"],
        "trained": lambda r: not r["source"].startswith("planted"),
        "skew < -0.5": lambda r: r["skew"] < -0.5,
        "-0.5 <= skew < 0.5": lambda r: -0.5 <= r["skew"] < 0.5,
        "skew >= 0.5": lambda r: r["skew"] >= 0.5,
    }
    return {
        "nominal": ALPHA,
        "rows_per_test": n,
        "draws": 9999,
        "pool_rows": n_rows,
        "pools": len(pools),
        "tests": total,
        "rates": {
            g: {
                "before (sign flip)": rate("rejected_before", f),
                "now (studentized bootstrap)": rate("rejected_now", f),
            }
            for g, f in groups.items()
        },
        "per_pool": rows,
    }


def _wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


def cost_cpu(threads: int) -> list[dict[str, Any]]:
    """Discovery on the cpu preset's models, new and old, one after the other in this process."""
    from analysis_helpers import tiny_codec

    from interp_toolkit.heads import untrained
    from interp_toolkit.heads.discovery import discover_heads, discovery_batch
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
            batch = discovery_batch(m, codec)
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
    ap.add_argument("--only", nargs="*", default=["planted", "trained", "boundary", "cost_cpu"])
    ap.add_argument("--boundary-instances", type=int, default=4)
    ap.add_argument("--boundary-rows", type=int, default=2048)
    ap.add_argument("--boundary-tests", type=int, default=10000)
    ap.add_argument("--out", default=None, help="result JSON (default: results/ beside this)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    saved = Path(args.out) if args.out else results_dir() / "null_calibration.json"
    out: dict[str, Any] = {"alpha": ALPHA, "sections_done": []}
    if saved.is_file():  # keep the sections this run does not redo
        kept = json.loads(saved.read_text())
        out |= {k: kept[k] for k in ("planted", "trained", "boundary", "cost_cpu") if k in kept}
        out["sections_done"] = [s for s in kept.get("sections_done", []) if s not in args.only]

    def save(section: str) -> None:
        out["sections_done"].append(section)
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
        write_result("null_calibration", out, str(saved))

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
    if "boundary" in args.only:
        runs = trained_runs(Path(args.runs_dir), args.train, args.steps, args.run)
        out["boundary"] = bd = boundary(
            args.boundary_instances, args.boundary_rows, runs, args.boundary_tests
        )
        for g, r in bd["rates"].items():
            print(g, {k: f"{v['rate']:.2%} of {v['tests']}" for k, v in r.items()})
        save("boundary")
    if "cost_cpu" in args.only:
        out["cost_cpu"] = cost_cpu(args.threads)
        print_table(out["cost_cpu"], list(out["cost_cpu"][0]))
        save("cost_cpu")


if __name__ == "__main__":
    main()
