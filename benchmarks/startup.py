"""Start-up: the command line's ``--help`` and each command's cost over the imports it cannot
avoid, side by side with those bare imports, in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/startup.py [--rounds 5]

Each case is a fresh ``python`` process; the cases alternate round by round (the machine's load
falls on all of them alike) and the table gives the median wall time and the median CPU time
(user + system: what the process itself did, which load stretches less). ``--help`` of a
command imports neither torch nor TransformerLens (checked with ``-X importtime``, the ``heavy``
column). "overhead" is a case's median minus the median of the bare imports it needs.

Prints a table and writes benchmarks/results/startup.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from _common import print_table, write_result

PY = [sys.executable]
COMMANDS = ["train", "sample", "heads", "exam", "circuit", "probe", "sae", "view", "reproduce"]
HEAVY = ("torch", "transformer_lens", "transformers")


def cases() -> dict[str, tuple[list[str], str | None]]:
    """name -> (argv, the bare case it is measured against)."""
    out: dict[str, tuple[list[str], str | None]] = {
        "python -c pass": ([*PY, "-c", "pass"], None),
        "import torch": ([*PY, "-c", "import torch"], None),
        "import TransformerBridge": (
            [*PY, "-c", "from transformer_lens import TransformerBridge"],
            None,
        ),
        "import interp_toolkit.api": (
            [*PY, "-c", "import interp_toolkit.api"],
            "import TransformerBridge",
        ),
        "interp-toolkit --help": ([*PY, "-m", "interp_toolkit", "--help"], "python -c pass"),
    }
    for c in COMMANDS:
        out[f"{c} --help"] = ([*PY, "-m", "interp_toolkit", c, "--help"], "python -c pass")
    out["heads gpt2 (offline, not cached)"] = (
        [*PY, "-m", "interp_toolkit", "heads", "gpt2"],
        "python -c pass",  # refused before any heavy import
    )
    return out


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The heavy packages a process imports (from ``-X importtime``)."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    return [h for h in HEAVY if h in names]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    hf = tempfile.mkdtemp(prefix="startup-hf-")
    env = {**os.environ, "HF_HOME": hf, "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    table = cases()
    walls: dict[str, list[float]] = {k: [] for k in table}
    cpus: dict[str, list[float]] = {k: [] for k in table}
    for r in range(args.rounds):
        for name, (argv, _) in table.items():
            w, c = timed(argv, env)
            walls[name].append(w)
            cpus[name].append(c)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = []
    for name, (argv, base) in table.items():
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        rows.append(
            {
                "case": name,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "over": base,
                "overhead_wall_s": round(wall - statistics.median(walls[base]), 3)
                if base
                else None,
                "overhead_cpu_s": round(cpu - statistics.median(cpus[base]), 3) if base else None,
                "heavy": ",".join(heavy_imports(argv, env)) if "--help" in name else None,
            }
        )
    cols = ["case", "wall_s", "cpu_s", "over", "overhead_wall_s", "overhead_cpu_s", "heavy"]
    print_table(rows, cols)
    load = os.getloadavg()
    write_result("startup", {"rounds": args.rounds, "load_avg": load, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
