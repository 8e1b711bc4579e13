"""The natural-text recipe (``--preset text``): the 2-layer model and its 1-layer control, trained
the same number of steps with the same seed on plain stdlib text, side by side (one process and
one thread each, as ``reproduce`` trains on the CPU).

    python experiments/natural_text.py [--out DIR] [--steps N] [--seed 0] [--device cpu]
        [--threads 1] [--json PATH]

For each run: minutes and tokens trained, the per-scoring curve from metrics.jsonl (best layer>=1
induction score, plain; best layer-0 previous-token score; held-out loss; any other score the
toolkit logs), the final ``interp-toolkit heads RUN --json`` roles (each head's role, its value-
weighted induction score, tau and p-value), and two text measures computed here on held-out
stdlib windows (the same for both runs):

- ``icl_score``: Olsson et al.'s in-context-learning score scaled to the context: mean loss at the
  last quarter of positions minus mean loss at positions n_ctx/16..n_ctx/8 (negative: later tokens
  are predicted better, thanks to the context);
- ``repeat_drop``: a held-out window of n_ctx/2 tokens followed by itself: mean loss on the first
  copy minus mean loss on the second (the 1-layer model copies in context too, so only the
  difference between the two runs counts as induction).

The load average before and after is recorded (timings on a shared machine swing 2-5x). Prints a
table and writes experiments/results/natural_text.json (or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result

PRESET = "text"


def train_one(out: str, layers: int, steps: int | None, seed: int, threads: int, device: str):
    """Train one run of the text preset (in a child process); returns its metrics and time."""
    import torch

    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    torch.set_num_threads(threads)
    p = with_overrides(get_preset(PRESET, layers), steps=steps, seed=seed, threads=threads)
    res = train_model(out, p.model, p.data, p.train, preset=p.name, progress=False, device=device)
    return {"steps": res.steps_done, "elapsed_s": res.elapsed_s, "metrics": res.metrics}


def heads_report(run: Path, device: str) -> dict[str, Any]:
    """``interp-toolkit heads RUN --json`` (the CLI itself), read back; written beside the run
    (the CLI never writes into a folder it reads)."""
    path = run.parent / f"{run.name}.heads.json"
    subprocess.run(
        [sys.executable, "-m", "interp_toolkit", "heads", str(run), "--device", device]
        + ["--json", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return json.loads(path.read_text())


def text_measures(run: Path, n_windows: int = 128) -> dict[str, float]:
    """``icl_score`` and ``repeat_drop`` (module doc) on the first held-out windows."""
    import torch
    import torch.nn.functional as F

    from interp_toolkit.runs.folder import load_run, read_config
    from interp_toolkit.text.stream import tokenize_corpus, windows
    from interp_toolkit.training.settings import recorded_configs

    r = load_run(run, device="cpu")
    n_ctx = r.model_cfg.n_ctx
    _, d, _ = recorded_configs(read_config(run), run / "config.json")  # the run's corpus and store
    corpus = tokenize_corpus(d.corpus, d.val_fraction, d.max_tokens, False, store=d.store)
    x = windows(corpus.val_ids, r.codec, n_ctx + 1)[:n_windows]
    with torch.no_grad():
        logits = r.model(x[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
        early = loss[:, n_ctx // 16 : n_ctx // 8].mean()
        icl = float(loss[:, -(n_ctx // 4) :].mean() - early)
        half = n_ctx // 2
        twice = torch.cat([x[:, :half], x[:, :half]], 1)
        lt = F.cross_entropy(r.model(twice)[:, :-1].transpose(1, 2), twice[:, 1:], reduction="none")
        drop = float(lt[:, : half - 1].mean() - lt[:, half:].mean())
    return {"icl_score": round(icl, 4), "repeat_drop": round(drop, 4)}


def curve(metrics: list[dict[str, Any]], layers: int) -> list[dict[str, Any]]:
    """One row per scoring: best induction (layers >= 1; any layer for 1 layer), best layer-0
    previous-token score, held-out loss, and every other logged key."""
    first = 1 if layers > 1 else 0
    rows = []
    for m in metrics:
        if "induction" not in m:
            continue
        row = {k: m[k] for k in ("step", "tokens", "elapsed_s", "loss", "val_loss") if k in m}
        row["best_induction"] = max(max(r) for r in m["induction"][first:])
        row["best_prev_token_l0"] = max(m["prev_token"][0])
        row |= {k: v for k, v in m.items() if k not in row and not isinstance(v, list)}
        rows.append(row)
    return rows


def summary(run: Path, layers: int, trained: dict[str, Any], device: str) -> dict[str, Any]:
    found = heads_report(run, device)
    first = 1 if layers > 1 else 0
    heads = [
        {
            "head": f"{h['layer']}.{h['index']}",
            "role": h["role"],
            "induction_vw": round(h["scores"]["induction_vw"], 3),
            "tau": round(h["tau"]["induction_vw"], 3),
            "p": h["p_value"]["induction_vw"],
            "previous_token": round(h["scores"]["previous_token"], 3),
        }
        for h in found["heads"]
    ]
    induction = [h["head"] for h in heads if h["role"] == "induction"]
    rows = curve(trained["metrics"], layers)
    return {
        "layers": layers,
        "steps": trained["steps"],
        "tokens": trained["metrics"][-1]["tokens"],
        "minutes": round(trained["elapsed_s"] / 60, 2),
        "tokens_per_s": trained["metrics"][-1]["tokens_per_s"],
        "val_loss": rows[-1].get("val_loss"),
        "best_induction_end": round(rows[-1]["best_induction"], 3),
        "induction_heads": ", ".join(induction) or "none",
        "induction_heads_layer_ge_1": [h for h in induction if int(h.split(".")[0]) >= first],
        **text_measures(run),
        "heads": heads,
        "curve": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out", default=None, help="a new folder for the two runs (default: a temp dir)"
    )
    ap.add_argument(
        "--steps", type=int, default=None, help="steps of both runs (default: preset's)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="threads per run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        if root.exists() and any(root.iterdir()) and args.out:
            raise SystemExit(f"error: {root} is not empty: give a new folder.")
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=2) as pool:
            futures = {
                layers: pool.submit(
                    train_one,
                    str(root / f"{layers}-layers"),
                    layers,
                    args.steps,
                    args.seed,
                    args.threads,
                    args.device,
                )
                for layers in (2, 1)
            }
            trained = {layers: f.result() for layers, f in futures.items()}
        wall = time.perf_counter() - t0
        load_after = os.getloadavg()
        rows = [
            summary(root / f"{layers}-layers", layers, trained[layers], args.device)
            for layers in (2, 1)
        ]
    cols = [
        "layers",
        "steps",
        "tokens",
        "minutes",
        "val_loss",
        "best_induction_end",
        "induction_heads",
        "icl_score",
        "repeat_drop",
    ]
    print_table(rows, cols)
    write_result(
        "natural_text",
        {
            "preset": PRESET,
            "seed": args.seed,
            "device": args.device,
            "threads_per_run": args.threads,
            "wall_minutes_both": round(wall / 60, 2),
            "load_average_before": [round(v, 2) for v in load_before],
            "load_average_after": [round(v, 2) for v in load_after],
            "rows": rows,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
