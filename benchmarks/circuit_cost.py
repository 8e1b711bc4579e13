"""Cost of ``interp-toolkit circuit`` (edge attribution, EAP-IG, the faithfulness curve), and how
well attribution agrees with exact patching, side by side in one run.

Models (each case in a fresh child process, so its peak RSS is its own):

- ``cpu-1l`` .. ``cpu-8l``: the cpu preset's architectures (d_model 128, 4 heads, n_ctx 32, vocab
  1,024): trained runs when ``--study DIR`` names a study folder holding them, else freshly
  initialised (the cost is the same; the agreement and the circuit are only meaningful trained).
- ``gpt2-small-shape``: GPT-2 small's shape (12 x 12, d_model 768), randomly initialised and saved
  with ``save_pretrained`` (the real weights cannot be had here). A random model does not do the
  induction task, so only attribution and one faithfulness forward (a curve point) are timed.

Per case, on the induction task (``--prompts`` pairs): EAP (``ig_steps=1``) and EAP-IG (5 steps)
time and edges per second; the whole discovery (``discover_circuit``: curve, bisection, pruning)
with its circuit size and faithfulness; on the models with at most ``--brute-max`` edges, the
brute-force exact patch of every edge (run the corrupt prompts with that one edge restored to its
clean value: the quantity EAP estimates) and the Spearman rank correlation of EAP's and EAP-IG's
scores with it. The load average is recorded before and after (the machine is shared).
Run::

    .venv/bin/python benchmarks/circuit_cost.py [--study DIR] [--threads 1]

It prints a table and writes ``benchmarks/results/circuit_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, run_child, write_result  # noqa: E402

CPU_LAYERS = (1, 2, 3, 8)


def _vm_hwm_gib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024 / 2**30
    return float("nan")


def _load(case: str, study: str | None, folder: str) -> tuple[Any, Any, str]:
    """(model, codec, where it came from) for a case."""
    if case == "gpt2-small-shape":
        from interp_toolkit.runs.targets import load_target

        tgt = load_target(folder, "cpu", for_weights=False)
        return tgt.model, tgt.codec, "random GPT-2 small shape"
    n = int(case.split("-")[1].rstrip("l"))
    if study and (Path(study) / case).is_dir():
        from interp_toolkit.runs.folder import load_run

        run = load_run(Path(study) / case, device="cpu")
        return run.model, run.codec, f"trained ({Path(study) / case})"
    from interp_toolkit.models.build import build_model
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab
    from interp_toolkit.training.presets import get_preset

    cfg = get_preset("cpu", n).model
    codec = CompactVocab([EOT_ID, *range(cfg.d_vocab - 2)])
    return build_model(cfg), codec, "untrained cpu preset architecture"


def _brute_force(model: Any, task: Any) -> list[float]:
    """Exact denoising effect of every edge: the corrupt prompts with that one edge's writer
    restored to its clean value, minus the corrupt metric (graph edge order)."""
    from interp_toolkit.causal.attribution import ablated_metric, task_runs
    from interp_toolkit.causal.graph import graph_of
    from interp_toolkit.causal.tasks import Task

    swapped = Task("swapped", task.corrupt, task.clean, task.metric)
    runs = task_runs(model, swapped)
    graph = graph_of(model)
    base = float(runs.clean.mean())  # the corrupt prompts' metric (swapped roles)
    out = []
    for edge in graph.edges:
        restored = ablated_metric(model, swapped, graph.mask([edge]), runs, graph=graph)
        out.append(float(restored.mean()) - base)
    return out


def run_case(case: str, study: str | None, folder: str, prompts: int, brute_max: int) -> dict:
    import torch

    from interp_toolkit.causal.attribution import attribute, faithfulness
    from interp_toolkit.causal.circuit import discover_circuit
    from interp_toolkit.causal.compare import spearman
    from interp_toolkit.causal.graph import graph_of
    from interp_toolkit.causal.tasks import induction_task

    model, codec, source = _load(case, study, folder)
    task = induction_task(codec, min(int(model.cfg.n_ctx), 128), n_prompts=prompts, seed=11)
    graph = graph_of(model)
    n_edges = len(graph.edges)
    out: dict[str, Any] = {"case": case, "source": source, "edges": n_edges, "prompts": prompts}
    t0 = time.perf_counter()
    eap = attribute(model, task, ig_steps=1, batch_size=8)
    out["eap_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ig = attribute(model, task, ig_steps=5, batch_size=8)
    out["eap_ig5_s"] = time.perf_counter() - t0
    out["eap_edges_per_s"] = n_edges / out["eap_s"]
    out["eap_ig5_edges_per_s"] = n_edges / out["eap_ig5_s"]
    if case == "gpt2-small-shape":
        keep = graph.mask([e for e, _ in ig.ranked()[: max(1, n_edges // 100)]])
        t0 = time.perf_counter()
        faithfulness(model, task, keep, batch_size=8)
        out["faithfulness_point_s"] = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        found = discover_circuit(model, task, scores=ig, batch_size=16)
        out["discover_s"] = time.perf_counter() - t0 + out["eap_ig5_s"]
        out["circuit_edges"] = len(found.edges)
        out["top_k"] = found.top_k
        out["faithfulness"] = found.faithfulness
        out["gap"] = found.gap.value
        out["curve_points"] = len(found.curve)
    if n_edges <= brute_max:
        t0 = time.perf_counter()
        exact = _brute_force(model, task)
        out["brute_force_s"] = time.perf_counter() - t0
        order = list(graph.edges)
        e_scores = {e: s for e, s in eap.ranked()}
        i_scores = {e: s for e, s in ig.ranked()}
        out["spearman_eap_exact"] = spearman([e_scores[e] for e in order], exact)
        out["spearman_ig_exact"] = spearman([i_scores[e] for e in order], exact)
    out["peak_rss_gib"] = _vm_hwm_gib()
    out["threads"] = torch.get_num_threads()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--study", help="a study folder with trained cpu-1l..cpu-8l runs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--gpt2-prompts", type=int, default=8)
    p.add_argument("--brute-max", type=int, default=200, help="brute force up to this many edges")
    p.add_argument(
        "--cases", default=",".join([*(f"cpu-{n}l" for n in CPU_LAYERS), "gpt2-small-shape"])
    )
    p.add_argument("--case", help=argparse.SUPPRESS)  # a child process
    p.add_argument("--folder", help=argparse.SUPPRESS)
    p.add_argument("--out")
    a = p.parse_args()
    if a.case:
        import torch

        torch.set_num_threads(a.threads)
        prompts = a.gpt2_prompts if a.case == "gpt2-small-shape" else a.prompts
        print(json.dumps(run_case(a.case, a.study, a.folder or "", prompts, a.brute_max)))
        return
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(Path(tmp) / "gpt2-small-shape")
        cases = a.cases.split(",")
        if "gpt2-small-shape" in cases:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from gpt2_discovery_cost import build_folder

            build_folder(Path(folder))
        for case in cases:
            argv = ["--case", case, "--threads", str(a.threads), "--folder", folder]
            argv += ["--prompts", str(a.prompts), "--gpt2-prompts", str(a.gpt2_prompts)]
            argv += ["--brute-max", str(a.brute_max)] + (["--study", a.study] if a.study else [])
            rows.append(run_child(__file__, argv))
            print(f"{case}: done", flush=True)
    columns = ["case", "edges", "eap_s", "eap_ig5_s", "eap_edges_per_s", "discover_s"]
    columns += ["circuit_edges", "faithfulness", "brute_force_s", "spearman_eap_exact"]
    columns += ["spearman_ig_exact", "peak_rss_gib"]
    print_table(rows, columns)
    write_result(
        "circuit_cost",
        {
            "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg()),
            "settings": vars(a),
            "rows": rows,
        },
        a.out,
    )


if __name__ == "__main__":
    main()
