"""Cost of full GPT-2-small head discovery on this CPU: time and peak memory.

The model is GPT-2 small's *shape* (``GPT2Config()`` defaults: 12 layers x 12 heads, d_model 768,
n_ctx 1024, vocab 50,257; 124M parameters), randomly initialised locally because the real
weights cannot be downloaded here. Only the cost is measured, not which heads are found: the
forward pass and the hooks cost the same for any weights of this shape.

The case: ``interp_toolkit.analysis.discovery.discover`` on 64 sequences x 128 tokens
(``[BOS] prefix(0..7) seg(60) seg(60) filler``), shuffled null with 4 samples, so
5 x 64 = 320 sequences go through the model. Goal: peak RSS < 2 GiB, discovery < 60 s.

Each case runs in a fresh child process (peak RSS = the child's ``ru_maxrss``); the model folder
(``save_pretrained`` + our GPT-2 BPE tokenizer) is built in a separate child first, so building
the HF model does not count towards the peak. Run::

    .venv/bin/python benchmarks/gpt2_discovery_cost.py

It prints a table and writes ``benchmarks/results/gpt2_discovery_cost.json``. ``CASES`` and
``run_case`` are shaped so the case can move into ``benchmarks/analysis_cost.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "gpt2_discovery_cost.json"
GIB = 2**30

#: name -> discovery settings (GPT-2 small shape for every case).
_GOAL = {"peak_rss_gib": 2.0, "discover_s": 60.0}
CASES: dict[str, dict[str, Any]] = {
    # what `interp-toolkit heads gpt2` does: no TL weight processing (patterns are identical), null x2
    "gpt2-small 64x128 heads-cmd null2": {
        "n_seqs": 64,
        "period": 60,
        "prefix_max": 7,
        "n_null": 2,
        "seed": 0,
        "compat": False,
        "goal": _GOAL,
    },
    # the same after enable_compatibility_mode() (what `circuits` needs: TL's weight processing)
    "gpt2-small 64x128 compat null4": {
        "n_seqs": 64,
        "period": 60,
        "prefix_max": 7,
        "n_null": 4,
        "seed": 0,
        "compat": True,
        "goal": _GOAL,
    },
}


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def build_folder(folder: Path) -> None:
    """Random GPT-2-small-shaped model + tokenizer files, as ``save_pretrained`` writes them."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    from interp_toolkit.targets.gpt2 import save_gpt2_tokenizer

    hf_logging.disable_progress_bar()
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).save_pretrained(folder)
    save_gpt2_tokenizer(folder)


def run_case(folder: Path, settings: dict[str, Any], threads: int) -> dict[str, Any]:
    """Load the folder through ``gpt2.load`` and run full discovery; in a fresh process."""
    import torch

    torch.set_num_threads(threads)
    from interp_toolkit.analysis.discovery import discover
    from interp_toolkit.targets import gpt2
    from interp_toolkit.tokenizer import GPT2Codec

    rss0 = _maxrss_bytes()
    t0 = time.perf_counter()
    model = gpt2.load(folder, compat=settings["compat"])
    load_s = time.perf_counter() - t0
    rss_loaded = _maxrss_bytes()
    kw = {k: settings[k] for k in ("n_seqs", "period", "prefix_max", "n_null", "seed")}
    t0, c0 = time.perf_counter(), time.process_time()
    result = discover(model, GPT2Codec(), **kw)
    discover_s, discover_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    rss_peak = _maxrss_bytes()
    probe = result.report.probe
    n_forward = kw["n_seqs"] * (1 + kw["n_null"])
    return {
        "model": {
            "n_layers": int(model.cfg.n_layers),
            "n_heads": int(model.cfg.n_heads),
            "d_model": int(model.cfg.d_model),
            "n_ctx": int(model.cfg.n_ctx),
            "d_vocab": int(model.cfg.d_vocab),
            "n_params": sum(p.numel() for p in model.parameters()),
        },
        "probe": {
            "n_seqs": probe["n_seqs"],
            "seq_len": probe["seq_len"],
            "period": probe["period"],
        },
        "sequences_forwarded": n_forward,
        "threads": threads,
        "load_s": round(load_s, 2),
        "discover_s": round(discover_s, 2),
        "discover_cpu_s": round(discover_cpu_s, 2),
        "compat": settings["compat"],
        "tokens_per_s": round(n_forward * probe["seq_len"] / discover_s),
        "rss_before_load_gib": round(rss0 / GIB, 3),
        "peak_rss_after_load_gib": round(rss_loaded / GIB, 3),
        "peak_rss_gib": round(rss_peak / GIB, 3),
        "discovery_extra_gib": round((rss_peak - rss_loaded) / GIB, 3),
        "prev_head": str(result.top["previous-token"]),
        "induction_head": str(result.top["induction"]),
    }


def _child(argv: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {argv[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
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
        print(json.dumps(run_case(Path(folder), CASES[case], args.threads)))
        return

    rows = run_all(args.threads)
    _print_and_save(rows)


def run_all(threads: int) -> dict[str, dict[str, Any]]:
    """Build a random GPT-2-small-shaped folder and run every case, each in its own process."""
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gpt2-small-shape-") as tmp:
        _child(["--child-build", tmp])
        for name in CASES:
            rows[name] = _child(["--child-case", tmp, name, "--threads", str(threads)])
            rows[name]["goal"] = CASES[name]["goal"]
            rows[name]["meets_goal"] = (
                rows[name]["peak_rss_gib"] < CASES[name]["goal"]["peak_rss_gib"]
                and rows[name]["discover_s"] < CASES[name]["goal"]["discover_s"]
            )
    return rows


def _print_and_save(rows: dict[str, dict[str, Any]]) -> None:
    header = (
        f"{'case':<32}{'load s':>8}{'discover s':>12}{'cpu s':>8}{'tok/s':>8}"
        f"{'peak GiB':>10}{'+disc GiB':>11}  goal"
    )
    print(header)
    for name, r in rows.items():
        print(
            f"{name:<32}{r['load_s']:>8.1f}{r['discover_s']:>12.1f}{r['discover_cpu_s']:>8.1f}"
            f"{r['tokens_per_s']:>8}"
            f"{r['peak_rss_gib']:>10.2f}{r['discovery_extra_gib']:>11.2f}  "
            f"{'met' if r['meets_goal'] else 'MISSED'} (<{r['goal']['peak_rss_gib']} GiB, "
            f"<{r['goal']['discover_s']:.0f} s)"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "note": "wall times on a shared 2-core box; discover_cpu_s is this process's CPU time",
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                },
                "cases": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
