"""Shared bits of the benchmark and experiment scripts: result folder, table printing, JSON
output. An experiment (``experiments/``) puts ``benchmarks/`` on its path to import this."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path
from typing import Any


def results_dir() -> Path:
    """``results/`` beside the script that runs (``benchmarks/results``, ``experiments/results``)."""
    return Path(sys.modules["__main__"].__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    import os

    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    print("  ".join("-" * widths[c] for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))
    sys.stdout.flush()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return "-" if v is None else str(v)


def run_child(script: str, argv: list[str]) -> dict[str, Any]:
    """Run ``script`` with ``argv`` in a fresh Python process (its own peak memory) and return
    the JSON object its last stdout line holds; a failure stops the benchmark with its stderr."""
    import json
    import subprocess

    proc = subprocess.run(
        [sys.executable, script, *argv], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {argv} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write_result(name: str, payload: dict[str, Any], out: str | None = None) -> Path:
    from interp_toolkit.files.io import write_json

    path = Path(out) if out else results_dir() / f"{name}.json"
    write_json(path, {"benchmark": name, "machine": machine(), **payload})
    print(f"wrote {path}")
    return path
