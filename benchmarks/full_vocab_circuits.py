"""Full-vocabulary top-1/top-5 copy accuracy for every head of a GPT-2-small-shaped model: the
exact fast path (:mod:`interp_toolkit.weights.self_ranks`) against the old chunked path, in one run.

Model: 12 layers x 12 heads, d_model 768, d_head 64, vocab 50,257, attention only, random init
(seed 0), built by ``interp_toolkit.models.build.build_model``. Cases (each in a fresh child process):

- ``fast_full``: :func:`copying_scores` (144 heads) and :func:`copy_accuracy` with k = 1, 5 for
  all 144 heads x 50,257 source tokens: the full case, measured. Goal: <= 15 min, peak <= 2 GiB.
- ``old_subset``: the old path (``old_copy_ranks`` below, the code this replaced: row chunks of
  1,024 x V float32 logits, gather, compare) on the heads of the first ``LAYERS`` layers x
  ``ROWS`` sampled source tokens. Its time for the full case is **extrapolated** by flop count,
  as the old benchmark did; it was not run.
- ``fast_subset``: the fast path on the same heads and rows. Its capped ranks are compared row
  by row with the old path's and with a float64 dense computation of the same rows (which
  counts ties against the token, as the fast path does; ties do not occur in random weights).
- ``copier``: the fast path's worst case. ``W_U = W_Eᵀ`` and two heads whose OV circuit is the
  identity on a 64-dim subspace (W_E's top singular directions; a random subspace), so almost
  every token copies itself and no row is decided early: the fast path over the full vocabulary
  for those 2 heads, and the old path on ``ROWS`` rows of the same heads (extrapolated).

``--candidates``: bf16 candidates against float32 ones and against the code this change started
from (``--baseline``, a commit; its ``interp_toolkit`` is extracted with ``git archive``), side by
side: each case in its own child process, alternating, ``--repeats`` times, on the heads of the
first ``--subset-layers`` layers x all 50,257 source tokens; the capped ranks (cap 5) of every
head must be identical across the three (a digest of all of them is compared). The full case's
time is extrapolated by the head count (heads of random init cost alike: see ``fast_full``). It
writes ``benchmarks/results/full_vocab_circuits_bf16.json``.

Peak memory as in ``analysis_cost.py``: the child resets the kernel's high-water mark after
building the model and reads ``VmHWM`` after the case. Run (``--threads 2`` is the default)::

    .venv/bin/python benchmarks/full_vocab_circuits.py [--threads N] [--only CASE ...]
    .venv/bin/python benchmarks/full_vocab_circuits.py --candidates [--subset-layers 1]

It prints a table and writes ``benchmarks/results/full_vocab_circuits.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_result  # noqa: E402
from analysis_cost import GIB, MODEL_12L, _build_model, _reset_peak, _status_kib  # noqa: E402

LAYERS = 2  # old_subset / fast_subset: the heads of layers 0..LAYERS-1
ROWS = 1024  # sampled source tokens per head for the old path
OLD_CHUNK = 1024  # the old path's rows per chunk (its default)
GOAL = {"seconds": 15 * 60, "peak_rss_gib": 2.0}


def old_copy_ranks(model: Any, layer: int, head: int, rows: Any, chunk: int = OLD_CHUNK) -> Any:
    """The replaced implementation (interp_toolkit before this benchmark), verbatim in effect:
    the number of logits strictly larger than the token's own, row chunks of ``chunk`` x V."""
    import torch

    with torch.no_grad():
        attn = model.blocks[layer].attn
        right = (attn.W_O[head] @ model.W_U).detach()  # [D, V]
        w_v = attn.W_V[head].detach()
        w_e = model.W_E.detach()
        out = torch.empty(len(rows), dtype=torch.long)
        for lo in range(0, len(rows), chunk):
            idx = rows[lo : lo + chunk]
            logits = (w_e[idx] @ w_v) @ right  # [c, V]
            own = logits.gather(1, idx[:, None])
            out[lo : lo + chunk] = (logits > own).sum(1)
            del logits
    return out


def _old_flops(cfg: Any, n_rows: int) -> int:
    """Flops of the old path for one head: W_O W_U, then n_rows x V logits (as analysis_cost)."""
    d, dh, v = int(cfg.d_model), int(cfg.d_head), int(cfg.d_vocab)
    return 2 * dh * d * v + 2 * n_rows * dh * v


