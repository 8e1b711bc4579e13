"""Do seeded runs reproduce across CPU kernels and thread counts? (issue 48, item 5)

Trains the same seeded run under several kernel settings on this machine, each in a fresh
process, and compares the final weights bit for bit: oneDNN's instruction set limited with
``ONEDNN_MAX_CPU_ISA`` (the default here uses AMX for bf16; ``AVX512_CORE_BF16`` is what a CPU
with AVX512-BF16 but no AMX runs; ``AVX2`` what a CPU without AVX512 runs) and MKL's code path
pinned with ``MKL_CBWR`` (conditional numerical reproducibility), at 1 and 2 threads. Runs that
end with the same weights would have given the same study; runs that differ show what a reader on
another CPU sees. The cost of each setting is its training time beside the default's, in one run.

    python experiments/kernel_isa.py [--json experiments/results/kernel_isa.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "kernel_isa.json"

#: (name, preset, precision, steps, threads, environment)
SETTINGS = (
    ("text bf16, default kernels", "text", "bf16", 300, 1, {}),
    ("text bf16, no AMX (AVX512_CORE_BF16)", "text", "bf16", 300, 1, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}),
    ("text bf16, AVX2 only", "text", "bf16", 300, 1, {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
    ("text fp32, default kernels", "text", "fp32", 300, 1, {}),
    ("text fp32, AVX2 only, MKL pinned", "text", "fp32", 300, 1, {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}),
    ("cpu fp32, 1 thread", "cpu", "fp32", 100, 1, {}),
    ("cpu fp32, 2 threads", "cpu", "fp32", 100, 2, {}),
    ("cpu fp32, 1 thread, AVX2 only, MKL pinned", "cpu", "fp32", 100, 1, {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}),
    ("cpu fp32, 2 threads, AVX2 only, MKL pinned", "cpu", "fp32", 100, 2, {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}),
)  # fmt: skip


def one(out: str, preset: str, precision: str, steps: int, threads: int) -> None:
    """Train in this process and print the weights' digest, the last loss and the seconds."""
    import torch

    from interp_toolkit.runs.folder import RunPaths, read_weights
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    torch.set_num_threads(threads)
    p = with_overrides(get_preset(preset, 2), steps=steps, precision=precision, threads=threads)
    t0 = time.perf_counter()
    res = train_model(out, p.model, p.data, p.train, preset=p.name, progress=False)
    seconds = time.perf_counter() - t0
    weights = read_weights(RunPaths(Path(out)).weights)
    h = hashlib.sha256()
    for k in sorted(weights):
        h.update(k.encode() + weights[k].float().numpy().tobytes())
    from interp_toolkit.runtime.machine import machine_record

    loss = next((r["loss"] for r in reversed(res.metrics) if "loss" in r), None)
    print(json.dumps({"digest": h.hexdigest()[:16], "loss": loss, "seconds": seconds,
                      "machine": machine_record().words()}))  # fmt: skip


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        one(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=RESULT)
    ap.add_argument("--only", default="", help="run the settings whose name contains this")
    ap.add_argument("--steps", type=int, default=None, help="every setting this many steps")
    args = ap.parse_args()
    rows = []
    for name, preset, precision, steps, threads, env in SETTINGS:
        if args.only not in name:
            continue
        steps = args.steps or steps
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                __file__,
                "_one",
                f"{tmp}/run",
                preset,
                precision,
                str(steps),
                str(threads),
            ]
            e = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                env={**e, **env, "OMP_NUM_THREADS": str(threads)},
            )
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"{name} failed")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append({"setting": name, "preset": preset, "precision": precision, "steps": steps,
                     "threads": threads, "env": env, **got})  # fmt: skip
        print(
            f"{name:48s} {got['digest']}  loss {got['loss']:.5f}  {got['seconds']:.1f} s",
            flush=True,
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"benchmark": "kernel_isa", "runs": rows, "load_before": os.getloadavg()[0]}, indent=1
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
