"""Per-head null tests: calibration on untrained models, power on hand-built and trained heads,
and the cost on the cpu preset, side by side with the pooled τ they replace.

1. **Calibration.** In an untrained model no head has any role, so the share of (head, score)
   pairs with p <= 0.05 must be about 5% (target 5% +- 2%) and no head may get a role. Each model
   is tested by the registry's nulls (``nulls.draw_nulls``) with the *other* models of the set as
   its untrained models (leave-one-out: ``K = M - 1`` untrained models, the same statistic
   ``discover_heads`` computes with ``K`` fresh ones, at ``1/K`` of the cost).
   - cpu shape (the cpu preset's 2-layer model, seeds 100...): ``--n-cpu`` models (default 26, so
     ``K = 25``, as discovery's default for 4 heads), the discovery probe (64 x 31 tokens); and
     the untrained models on the first 16 rows only.
   - GPT-2-small shape (12 x 12 heads, d_model 768, vocabulary 50,257, Hugging Face's init,
     n_positions 64): ``--n-gpt2`` models (default 6, ``K = 5``), a smaller probe: 32 rows x 64
     tokens (period 28, prefix 0..7); and on the first 16 rows (``heads gpt2``'s default).
   Shown beside: the ``no_repeats`` swap test alone (repeat scores), and on the cpu shape the
   pooled τ used before (``benchmarks/_pooled_tau.py``): the share of heads above it.
2. **Power.** Hand-built heads on cpu-shaped models (a previous-token head gets its role at the
   smallest p its null allows and no other head gets one; a current-token and a first-token head
   are significant), and trained runs (``--run``, e.g. the cpu preset's 2-layer model, seed 2, 700
   steps): every head whose deciding score reaches the 0.4 effect-size floor must be significant.
   Roles are listed with the value-weighted and the plain induction score deciding, with and
   without Benjamini-Hochberg.
3. **Cost** of discovery on the cpu preset's models (1, 2, 3, 8 layers; untrained, the cost does
   not depend on the weights), in this process, one after the other: the pooled τ (shuffled null
   x 4), the per-head nulls with nothing cached, and again (untrained rows cached).

Run::

    .venv/bin/python benchmarks/null_calibration.py [--run RUN ...] [--threads 2]

It prints tables and writes ``benchmarks/results/null_calibration.json`` after each section
(cpu calibration, power, cost, GPT-2 calibration: the slowest last); ``--resume`` starts from
that file and runs only the sections it lacks.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # analysis_helpers: the tiny codec, hand-built heads

from _common import RESULTS, print_table, write_result  # noqa: E402
from _pooled_tau import pooled_tau_discovery  # noqa: E402

ALPHA = 0.05
GPT2_PROBE = {"n_seqs": 32, "period": 28, "prefix_max": 7}
SUB_ROWS = 16


def _cpu_cfg(n_layers: int = 2) -> Any:
    from interp_toolkit.presets import get_preset

    return get_preset("cpu", n_layers).model


def _codec() -> Any:
    from analysis_helpers import tiny_codec

    return tiny_codec(1024)


def _tests(model: Any, batch: Any, others: Any, null_of: dict[str, str]) -> Any:
    from interp_toolkit.analysis import nulls
    from interp_toolkit.analysis.stripes import row_scores

    ctx = nulls.NullContext(model, batch, row_scores(model, batch), others, n_draws=1999)
    return nulls.run_tests(nulls.draw_nulls(ctx, null_of), null_of)


def _roles(scores: Any, tests: Any, induction_score: str = "vw", fdr: bool = False) -> list[str]:
    from interp_toolkit.analysis.heads import DEFAULT_FLOORS, NO_ROLE, HeadId, deciders
    from interp_toolkit.analysis.scores import classify

    roles = classify(
        scores, tests.significant(ALPHA, fdr), DEFAULT_FLOORS, deciders(induction_score)
    )
    return [
        f"{HeadId(ly, h)}:{r}"
        for ly, row in enumerate(roles)
        for h, r in enumerate(row)
        if r != NO_ROLE
    ]


def leave_one_out(
    shape: str, seeds: list[int], make: Any, base: Any, batch: Any, rows: int | None
) -> dict[str, Any]:
    """Every model's p-values against the others as its untrained models; FP share per score."""
    from interp_toolkit.analysis.heads import SCORES
    from interp_toolkit.analysis.stripes import HeadScores, row_scores

    null_of = {s.name: s.null for s in SCORES}
    swap = {s.name: "no_repeats" for s in SCORES if s.null == "repeats_vs_untrained"}
    ps: dict[str, list[torch.Tensor]] = {k: [] for k in null_of}
    ps_swap: dict[str, list[torch.Tensor]] = {k: [] for k in swap}
    labelled: list[str] = []
    n_null = {}
    for i, seed in enumerate(seeds):
        model = make(seed)
        others = dataclasses.replace(base, seeds=tuple(seeds[:i] + seeds[i + 1 :]), rows=rows)
        tests = _tests(model, batch, others, null_of)
        for k in null_of:
            ps[k].append(tests.p_value[k])
        n_null = tests.n_null
        if rows is None:
            swapped = _tests(model, batch, others, swap)
            for k in swap:
                ps_swap[k].append(swapped.p_value[k])
        scores = HeadScores({k: r.mean().float() for k, r in row_scores(model, batch).items()})
        for induction_score in ("vw", "plain"):
            labelled += [f"{seed}/{r}" for r in _roles(scores, tests, induction_score)]
        del model
    rows_out = []
    for k in null_of:
        p = torch.stack(ps[k])
        row = {
            "shape": shape,
            "untrained_rows": rows or batch.n_seqs,
            "score": k,
            "null": null_of[k],
            "n_null": n_null[k],
            "n_tests": p.numel(),
            "fp_share": float((p <= ALPHA).double().mean()),
            "share_p_le_0.5": float((p <= 0.5).double().mean()),
        }
        if ps_swap.get(k):
            row["fp_share_no_repeats_alone"] = float(
                (torch.stack(ps_swap[k]) <= ALPHA).double().mean()
            )
        rows_out.append(row)
    return {"n_models": len(seeds), "rows": rows_out, "heads_with_role": labelled}


