"""Cost of ``interp-toolkit heads FOLDER`` on a ~0.5B-parameter model of another architecture:
time and peak memory on this CPU, with the load's memory estimate beside the measured peak.

The model is Qwen2-0.5B's *shape* (``Qwen2Config``: 24 layers, d_model 896, 14 query heads
sharing 2 key/value heads, d_mlp 4,864, rotary positions, RMSNorm, tied embeddings, vocabulary
151,936: 494M parameters), randomly initialised and saved with ``save_pretrained`` (no weights
can be downloaded here), with a word-level tokenizer of 151,936 tokens saved beside it (``heads``
reads random ids, not text, so any tokenizer of that size costs the same). Only the cost is
measured: the forward passes and hooks cost the same for any weights of this shape.

Cases, each in a fresh child process, one after the other: ``heads`` with ``--dtype fp32`` and
with ``--dtype bf16``, exactly what ``interp-toolkit heads FOLDER --dtype D --json OUT`` does
through the CLI's entry point (the checks before the boot, the load without compatibility mode,
discovery with its defaults: 64 rows of the probe and a no-repeat control, the sign-flip
specificity test of every score of all 336 heads). ``estimate_gib`` is
:func:`interp_toolkit.runs.hf_checks.memory_estimate` (what the load is checked against before it boots);
``peak_rss_gib`` the child's ``VmHWM``; ``load_s`` the loading part. The machine is shared, so the
JSON records the 1-minute load average before and after each case and the child's CPU seconds.
Run::

    .venv/bin/python benchmarks/hf_heads_cost.py [--threads 2]

It prints a table and writes ``benchmarks/results/hf_heads_cost.json``.
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

RESULTS = Path(__file__).resolve().parent / "results" / "hf_heads_cost.json"
GIB = 2**30
CASES = ("fp32", "bf16")
VOCAB = 151_936


def _vm_hwm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def build_folder(folder: Path) -> dict[str, Any]:
    """A random Qwen2-0.5B-shaped model and a tokenizer of its vocabulary's size."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    words = {"<bos>": 0, **{f"w{i}": i for i in range(1, VOCAB)}}
    tok = Tokenizer(models.WordLevel(words, unk_token="<bos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<bos>"
    ).save_pretrained(str(folder))
    return {"n_params": n_params}


def run_case(folder: Path, dtype: str, threads: int) -> dict[str, Any]:
    """One case in this (fresh) process."""
    import torch

    torch.set_num_threads(threads)
    from interp_toolkit.cli import main as cli_main
    from interp_toolkit.runs import hf_checks as hf
    from interp_toolkit.runs import targets

    loaded: dict[str, Any] = {}
    load_target = targets.load_target

    def timed_load(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        tgt = load_target(*args, **kw)
        loaded["s"], loaded["rss"] = time.perf_counter() - t, _vm_hwm_bytes()
        loaded["n_params"] = sum(p.numel() for p in tgt.model.original_model.parameters())
        return tgt

    targets.load_target = timed_load  # the command imports it at call time
    rss0 = _vm_hwm_bytes()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "heads.json"
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            cli_main(
                ["heads", str(folder), "--dtype", dtype, "--device", "cpu", "--json", str(out)]
            )
        except SystemExit as exc:
            if exc.code:
                raise
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        data = json.loads(out.read_text())
    n_params = int(loaded["n_params"])
    estimate = hf.memory_estimate(
        n_params, hf.DTYPES[dtype], compat=False, file_bytes=hf.weights_file_bytes(folder)
    )
    probe = data["probe"]
    return {
        "case": f"heads --dtype {dtype}",
        "threads": threads,
        "n_params": n_params,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu_seconds, 1),
        "load_s": round(loaded["s"], 1),
        "estimate_gib": round(estimate / GIB, 3),
        "peak_rss_gib": round(_vm_hwm_bytes() / GIB, 3),
        "rss_after_load_gib": round(loaded["rss"] / GIB, 3),
        "rss_before_gib": round(rss0 / GIB, 3),
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "probe": f"{probe['n_seqs']}x{probe['seq_len']} (period {probe['period']})",
        "heads": len(data["heads"]),
        "heads_with_role": sum(len(h) for h in data["roles"].values()),
        "n_tests": data["test"]["n_tests"],
        "architecture": data["architecture"],
    }


def _child(argv: list[str]) -> dict[str, Any]:
    from _common import run_child

    return run_child(__file__, argv)


def run_all(threads: int, folder: str | None) -> dict[str, Any]:
    """Build the folder (or reuse ``folder``) and run every case, each in its own process."""
    with tempfile.TemporaryDirectory(prefix="qwen2-0.5b-shape-") as tmp:
        where = folder or tmp
        built = {} if folder else _child(["--child-build", where])
        rows = {d: _child(["--child-case", where, d, "--threads", str(threads)]) for d in CASES}
    return {"built": built, "cases": rows}


def _print_and_save(result: dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import print_table

    rows = list(result["cases"].values())
    cols = ["case", "probe", "seconds", "cpu_seconds", "load_s", "load_before"]
    cols += ["estimate_gib", "peak_rss_gib", "heads_with_role"]
    print_table(rows, cols)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "note": "one run, cases side by side; wall times on a shared 2-core box "
                "(cpu_seconds: the child's CPU time; load_before/after: 1-minute load average); "
                "estimate_gib: what the load is checked against before it boots "
                "(runs/hf_checks.py: memory_estimate), beside the measured peak RSS",
                "model": "Qwen2-0.5B's shape, random weights (no weights can be downloaded here)",
                "machine": {
                    "cpu_count": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                },
                **result,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--folder", help="An already built folder (skips building one).")
    ap.add_argument("--child-build", metavar="FOLDER")
    ap.add_argument("--child-case", nargs=2, metavar=("FOLDER", "DTYPE"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child_build:
        print(json.dumps(build_folder(Path(args.child_build))))
        return
    if args.child_case:
        folder, dtype = args.child_case
        print(json.dumps(run_case(Path(folder), dtype, args.threads)))
        return
    _print_and_save(run_all(args.threads, args.folder))


if __name__ == "__main__":
    main()
