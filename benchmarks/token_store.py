"""The token store: first-run tokenization of ``stdlib`` and memory while reading a large store.

    python benchmarks/token_store.py [--repeats 2] [--tokens 128] [--reference /path/to/checkout]

1. ``stdlib`` first run: wall time and peak RSS of ``tokenize_corpus("stdlib")`` in a fresh cache
   folder (a new process each time), then the time of a cached call. With ``--reference`` the same
   runs alternate with another checkout of the package (e.g. the commit before the token store),
   so both are measured side by side on the same (shared, noisy) machine.
2. Reading a store of ``--tokens`` million tokens (uint16 on disk): growth of the process's
   anonymous memory (``RssAnon``: heap, not the file's page-cache pages) while reading every
   training window through ``TokenWindows`` and while counting the id histogram, against the file
   size and the int64 array an in-RAM corpus would hold.

Prints tables and writes benchmarks/results/token_store.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import print_table, write_result

ROOT = Path(__file__).resolve().parents[1]

FIRST_RUN = """
import json, resource, sys, time
t = time.perf_counter()
from interp_toolkit.text.stream import tokenize_corpus
t_import = time.perf_counter() - t
t = time.perf_counter()
kw = {"progress": False} if "progress" in tokenize_corpus.__code__.co_varnames else {}
c = tokenize_corpus("stdlib", **kw)
first = time.perf_counter() - t
t = time.perf_counter()
tokenize_corpus("stdlib", **kw)
cached = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"first_s": first, "cached_s": cached, "import_s": t_import, "peak_rss_mib": peak,
                  "train_tokens": len(c.train_ids), "val_tokens": len(c.val_ids)}))
"""


def first_run(checkout: Path) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(checkout), "INTERP_TOOLKIT_CACHE": cache}
        out = subprocess.run(
            [sys.executable, "-c", FIRST_RUN],
            env=env,
            cwd=cache,
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def commit(checkout: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def rss_anon() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def store_memory(n_tokens: int, n_ctx: int = 1024) -> dict:
    from interp_toolkit.text.store import TokenWindows, build_store
    from interp_toolkit.text.stream import TokenizedCorpus, build_codec

    block = np.random.default_rng(0).integers(0, 50257, 2**20, dtype=np.uint16)

    def fill(writer):
        for _ in range(n_tokens // len(block)):
            writer.append("train", block)
        return {"documents": 1}

    with tempfile.TemporaryDirectory() as tmp:
        store = build_store(Path(tmp), "bench", {"source": "bench"}, np.dtype(np.uint16), fill)
        ids = store.segment("train")
        corpus = TokenizedCorpus("bench", ids, ids[:0], 1)
        base = rss_anon()
        t = time.perf_counter()
        codec = build_codec(corpus, 1024)  # streams the histogram over the memmap
        counts_s = time.perf_counter() - t
        after_counts = rss_anon() - base
        win = TokenWindows(ids, codec, n_ctx)
        t = time.perf_counter()
        checksum = 0
        for i in range(len(win)):
            checksum += int(win[i][-1])
        windows_s = time.perf_counter() - t
        after_windows = rss_anon() - base
        file_bytes = ids.nbytes
    mib = 2**20
    return {
        "tokens": n_tokens,
        "file_mib": round(file_bytes / mib, 1),
        "int64_in_ram_mib": round(n_tokens * 8 / mib, 1),
        "windows": len(win),
        "rss_anon_growth_counts_mib": round(after_counts / mib, 1),
        "rss_anon_growth_all_windows_mib": round(after_windows / mib, 1),
        "counts_s": round(counts_s, 2),
        "windows_s": round(windows_s, 2),
        "us_per_window": round(windows_s / len(win) * 1e6, 1),
        "checksum": checksum,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128, help="millions of tokens in the big store")
    ap.add_argument("--reference", type=Path, default=None, help="another checkout to compare")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    versions = {"this checkout": ROOT}
    if args.reference:
        versions["reference"] = args.reference.resolve()
    runs: dict[str, list[dict]] = {name: [] for name in versions}
    for _ in range(args.repeats):  # alternate: a shared machine is noisy
        for name, path in versions.items():
            runs[name].append(first_run(path))
    rows = []
    for name, rs in runs.items():
        rows.append(
            {
                "version": name,
                "first_run_s": [round(r["first_s"], 2) for r in rs],
                "cached_s": [round(r["cached_s"], 3) for r in rs],
                "peak_rss_mib": [round(r["peak_rss_mib"]) for r in rs],
                "train_tokens": rs[0]["train_tokens"],
                "val_tokens": rs[0]["val_tokens"],
            }
        )
    print_table(rows, list(rows[0]))
    print()
    memory = store_memory(args.tokens * 2**20)
    print_table([memory], list(memory))
    write_result(
        "token_store",
        {
            "stdlib_first_run": rows,
            "versions": {k: f"{v} @ {commit(v)}" for k, v in versions.items()},
            "store_memory": memory,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