def _subset(model: Any) -> tuple[list[tuple[int, int]], Any]:
    import torch

    heads = [(la, h) for la in range(LAYERS) for h in range(int(model.cfg.n_heads))]
    gen = torch.Generator().manual_seed(0)
    rows = torch.randperm(int(model.cfg.d_vocab), generator=gen)[:ROWS]
    return heads, rows


def _time_old(model: Any, heads: list[tuple[int, int]], rows: Any) -> tuple[float, dict]:
    t0 = time.perf_counter()
    ranks = {f"{la}.{h}": old_copy_ranks(model, la, h, rows) for la, h in heads}
    return time.perf_counter() - t0, ranks


def _extrapolate(model: Any, seconds: float, n_heads: int, n_heads_full: int) -> float:
    v = int(model.cfg.d_vocab)
    return (
        seconds
        * (n_heads_full * _old_flops(model.cfg, v))
        / (n_heads * _old_flops(model.cfg, ROWS))
    )


def run_fast_full(model: Any) -> dict[str, Any]:
    from interp_toolkit.weights.circuits import copy_accuracy, copying_scores

    t0 = time.perf_counter()
    scores = copying_scores(model)
    t_copy = time.perf_counter() - t0
    t1 = time.perf_counter()
    acc = copy_accuracy(model, (1, 5))
    t_acc = time.perf_counter() - t1
    return {
        "seconds": t_copy + t_acc,
        "copying_seconds": t_copy,
        "accuracy_seconds": t_acc,
        "heads": int(acc[1].numel()),
        "rows_per_head": int(model.cfg.d_vocab),
        "top1_mean": float(acc[1].mean()),
        "top5_mean": float(acc[5].mean()),
        "top5_max": float(acc[5].max()),
        "copying_score_range": [float(scores.min()), float(scores.max())],
    }


def run_old_subset(model: Any) -> dict[str, Any]:
    heads, rows = _subset(model)
    secs, _ = _time_old(model, heads, rows)
    n_full = int(model.cfg.n_layers) * int(model.cfg.n_heads)
    return {
        "seconds": secs,
        "heads": len(heads),
        "rows_per_head": len(rows),
        "chunk": OLD_CHUNK,
        "extrapolated_full_seconds": _extrapolate(model, secs, len(heads), n_full),
    }


def _float64_ranks(model: Any, layer: int, head: int, rows: Any, cap: int) -> Any:
    """#{j != t : L[t, j] >= L[t, t]} in float64 from the same factors, capped."""
    import torch

    from interp_toolkit.weights.circuits import full_ov

    ov = full_ov(model, layer, head)
    a, b = ov.A.double(), ov.B.double()
    out = []
    for part in rows.split(128):
        full = a[part] @ b
        own = full.gather(1, part[:, None])
        out.append(((full >= own).sum(1) - 1).clamp_max(cap))
    return torch.cat(out)


def run_fast_subset(model: Any) -> dict[str, Any]:
    import torch

    from interp_toolkit.weights.circuits import copy_ranks

    heads, rows = _subset(model)
    t0 = time.perf_counter()
    fast = {f"{la}.{h}": copy_ranks(model, la, h, rows=rows) for la, h in heads}
    secs = time.perf_counter() - t0
    _, old = _time_old(model, heads, rows)
    same_old = sum(int(torch.equal(fast[k], old[k].clamp_max(5))) for k in fast)
    same_f64 = 0
    for la, h in heads:
        same_f64 += int(torch.equal(fast[f"{la}.{h}"], _float64_ranks(model, la, h, rows, 5)))
    return {
        "seconds": secs,
        "heads": len(heads),
        "rows_per_head": len(rows),
        "heads_equal_to_old_path": same_old,
        "heads_equal_to_float64_dense": same_f64,
        "rows_compared": len(heads) * len(rows),
    }


