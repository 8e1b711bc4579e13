"""Cost of the analysis layer on a 12-layer x 12-head, d_model 768 model (randomly initialised).

Cases (``CASES``; each runs in a fresh child process):

- ``scores``: :func:`interp_toolkit.heads.discovery.head_scores` on 64 sequences x 128 tokens
  (``[BOS] prefix(0..7) seg(60) seg(60) filler``). Hooks only ``hook_v``/``hook_pattern``, reduces
  each pattern on the fly, stops before the unembedding, in row chunks.
- ``scores_naive``: ``model.run_with_cache(tokens)`` with no names filter on the same 64 sequences
  (then the induction score from the cached patterns). Goal: ours <= 0.3x this case's peak.

Copying scores and full-vocabulary copy accuracy of every head (on the same model) are measured
by ``full_vocab_circuits.py``, which imports the model spec and the peak-memory helpers below.

Peak memory: the child builds the model, records its RSS, resets the kernel's high-water mark
(``/proc/self/clear_refs`` = 5), runs the case, and reads ``VmHWM``. ``peak_rss`` is the whole
process's peak during the case (model + Python + torch included); ``peak_over_model`` subtracts
the RSS right after the model was built. ``ru_maxrss`` (lifetime, including the build) is kept too.

More cases (e.g. GPT-2 small discovery) can be added to ``CASES`` with a runner in ``RUNNERS``.
Run::

    .venv/bin/python benchmarks/analysis_cost.py [--threads N] [--only NAME ...]

It prints a table and writes ``benchmarks/results/analysis_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "analysis_cost.json"
GIB = 2**30
MIB = 2**20

MODEL_12L = {
    "n_layers": 12,
    "d_model": 768,
    "n_heads": 12,
    "d_head": 64,
    "n_ctx": 128,
    "d_vocab": 50257,
    "seed": 0,
}
PROBE = {"n_seqs": 64, "period": 60, "prefix_max": 7, "low": 1000, "high": 20000, "bos_id": 50256}

#: name -> settings. ``runner`` names an entry of RUNNERS.
CASES: dict[str, dict[str, Any]] = {
    "scores": {"runner": "scores", "model": MODEL_12L, "probe": PROBE},
    "scores_naive": {"runner": "scores_naive", "model": MODEL_12L, "probe": PROBE},
}


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _build_model(spec: dict[str, Any]) -> Any:
    from interp_toolkit.models.build import ModelConfig, build_model

    return build_model(ModelConfig(**spec))


def _probe(spec: dict[str, Any]) -> Any:
    from interp_toolkit.heads.repeats import repeated_tokens

    return repeated_tokens(
        spec["n_seqs"],
        spec["period"],
        low=spec["low"],
        high=spec["high"],
        bos_id=spec["bos_id"],
        prefix_max=spec["prefix_max"],
        seed=0,
    )


def run_scores(model: Any, case: dict[str, Any]) -> dict[str, Any]:
    from interp_toolkit.heads.discovery import head_scores

    batch = _probe(case["probe"])
    t0 = time.perf_counter()
    s = head_scores(model, batch)
    return {
        "seconds": time.perf_counter() - t0,
        "tokens": list(batch.tokens.shape),
        "max_induction": float(s.induction.max()),
    }


def run_scores_naive(model: Any, case: dict[str, Any]) -> dict[str, Any]:
    import torch

    batch = _probe(case["probe"])
    t0 = time.perf_counter()
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.tokens)
    p = batch.period
    n_q = p
    q = batch.starts[:, None] + p + torch.arange(n_q)[None, :]
    b = torch.arange(batch.tokens.shape[0])[:, None]
    ind = [
        cache[f"blocks.{la}.attn.hook_pattern"][b, :, q, q - p + 1].mean((0, 1)) for la in range(12)
    ]
    secs = time.perf_counter() - t0
    n_cached = len(cache)
    cached_bytes = sum(v.numel() * v.element_size() for v in cache.values())
    return {
        "seconds": secs,
        "tokens": list(batch.tokens.shape),
        "max_induction": float(torch.stack(ind).max()),
        "cached_hooks": n_cached,
        "cached_gib": cached_bytes / GIB,
    }


RUNNERS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "scores": run_scores,
    "scores_naive": run_scores_naive,
}


def child(name: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    case = CASES[name]
    t0 = time.perf_counter()
    model = _build_model(case["model"])
    build_s = time.perf_counter() - t0
    rss_model = _status_kib("VmRSS") * 1024
    reset = _reset_peak()
    out = RUNNERS[case["runner"]](model, case)
    peak = _status_kib("VmHWM") * 1024
    out.update(
        {
            "case": name,
            "build_seconds": build_s,
            "rss_after_build": rss_model,
            "peak_rss": peak if reset else None,
            "peak_over_model": (peak - rss_model) if reset else None,
            "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "hwm_reset": reset,
        }
    )
    print("RESULT " + json.dumps(out))


def run_case(name: str, threads: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run(
        [sys.executable, __file__, "--child", name, "--threads", str(threads)],
        capture_output=True,
        text=True,
        env=env,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"case {name} failed:\n{proc.stderr[-3000:]}")


def _gib(x: float | None) -> str:
    return "-" if x is None else f"{x / GIB:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="run only these cases")
    ap.add_argument(
        "--no-gpt2", action="store_true", help="skip the GPT-2-small-shaped discovery case"
    )
    args = ap.parse_args()
    if args.child:
        child(args.child, args.threads)
        return
    names = args.only or list(CASES)
    results = {}
    for name in names:
        print(f"running {name} ...", flush=True)
        results[name] = run_case(name, args.threads)
    gpt2_rows: dict[str, Any] = {}
    if not args.no_gpt2:
        # GPT-2-small shape (random init, saved and loaded through interp_toolkit.runs.hf.load):
        # full discovery on 64 x 128 tokens; see gpt2_discovery_cost.py for the cases.
        import gpt2_discovery_cost

        print("running the GPT-2-small-shaped discovery cases ...", flush=True)
        gpt2_rows = gpt2_discovery_cost.run_all(args.threads)
        gpt2_discovery_cost._print_and_save(gpt2_rows)
    summary: dict[str, Any] = {}
    if "scores" in results and "scores_naive" in results:
        ours, naive = results["scores"], results["scores_naive"]
        summary["scores_peak_ratio"] = ours["peak_rss"] / naive["peak_rss"]
        summary["scores_peak_over_model_ratio"] = ours["peak_over_model"] / naive["peak_over_model"]
        summary["scores_goal_met"] = summary["scores_peak_ratio"] <= 0.3
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title="analysis cost: 12 layers x 12 heads, d_model 768, vocab 50,257 (random init)"
    )
    for col in (
        "case",
        "seconds",
        "peak RSS GiB",
        "over model GiB",
        "RSS after build GiB",
        "notes",
    ):
        table.add_column(col, justify="left" if col in ("case", "notes") else "right")
    for name, r in results.items():
        notes = ""
        if name == "scores_naive":
            notes = f"{r['cached_hooks']} hooks cached, {r['cached_gib']:.2f} GiB"
        table.add_row(
            name,
            f"{r['seconds']:.1f}",
            _gib(r["peak_rss"]),
            _gib(r["peak_over_model"]),
            _gib(r["rss_after_build"]),
            notes,
        )
    console = Console(width=160)
    console.print(table)
    if summary:
        console.print(summary)
    payload = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "threads": args.threads,
        },
        "cases": {n: CASES[n] for n in names},
        "results": results,
        "gpt2_small_discovery": gpt2_rows,
        "summary": summary,
    }
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from interp_toolkit.files.io import write_json

    write_json(RESULTS, payload)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
