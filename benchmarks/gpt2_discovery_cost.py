"""Cost of ``interp-toolkit heads gpt2`` on this CPU: time and peak memory, new and old, one run.

The model is GPT-2 small's *shape* (``GPT2Config()`` defaults: 12 layers x 12 heads, d_model 768,
n_ctx 1024, vocab 50,257), randomly initialised and saved with ``save_pretrained`` because the
real weights cannot be downloaded here. Only the cost is measured: the forward passes and the
hooks cost the same for any weights of this shape.

Cases, each in a fresh child process, one after the other in this run:

- ``heads --fdr``: exactly what ``interp-toolkit heads FOLDER --fdr --json OUT`` does, through the
  CLI's own entry point (:func:`interp_toolkit.cli.main`): load without compatibility mode, then
  :func:`interp_toolkit.heads.discovery.discover` with its defaults (64 rows x 117 tokens; every
  score's specificity test against the head itself: its nearby keys on the probe, a no-repeat
  control batch, sign-flip draws enough for Benjamini-Hochberg over all 864 tests).
- ``heads, per-head untrained nulls (before)``: what ``heads gpt2`` ran before the specificity
  test: the same load and probe, each score against 2 untrained GPT-2s on the first 16 rows and
  the model on a no-repeat control of those rows (:func:`interp_toolkit.heads.nulls.untrained_tests`,
  the code of that null), roles by p <= 0.05 and the floor (with BH, none can pass: smallest p 0.04).

Goal for ``heads``: about 1 minute on 2 idle cores and a peak RSS under 2 GiB. The machine is
shared, so the JSON records the load average before and after each case and the child's CPU
seconds beside its wall time. ``load_s`` is the loading part. Peak RSS is the child's ``VmHWM``.
Run::

    .venv/bin/python benchmarks/gpt2_discovery_cost.py [--threads 2]

It prints a table and writes ``benchmarks/results/gpt2_discovery_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "gpt2_discovery_cost.json"
GIB = 2**30
GOAL = {"peak_rss_gib": 2.0, "seconds": 60.0}
CASES = ("heads --fdr", "heads, per-head untrained nulls (before)")


def _vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def build_folder(folder: Path) -> None:
    """Random GPT-2-small-shaped model + tokenizer files, as ``save_pretrained`` writes them."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    from interp_toolkit.runs.hf import save_gpt2_tokenizer

    hf_logging.disable_progress_bar()
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).save_pretrained(folder)
    save_gpt2_tokenizer(folder)


def run_case(folder: Path, case: str, threads: int) -> dict[str, Any]:
    """One case in this (fresh) process."""
    import torch

    torch.set_num_threads(threads)
    from interp_toolkit.cli import main as cli_main
    from interp_toolkit.runs import targets
    from interp_toolkit.text.codecs import GPT2Codec

    loaded: dict[str, float] = {}
    load_target = targets.load_target

    def timed_load(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        tgt = load_target(*args, **kw)
        loaded["s"], loaded["rss"] = time.perf_counter() - t, _vm_hwm_bytes()
        return tgt

    targets.load_target = timed_load  # the command imports it at call time
    rss0 = _vm_hwm_bytes()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "heads.json"
        t0, c0 = time.perf_counter(), time.process_time()
        if case == "heads --fdr":
            try:
                cli_main(["heads", str(folder), "--fdr", "--json", str(out)])
            except SystemExit as exc:
                if exc.code:
                    raise
            data = json.loads(out.read_text())
            probe = data["probe"]
            n_roles = sum(len(heads) for heads in data["roles"].values())
            test = data["test"]
            extra = {
                "n_draws": test["n_draws"],
                "n_tests": test["n_tests"],
                "smallest_p": test["smallest_p"],
                "warnings": len(test["warnings"]),
            }
        else:
            from interp_toolkit.heads import nulls
            from interp_toolkit.heads.discovery import classify, discovery_batch
            from interp_toolkit.heads.scorer import HeadScores, row_scores
            from interp_toolkit.heads.untrained import untrained_models

            tgt = timed_load(str(folder), for_weights=False)
            batch = discovery_batch(tgt.model, GPT2Codec())
            observed = row_scores(tgt.model, batch)
            tests = nulls.untrained_tests(tgt.model, batch, observed, untrained_models(tgt.model))
            scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
            roles = classify(scores, tests.significant(0.05))
            probe = batch.to_dict()
            n_roles = sum(r != "none" for row in roles for r in row)
            extra = {
                "untrained_models": tests.n_models,
                "untrained_rows": tests.rows,
                "smallest_p": min(tests.smallest_p.values()),
            }
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    return {
        "case": case,
        "threads": threads,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu_seconds, 1),
        "load_s": round(loaded["s"], 1),
        "peak_rss_gib": round(_vm_hwm_bytes() / GIB, 3),
        "rss_after_load_gib": round(loaded["rss"] / GIB, 3),
        "rss_before_gib": round(rss0 / GIB, 3),
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "probe": f"{probe['n_seqs']}x{probe['seq_len']} (period {probe['period']})",
        "heads_with_role": n_roles,
        **extra,
    }


def _child(argv: list[str]) -> dict[str, Any]:
    from _common import run_child

    return run_child(__file__, argv)


def run_all(threads: int) -> dict[str, dict[str, Any]]:
    """Build a random GPT-2-small-shaped folder and run every case, each in its own process."""
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gpt2-small-shape-") as tmp:
        _child(["--child-build", tmp])
        for case in CASES:
            row = _child(["--child-case", tmp, case, "--threads", str(threads)])
            row["meets_goal"] = (
                row["peak_rss_gib"] < GOAL["peak_rss_gib"] and row["seconds"] < GOAL["seconds"]
            )
            rows[case] = row
    return rows


def _print_and_save(rows: dict[str, dict[str, Any]]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import print_table

    cols = ["case", "probe", "seconds", "cpu_seconds", "load_s", "load_before", "peak_rss_gib"]
    cols += ["heads_with_role", "smallest_p", "meets_goal"]
    print_table(list(rows.values()), cols)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "note": "one run, cases side by side; wall times on a shared 2-core box "
                "(cpu_seconds: the child's CPU time; load_before/after: 1-minute load average)",
                "goal": GOAL,
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                },
                "cases": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child-build", metavar="FOLDER")
    ap.add_argument("--child-case", nargs=2, metavar=("FOLDER", "CASE"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child_build:
        build_folder(Path(args.child_build))
        print(json.dumps({"built": args.child_build}))
        return
    if args.child_case:
        folder, case = args.child_case
        print(json.dumps(run_case(Path(folder), case, args.threads)))
        return
    _print_and_save(run_all(args.threads))


if __name__ == "__main__":
    main()