def calibrate_cpu(n: int) -> dict[str, Any]:
    from interp_toolkit.analysis.heads import SCORE_KINDS
    from interp_toolkit.analysis.scores import discovery_probe
    from interp_toolkit.analysis.untrained import toy_untrained
    from interp_toolkit.models import build_model

    cfg, codec = _cpu_cfg(), _codec()
    seeds = [100 + i for i in range(n)]

    def make(seed: int) -> Any:
        return build_model(cfg.replace(seed=seed))

    batch = discovery_probe(make(0), codec)
    base = toy_untrained(cfg, seeds)
    out = {
        "all_rows": leave_one_out("cpu", seeds, make, base, batch, None),
        "sub_rows": leave_one_out("cpu", seeds, make, base, batch, SUB_ROWS),
        "probe": batch.describe(),
    }
    above = dict.fromkeys(SCORE_KINDS, 0)
    roles = 0
    for seed in seeds:
        old = pooled_tau_discovery(make(seed), codec, n_null=4)
        for k in SCORE_KINDS:
            above[k] += int(old["above"][k].sum())
        roles += sum(r != "none" for row in old["roles"] for r in row)
    n_heads = n * cfg.n_layers * cfg.n_heads
    for row in out["all_rows"]["rows"]:
        row["share_above_pooled_tau"] = above[row["score"]] / n_heads
    out["pooled_tau_heads_with_role"] = roles
    return out


def calibrate_gpt2(n: int) -> dict[str, Any]:
    from transformer_lens import TransformerBridge
    from transformers import GPT2Config, GPT2LMHeadModel

    from interp_toolkit.analysis.scores import discovery_probe
    from interp_toolkit.analysis.untrained import untrained_models
    from interp_toolkit.targets.gpt2 import offline_gpt2_tokenizer
    from interp_toolkit.tokenizer import GPT2Codec

    config = GPT2Config(n_positions=1 + GPT2_PROBE["prefix_max"] + 2 * GPT2_PROBE["period"])
    with offline_gpt2_tokenizer() as tok:
        first = TransformerBridge.boot_transformers(
            "gpt2-small-shape", hf_model=GPT2LMHeadModel(config), tokenizer=tok
        ).eval()
        base = untrained_models(first, n_models=n)
        assert base is not None
        batch = discovery_probe(first, GPT2Codec(), **GPT2_PROBE)
        del first
        seeds = list(base.seeds)
        out = {
            "all_rows": leave_one_out("gpt2-small", seeds, base.make, base, batch, None),
            "sub_rows": leave_one_out("gpt2-small", seeds, base.make, base, batch, SUB_ROWS),
        }
    out["probe"] = batch.describe()
    return out