def _copier_model(model: Any) -> list[tuple[int, int]]:
    """Tie W_U = W_Eᵀ and make heads 0.0 and 0.1 identity-like on 64-dim subspaces."""
    import torch

    d_head = int(model.cfg.d_head)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        w_e = model.W_E.detach()
        model.unembed.original_component.weight.copy_(w_e)
        model.unembed.original_component.bias.zero_()
        top = torch.linalg.svd(w_e, full_matrices=False).Vh[:d_head].T  # [d, D]
        rand = torch.linalg.qr(torch.randn(w_e.shape[1], d_head, generator=gen)).Q
        for h, u in ((0, top), (1, rand)):
            rows = slice(h * d_head, (h + 1) * d_head)
            model.blocks[0].attn.v.original_component.weight[rows] = u.T
            model.blocks[0].attn.o.original_component.weight[:, rows] = u
    return [(0, 0), (0, 1)]


def run_copier(model: Any) -> dict[str, Any]:
    from interp_toolkit.weights.circuits import copy_accuracy

    heads = _copier_model(model)
    t0 = time.perf_counter()
    acc = copy_accuracy(model, (1, 5), heads=heads)
    secs = time.perf_counter() - t0
    _, rows = _subset(model)
    old_secs, _ = _time_old(model, heads, rows)
    return {
        "seconds": secs,
        "heads": len(heads),
        "rows_per_head": int(model.cfg.d_vocab),
        "top1": [float(acc[1][la, h]) for la, h in heads],
        "top5": [float(acc[5][la, h]) for la, h in heads],
        "old_seconds_on_subset": old_secs,
        "old_rows_per_head": len(rows),
        "old_extrapolated_seconds_same_heads": _extrapolate(
            model, old_secs, len(heads), len(heads)
        ),
    }


RUNNERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "fast_full": run_fast_full,
    "old_subset": run_old_subset,
    "fast_subset": run_fast_subset,
    "copier": run_copier,
}


