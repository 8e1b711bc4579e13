"""Cost of the layer probes and the neuron analysis on a GPT-2-small-shaped model: time and peak RSS.

The model is GPT-2 small's *shape* (12 layers x 12 heads, d_model 768, d_mlp 3072, vocab
50,257), randomly initialised (the real weights cannot be downloaded here; cost does not depend
on the weights). Inputs are random token ids, ``[n_seqs, 128]``. Each case runs in a fresh child
process (peak RSS = its ``ru_maxrss``; the model folder is built by another child first), and
each of our computations runs beside its plain reference in the same run:

- ``probe stream``: :func:`~interp_toolkit.probing.probes.stream_at` (13 boundaries, chunked,
  the pass stops after the last hook) vs ``run_with_cache(names_filter=...)`` on the whole batch.
- ``probe prev_token``: the whole :func:`~interp_toolkit.probing.probes.probe_layers` (stream +
  26 LDA fits, ~3,000 classes).
- ``neurons top-k``: streaming :func:`~interp_toolkit.units.neurons.top_activations` of one
  layer's 3,072 neurons vs caching that layer's ``hook_post`` for the whole batch and ``topk``.
- ``neurons layer``: the whole :func:`~interp_toolkit.units.neurons.analyse_neurons` of one
  layer (top-k, promoted tokens through the 50,257-token unembedding, the concept rule and the
  token-group count on the model and under the shuffled control; the untrained twin, a second
  model's pass, is not in this case).

Run ``.venv/bin/python benchmarks/probe_neuron_cost.py``: prints a table and writes
``benchmarks/results/probe_neuron_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, run_child, write_result  # noqa:E402
from gpt2_discovery_cost import build_folder  # noqa: E402

GIB = 2**30
SEQ_LEN = 128
CASES: dict[str, dict[str, Any]] = {
    "probe stream (ours, chunked)": {"kind": "stream", "n_seqs": 32},
    "probe stream (run_with_cache)": {"kind": "stream_ref", "n_seqs": 32},
    "probe prev_token (stream + LDA)": {"kind": "probe", "n_seqs": 32},
    "neurons top-k L0 (ours, streaming)": {"kind": "topk", "n_seqs": 128},
    "neurons top-k L0 (cache + topk)": {"kind": "topk_ref", "n_seqs": 128},
    "neurons layer 0 (all)": {"kind": "neurons", "n_seqs": 128},
}


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_case(folder: Path, case: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from interp_toolkit.probing import probes
    from interp_toolkit.runs import hf
    from interp_toolkit.units import neurons

    model = hf.load(folder, compat=case["kind"] == "neurons")
    tokens = torch.randint(
        0, int(model.cfg.d_vocab), (case["n_seqs"], SEQ_LEN), generator=torch.Generator()
    )
    rss_loaded = _rss()
    kind = case["kind"]
    t0 = time.perf_counter()
    with torch.no_grad():
        if kind == "stream":
            probes.stream_at(model, tokens, torch.ones_like(tokens, dtype=torch.bool))
        elif kind == "stream_ref":
            hooks = [b.hook for b in probes.boundaries(model)]
            model.run_with_cache(tokens, names_filter=hooks)
        elif kind == "probe":
            probes.probe_layers(model, tokens, "prev_token")
        elif kind == "topk":
            neurons.top_activations(model, tokens, [0], k=20)
        elif kind == "topk_ref":
            _, cache = model.run_with_cache(tokens, names_filter=[neurons.hook_post(0)])
            cache[neurons.hook_post(0)].reshape(-1, int(model.cfg.d_mlp)).topk(20, dim=0)
        else:
            neurons.analyse_neurons(model, tokens, [0], k=20)
    seconds = time.perf_counter() - t0
    peak = _rss()
    return {
        "positions": case["n_seqs"] * SEQ_LEN,
        "seconds": round(seconds, 2),
        "peak_rss_gib": round(peak / GIB, 3),
        "extra_rss_gib": round((peak - rss_loaded) / GIB, 3),
        "model_rss_gib": round(rss_loaded / GIB, 3),
    }


def _child(argv: list[str]) -> dict[str, Any]:
    return run_child(__file__, argv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        print(json.dumps(run_case(Path(folder), CASES[case])))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpt2-small-shape-") as tmp:
        _child(["--child-build", tmp])
        for name in CASES:
            rows.append({"case": name, **_child(["--child-case", tmp, name])})
            print(name, rows[-1], flush=True)
    columns = ["case", "positions", "seconds", "peak_rss_gib", "extra_rss_gib", "model_rss_gib"]
    print_table(rows, columns)
    note = "one thread, wall time on a shared 2-core box; extra = peak RSS minus RSS after load"
    write_result("probe_neuron_cost", {"note": note, "seq_len": SEQ_LEN, "cases": rows})


if __name__ == "__main__":
    main()