def power_hand_built(n: int) -> dict[str, Any]:
    """Hand-built heads on cpu-shaped models: found, and nothing else labelled."""
    from analysis_helpers import make_first_token_head, make_offset_head, make_prev_token_head

    from interp_toolkit.analysis.nulls import smallest_p
    from interp_toolkit.analysis.scores import discover_heads
    from interp_toolkit.models import build_model

    rows = []
    for i in range(n):
        cfg = _cpu_cfg().replace(seed=300 + i)
        model = build_model(cfg)
        prev, cur, first = (0, i % 4), (0, (i + 1) % 4), (1, (i + 2) % 4)
        make_prev_token_head(model, *prev)
        make_offset_head(model, *cur, offset=0)
        make_first_token_head(model, *first)
        rep = discover_heads(model, _codec(), seed=i, model_cfg=cfg)
        labelled = {
            (ly, h): r for ly, row in enumerate(rep.roles) for h, r in enumerate(row) if r != "none"
        }
        p = rep.tests.p_value
        rows.append(
            {
                "model_seed": cfg.seed,
                "previous_token_head": f"{prev[0]}.{prev[1]}",
                "score": round(float(rep.scores.previous_token[prev]), 3),
                "p_value": float(p["previous_token"][prev]),
                "smallest_p": smallest_p(rep.tests.n_null["previous_token"]),
                "found": labelled.get(prev) == "previous-token",
                "other_heads_labelled": len(labelled) - int(prev in labelled),
                "current_token_p": float(p["current_token"][cur]),
                "first_token_p": float(p["first_token"][first]),
            }
        )
    found = sum(r["found"] and r["other_heads_labelled"] == 0 for r in rows)
    sig = sum(r["current_token_p"] <= ALPHA and r["first_token_p"] <= ALPHA for r in rows)
    return {"rows": rows, "power": found / n, "current_first_significant": sig / n}


def power_trained(run_path: str) -> dict[str, Any]:
    """A trained run: heads over the floor are significant; roles per switch and with BH."""
    from interp_toolkit.analysis.heads import DEFAULT_FLOORS, INDUCTION_SCORES, HeadId
    from interp_toolkit.analysis.scores import discover_heads
    from interp_toolkit.runs import load_run

    run = load_run(run_path)
    rep = discover_heads(run.model, run.codec, model_cfg=run.model_cfg)
    t = rep.tests
    over, found = [], []
    for kind in ("previous_token", "duplicate_token", *INDUCTION_SCORES.values()):
        for ly, h in (rep.scores.get(kind) >= DEFAULT_FLOORS[kind]).nonzero().tolist():
            over.append(f"{HeadId(ly, h)}:{kind}")
            if float(t.p_value[kind][ly, h]) <= ALPHA:
                found.append(f"{HeadId(ly, h)}:{kind}")
    return {
        "run": str(run_path),
        "over_floor": over,
        "significant_over_floor": found,
        "power": len(found) / max(1, len(over)),
        "roles": {
            f"{score}{' +BH' if fdr else ''}": _roles(rep.scores, t, score, fdr)
            for score in INDUCTION_SCORES
            for fdr in (False, True)
        },
        "heads": {
            str(HeadId(ly, h)): {
                k: {
                    "score": round(float(rep.scores.get(k)[ly, h]), 3),
                    "p": float(t.p_value[k][ly, h]),
                }
                for k in t.p_value
            }
            for ly in range(rep.scores.n_layers)
            for h in range(rep.scores.n_heads)
        },
    }