def child(name: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    model = _build_model(MODEL_12L)
    rss_model = _status_kib("VmRSS") * 1024
    reset = _reset_peak()
    out = RUNNERS[name](model)
    peak = _status_kib("VmHWM") * 1024
    out.update(
        {
            "case": name,
            "rss_after_build_gib": rss_model / GIB,
            "peak_rss_gib": peak / GIB if reset else None,
            "peak_over_model_gib": (peak - rss_model) / GIB if reset else None,
        }
    )
    print("RESULT " + json.dumps(out))


def run_case(name: str, threads: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    cmd = [sys.executable, __file__, "--child", name, "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"case {name} failed:\n{proc.stderr[-3000:]}")


BASELINE = "8d78aa2"  # the commit the bf16 candidates were added to (issue 24)
CANDIDATE_CASES = ("baseline", "fp32", "bf16")


def child_heads(candidates: str, layers: int, threads: int) -> None:
    """Copy ranks (cap 5) of every head of the first ``layers`` layers over the full vocabulary:
    ``baseline`` with the extracted old code (no candidates argument), else with ``candidates``."""
    import hashlib

    import torch

    from interp_toolkit.weights.circuits import copy_ranks

    torch.set_num_threads(threads)
    model = _build_model(MODEL_12L)
    heads = [(la, h) for la in range(layers) for h in range(int(model.cfg.n_heads))]
    kw = {} if candidates == "baseline" else {"candidates": candidates}
    clock = time.process_time if threads == 1 else time.perf_counter  # as _flops.set_clock
    t0 = clock()
    ranks = [copy_ranks(model, la, h, **kw) for la, h in heads]
    seconds = clock() - t0
    flat = torch.cat(ranks)
    out = {
        "case": candidates,
        "seconds": seconds,
        "heads": len(heads),
        "seconds_per_head": seconds / len(heads),
        "ranks_digest": hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16],
        "top1_mean": float((flat < 1).float().mean()),
        "top5_mean": float((flat < 5).float().mean()),
        "load_avg_1min": os.getloadavg()[0],
    }
    print("RESULT " + json.dumps(out))


def run_candidates(args: argparse.Namespace) -> None:
    import statistics
    import tempfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as base:
        subprocess.run(
            f"git -C {root} archive {args.baseline} interp_toolkit | tar -x -C {base}",
            shell=True,
            check=True,
        )
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CANDIDATE_CASES}
        for _ in range(args.repeats):
            for case in CANDIDATE_CASES:
                path = base if case == "baseline" else str(root)
                env = dict(os.environ, PYTHONPATH=path)
                cmd = [
                    sys.executable,
                    __file__,
                    "--child-heads",
                    case,
                    "--subset-layers",
                    str(args.subset_layers),
                    "--threads",
                    str(args.threads),
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
                if not line:
                    raise RuntimeError(f"{case} failed:\n{proc.stderr[-3000:]}")
                runs[case].append(json.loads(line[-1][len("RESULT ") :]))
                print(case, runs[case][-1], flush=True)
    n_full = MODEL_12L["n_layers"] * MODEL_12L["n_heads"]
    med = {c: statistics.median(r["seconds_per_head"] for r in rs) for c, rs in runs.items()}
    digests = {c: {r["ranks_digest"] for r in rs} for c, rs in runs.items()}
    rows = [
        {
            "case": c,
            "heads x rows": f"{runs[c][0]['heads']} x {MODEL_12L['d_vocab']:,}",
            "s/head (median)": round(med[c], 3),
            "full 144 heads s (extrapolated)": round(med[c] * n_full, 1),
            "vs baseline": round(med["baseline"] / med[c], 3),
            "ranks digest": ",".join(sorted(digests[c])),
        }
        for c in CANDIDATE_CASES
    ]
    print_table(rows, list(rows[0]))
    same = len(set().union(*digests.values())) == 1
    print(f"ranks identical across {', '.join(CANDIDATE_CASES)}: {same}")
    loads = [r["load_avg_1min"] for rs in runs.values() for r in rs]
    write_result(
        "full_vocab_circuits_bf16",
        {
            "model": MODEL_12L,
            "threads": args.threads,
            "clock": "cpu" if args.threads == 1 else "wall",
            "baseline_commit": args.baseline,
            "subset_layers": args.subset_layers,
            "repeats": args.repeats,
            "rows": rows,
            "ranks_identical": same,
            "runs": runs,
            "load_avg_1min": {"min": min(loads), "max": max(loads)},
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child")
    ap.add_argument("--child-heads", choices=CANDIDATE_CASES)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=list(RUNNERS), help="run only these cases")
    ap.add_argument("--candidates", action="store_true", help="bf16 vs fp32 vs --baseline")
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--subset-layers", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.threads)
        return
    if args.child_heads:
        child_heads(args.child_heads, args.subset_layers, args.threads)
        return
    if args.candidates:
        run_candidates(args)
        return
    results = {}
    for name in args.only or list(RUNNERS):
        print(f"running {name} ...", flush=True)
        results[name] = run_case(name, args.threads)
    rows = [
        {
            "case": n,
            "heads x rows": f"{r['heads']} x {r['rows_per_head']:,}",
            "seconds": r["seconds"],
            "peak RSS GiB": r["peak_rss_gib"],
            "over model GiB": r["peak_over_model_gib"],
        }
        for n, r in results.items()
    ]
    print_table(rows, ["case", "heads x rows", "seconds", "peak RSS GiB", "over model GiB"])
    summary: dict[str, Any] = {}
    if "fast_full" in results:
        full = results["fast_full"]
        summary["full_case_seconds"] = full["seconds"]
        summary["full_case_peak_rss_gib"] = full["peak_rss_gib"]
        summary["goal_met"] = (
            full["seconds"] <= GOAL["seconds"] and full["peak_rss_gib"] <= GOAL["peak_rss_gib"]
        )
        if "old_subset" in results:
            old = results["old_subset"]["extrapolated_full_seconds"]
            summary["old_path_full_case_seconds_extrapolated"] = old
            summary["speedup_vs_old_extrapolated"] = old / full["seconds"]
    if "fast_subset" in results:
        sub = results["fast_subset"]
        summary["subset_heads_equal_to_old_path"] = (
            f"{sub['heads_equal_to_old_path']}/{sub['heads']}"
        )
        summary["subset_heads_equal_to_float64_dense"] = (
            f"{sub['heads_equal_to_float64_dense']}/{sub['heads']}"
        )
    if "copier" in results:
        cop = results["copier"]
        summary["copier_seconds_per_head"] = cop["seconds"] / cop["heads"]
        summary["copier_old_seconds_per_head_extrapolated"] = (
            cop["old_extrapolated_seconds_same_heads"] / cop["heads"]
        )
    print(json.dumps(summary, indent=2))
    write_result(
        "full_vocab_circuits",
        {
            "model": MODEL_12L,
            "threads": args.threads,
            "subset": {"layers": LAYERS, "rows": ROWS, "old_chunk": OLD_CHUNK},
            "goal": GOAL,
            "results": results,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