def cost_cpu(threads: int) -> list[dict[str, Any]]:
    """Discovery on the cpu preset's models, old and new, one after the other in this process."""
    from interp_toolkit.analysis import untrained
    from interp_toolkit.analysis.scores import discover_heads
    from interp_toolkit.models import build_model

    torch.set_num_threads(threads)
    codec, rows = _codec(), []
    for n_layers in (1, 2, 3, 8):
        cfg = _cpu_cfg(n_layers)
        model = build_model(cfg)
        untrained._CACHE.clear()
        cases = {
            "pooled tau (shuffled null x4), before": lambda m=model: pooled_tau_discovery(m, codec),
            "per-head nulls, nothing cached": lambda m=model, c=cfg: discover_heads(
                m, codec, model_cfg=c
            ),
            "per-head nulls, untrained rows cached": lambda m=model, c=cfg: discover_heads(
                m, codec, model_cfg=c
            ),
        }
        for name, run in cases.items():
            t0, c0 = time.perf_counter(), time.process_time()
            run()
            rows.append(
                {
                    "layers": n_layers,
                    "case": name,
                    "seconds": round(time.perf_counter() - t0, 2),
                    "cpu_seconds": round(time.process_time() - c0, 2),
                    "threads": threads,
                }
            )
    torch.set_num_threads(1)
    return rows


FP_COLUMNS = [
    "shape",
    "untrained_rows",
    "score",
    "null",
    "n_null",
    "n_tests",
    "fp_share",
    "share_p_le_0.5",
    "fp_share_no_repeats_alone",
    "share_above_pooled_tau",
]
SHAPES = ("cpu", "gpt2")


def summarise(out: dict[str, Any]) -> None:
    """The false-positive table over the shapes measured so far, and the verdicts."""
    done = [s for s in SHAPES if s in out]
    fp = [r for s in done for part in ("all_rows", "sub_rows") for r in out[s][part]["rows"]]
    print_table(fp, FP_COLUMNS)
    out["fp_share_in_target"] = all(0.03 <= r["fp_share"] <= 0.07 for r in fp)
    out["heads_with_role_on_untrained"] = sum(
        len(out[s][p]["heads_with_role"]) for s in done for p in ("all_rows", "sub_rows")
    )
    print(
        f"{', '.join(done)}: FP share within 5% +- 2% for every row: {out['fp_share_in_target']}; "
        f"heads with a role on untrained models: {out['heads_with_role_on_untrained']} "
        f"(pooled tau: {out['cpu']['pooled_tau_heads_with_role']} on the cpu models)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs="*", default=[], help="trained run folders (power)")
    ap.add_argument("--n-cpu", type=int, default=26)
    ap.add_argument("--n-gpt2", type=int, default=6)
    ap.add_argument("--n-hand-built", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the cost cases")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="start from benchmarks/results/null_calibration.json and run only the sections "
        "it does not have (e.g. the GPT-2 calibration after an interrupted run)",
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"alpha": ALPHA, "target_fp_share": [0.03, 0.07]}
    saved = RESULTS / "null_calibration.json"
    if args.resume and saved.is_file():
        kept = json.loads(saved.read_text())
        out |= {k: v for k, v in kept.items() if k not in ("benchmark", "machine", "wall_s")}
        out["resumed_from"] = {"machine": kept.get("machine"), "wall_s": kept.get("wall_s")}
    done = set(out.get("sections_done", []))

    def save(section: str) -> None:  # after every section: a slow GPT-2 part loses nothing
        out["sections_done"] = [*out.get("sections_done", []), section]
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        write_result("null_calibration", out)

    if "cpu" not in done:
        out["cpu"] = calibrate_cpu(args.n_cpu)
        summarise(out)
        save("cpu")
    if "power" not in done:
        out["hand_built"] = power_hand_built(args.n_hand_built)
        print_table(out["hand_built"]["rows"], list(out["hand_built"]["rows"][0]))
        out["trained"] = [power_trained(r) for r in args.run]
        for tr in out["trained"]:
            print(
                f"{tr['run']}: over floor {tr['over_floor']}; "
                f"significant {tr['significant_over_floor']}"
            )
            for key, roles in tr["roles"].items():
                print(f"  roles, {key} deciding induction: {roles}")
        save("power")
    if "cost_cpu" not in done:
        out["cost_cpu"] = cost_cpu(args.threads)
        print_table(out["cost_cpu"], list(out["cost_cpu"][0]))
        save("cost_cpu")
    if "gpt2" not in done:
        out["gpt2"] = calibrate_gpt2(args.n_gpt2)
        summarise(out)
        save("gpt2")


if __name__ == "__main__":
    main()
