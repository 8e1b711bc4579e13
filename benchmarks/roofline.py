"""The roofline: this machine's matmul rate in fp32 and bf16 at our models' shapes, and every hot
path as a fraction of it.

    python benchmarks/roofline.py [--threads 2] [--seed-batch 8] [--only PATH ...]

Rates: ``torch.matmul`` at every distinct shape of the paths below (benchmarks/_flops.py), in fp32
and bf16, on the same threads, measured right before and right after each path (the mean of the
two is its roofline; the machine is shared, so each comparison is made in one stretch of time).
A path's *fraction* = (its matmuls' FLOPs at those rates, in the dtype the path multiplies in) /
(its measured seconds): 1.0 is "nothing but matmuls, at torch.matmul's speed".

Paths (each shrunk to run in a few minutes on 2 shared cores; the cost benchmarks they come from
measure the full sizes):

- ``train cpu``: the cpu preset's 2-layer training step (train_model), bf16 and fp32, and the
  plain-PyTorch reference in fp32 (benchmarks/train_throughput.py): 30 steps, 5 warm-up.
  Goal: bf16 >= 1.5x the fp32 reference.
- ``train seed``: the seed preset's 2-layer step (d_model 768, vocab 50,257, n_ctx 128) with
  ``--seed-batch`` sequences (the preset's 32 when given; 8 by default, to fit the time): 4 steps
  (1 warm-up, 2 timed). Goal: bf16 >= 60% of the bf16 roofline.
- ``scores cpu``: the head scoring training runs between steps (``score_grids`` on the default
  probe, 32 sequences) on a cpu-preset 2-layer model; exact float32 (roofline: fp32).
- ``scores 12L``: ``head_scores`` on the GPT-2-small-shaped attention-only model of
  analysis_cost.py, 16 x 128 tokens (analysis_cost: 64); fp32.
- ``copy ranks``: full-vocabulary copy ranks (``copy_accuracy``, k = 1, 5) of ``--ov-heads`` heads
  of that model, with bf16 and with fp32 candidates (full_vocab_circuits.py: all 144); the
  matmuls counted are the ones executed (factor products, then each block).
- ``probe stream``: ``probes.stream_at`` on a GPT-2-small-shaped model with MLPs and LayerNorm,
  8 x 128 tokens (probe_neuron_cost.py: 32); fp32.
- ``neuron tokens``: ``neurons.promoted_tokens`` of one layer (W_out @ W_U, 3,072 x 50,257, top-10);
  fp32. Goal for every analysis path: within 2x of its roofline (fraction >= 0.5).

Prints a table and writes benchmarks/results/roofline.json (with the load average).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_result  # noqa: E402
from _flops import (  # noqa: E402
    Matmul,
    flops,
    forward_matmuls,
    measure_rates,
    now,
    rate_table,
    roofline_seconds,
    set_clock,
    timed_shape,
    training_matmuls,
)

GOALS = {"train_vs_reference": 1.5, "seed_step_fraction": 0.6, "analysis_fraction": 0.5}
GPT2_SHAPE = dict(n_layers=12, d_model=768, n_heads=12, d_head=64, n_ctx=128, d_vocab=50257)
FP32, BF16 = torch.float32, torch.bfloat16


def _rated(mms: list[Matmul], run: Callable[[], float], dtypes=(FP32, BF16)) -> dict[str, Any]:
    """Rates before, the path (``run`` returns its seconds), rates after."""
    before = measure_rates(mms, dtypes)
    seconds = run()
    after = measure_rates(mms, dtypes)
    rates = {dt: {s: (before[dt][s] + after[dt][s]) / 2 for s in before[dt]} for dt in dtypes}
    return {"seconds": seconds, "rates": rates}


def _row(
    path: str, variant: str, mms: list[Matmul], dtype: torch.dtype, r: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    roof = roofline_seconds(mms, r["rates"][dtype])
    return {
        "path": path,
        "variant": variant,
        "matmul_gflop": round(flops(mms) / 1e9, 2),
        "dtype": str(dtype).removeprefix("torch."),
        "seconds": round(r["seconds"], 3),
        "roofline_s": round(roof, 3),
        "gflop_s": round(flops(mms) / r["seconds"] / 1e9, 1),
        "fraction": round(roof / r["seconds"], 3),
        **extra,
    }


def train_path(
    name: str, layers: int, steps: int, warmup: int, batch: int | None, threads: int, repeats: int
) -> list[dict[str, Any]]:
    from train_throughput import (
        ours_tokens_per_s,
        reference_tokens_per_s,
        step_matmuls,
        timed_preset,
    )

    from interp_toolkit.runtime.devices import STRICT_FP32
    from interp_toolkit.training.presets import with_overrides

    preset, batches = timed_preset(name, layers, steps, threads)
    if batch:
        preset = with_overrides(preset, batch_size=batch)
        batches = [b[:batch] for b in batches]
    cpu = torch.device("cpu")
    per_step = preset.train.batch_size * preset.model.n_ctx
    mms = step_matmuls(preset)
    cases: dict[str, Callable[[], float]] = {
        "ours bf16": lambda: ours_tokens_per_s(preset, steps, warmup, cpu, precision="bf16")[0],
        "ours fp32": lambda: ours_tokens_per_s(preset, steps, warmup, cpu, precision="fp32")[0],
        "reference fp32": lambda: reference_tokens_per_s(preset, batches, warmup, cpu, STRICT_FP32),
    }
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in cases}
    for _ in range(repeats):  # alternating, each with its own rates before and after
        for k, tok_s in cases.items():
            runs[k].append(_rated(mms, lambda tok_s=tok_s: per_step / tok_s()))
    rows = []
    for k, rs in runs.items():
        # the median run (the lower middle one of an even count: a run that happened)
        r = sorted(rs, key=lambda x: x["seconds"])[(len(rs) - 1) // 2]
        dt = BF16 if "bf16" in k else FP32
        rows.append(
            _row(
                f"train {name}",
                k,
                mms,
                dt,
                r,
                tokens_per_s=round(per_step / r["seconds"]),
                batch=f"{preset.train.batch_size}x{preset.model.n_ctx}",
            )
        )
    ref = next(r for r in rows if r["variant"] == "reference fp32")
    for r in rows:
        r["vs_reference"] = round(r["tokens_per_s"] / ref["tokens_per_s"], 3)
    return rows


def _gpt2_shaped(mlp: bool = False):
    from interp_toolkit.models.build import ModelConfig, build_model

    extra = dict(mlp=True, d_mlp=3072, normalization="LN") if mlp else {}
    cfg = ModelConfig(**GPT2_SHAPE, **extra)
    return cfg, build_model(cfg)


def _timed(fn: Callable[[], Any]) -> float:
    t0 = now()
    fn()
    return now() - t0


def scores_paths() -> list[dict[str, Any]]:
    from interp_toolkit.heads.discovery import head_scores
    from interp_toolkit.heads.repeats import default_layout, repeated_tokens
    from interp_toolkit.models.build import ModelConfig, build_model
    from interp_toolkit.training.metrics import score_grids
    from interp_toolkit.training.presets import get_preset

    rows = []
    cfg = get_preset("cpu", 2).model
    model = build_model(cfg)
    period, prefix_max = default_layout(cfg.n_ctx)  # the training probe's layout
    probe = repeated_tokens(
        32, period, low=1, high=cfg.d_vocab, bos_id=0, prefix_max=prefix_max, seed=0
    )
    mms = forward_matmuls(cfg, 32, probe.tokens.shape[1], unembed=False)
    score_grids(model, probe)
    r = _rated(
        mms,
        lambda: statistics.median(_timed(lambda: score_grids(model, probe)) for _ in range(5)),
        (FP32,),
    )
    rows.append(_row("scores cpu", "score_grids 32 seqs", mms, FP32, r))
    cfg12 = ModelConfig(**GPT2_SHAPE)
    model12 = build_model(cfg12)
    probe12 = repeated_tokens(16, 60, low=1000, high=20000, bos_id=50256, prefix_max=7, seed=0)
    mms = forward_matmuls(cfg12, 16, probe12.tokens.shape[1], unembed=False)
    r = _rated(mms, lambda: _timed(lambda: head_scores(model12, probe12)), (FP32,))
    rows.append(_row("scores 12L", "head_scores 16 seqs", mms, FP32, r))
    return rows


def copy_rank_paths(n_heads: int) -> list[dict[str, Any]]:
    """copy_accuracy on ``n_heads`` heads, bf16 and fp32 candidates; the executed matmuls are
    recorded by wrapping the block steps of analysis.self_ranks."""
    from interp_toolkit.weights import self_ranks as sr
    from interp_toolkit.weights.circuits import copy_accuracy

    cfg, model = _gpt2_shaped()
    heads = [(0, h) for h in range(n_heads)]
    v, d, dh = cfg.d_vocab, cfg.d_model, cfg.d_head
    factor_mms = [Matmul("W_E W_V", v, d, dh), Matmul("W_O W_U", dh, d, v)] * n_heads
    seen: list[Matmul] = []
    real = {"_block": sr._Scan._block, "_block16": sr._Scan._block16}

    def recording(name: str):
        def block(self, idx, lo, hi, cap):
            seen.append(Matmul(name, len(idx), self.d, hi - lo))
            return real[name](self, idx, lo, hi, cap)

        return block

    rows, results = [], {}
    for candidates in ("bf16", "fp32"):
        seen.clear()
        sr._Scan._block, sr._Scan._block16 = recording("_block"), recording("_block16")
        try:
            t0 = now()
            results[candidates] = copy_accuracy(model, (1, 5), heads=heads, candidates=candidates)
            seconds = now() - t0
        finally:
            sr._Scan._block, sr._Scan._block16 = real["_block"], real["_block16"]
        # FLOPs as executed; each block's rate is looked up at its power-of-2 rounded shape
        blocks = [Matmul(m.name, _pow2(m.m), m.k, _pow2(m.n)) for m in seen]
        rates = measure_rates(factor_mms + blocks, (FP32, BF16))
        roof = roofline_seconds(factor_mms, rates[FP32]) + sum(
            m.flops / rates[BF16 if m.name == "_block16" else FP32][timed_shape(b)]
            for m, b in zip(seen, blocks, strict=True)
        )
        executed = flops(factor_mms) + flops(seen)
        rows.append(
            {
                "path": "copy ranks",
                "variant": f"{candidates} candidates, {n_heads} heads",
                "matmul_gflop": round(executed / 1e9, 2),
                "dtype": f"{candidates}+fp32",
                "seconds": round(seconds, 3),
                "roofline_s": round(roof, 3),
                "gflop_s": round(executed / seconds / 1e9, 1),
                "fraction": round(roof / seconds, 3),
                "bf16_block_gflop": round(flops(m for m in seen if m.name == "_block16") / 1e9, 2),
                "fp32_recheck_gflop": round(flops(m for m in seen if m.name == "_block") / 1e9, 2),
            }
        )
    # heads not asked for are NaN in both (NaN != NaN): compare the measured ones
    same = all(
        torch.equal(results["bf16"][k][0, :n_heads], results["fp32"][k][0, :n_heads])
        for k in (1, 5)
    )
    for r in rows:
        r["bf16_equals_fp32"] = same
    return rows


def _pow2(x: int) -> int:
    return 1 << max(6, (x - 1).bit_length())


def probe_neuron_paths() -> list[dict[str, Any]]:
    from interp_toolkit.probing import probes
    from interp_toolkit.units import neurons

    cfg, model = _gpt2_shaped(mlp=True)
    tokens = torch.randint(0, cfg.d_vocab, (8, 128), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mms = forward_matmuls(cfg, 8, 128, unembed=False)
    with torch.no_grad():
        r = _rated(mms, lambda: _timed(lambda: probes.stream_at(model, tokens, mask)), (FP32,))
    rows = [_row("probe stream", "stream_at 8x128", mms, FP32, r)]
    mms = [Matmul("W_out W_U", cfg.mlp_width, cfg.d_model, cfg.d_vocab)]
    neurons.promoted_tokens(model, 0)  # the folded copy is made once per call: warm the path
    r = _rated(mms, lambda: _timed(lambda: neurons.promoted_tokens(model, 0)), (FP32,))
    rows.append(_row("neuron tokens", "promoted_tokens L0", mms, FP32, r))
    return rows


PATHS = ("train cpu", "train seed", "scores", "copy ranks", "probes")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed-batch", type=int, default=8)
    ap.add_argument("--ov-heads", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2, help="alternating training repeats")
    ap.add_argument("--only", nargs="*", choices=PATHS)
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = set_clock(args.threads, args.clock)
    loads, rows = [os.getloadavg()[0]], []
    todo = args.only or PATHS
    from interp_toolkit.training.presets import get_preset

    shapes = {}
    for name, batch in (("cpu", None), ("seed", args.seed_batch)):
        p = get_preset(name, 2)
        shapes[name] = training_matmuls(forward_matmuls(p.model, batch or p.train.batch_size))
    rate_rows = []
    for name, mms in shapes.items():
        for row in rate_table(mms, measure_rates(mms, (FP32, BF16))):
            rate_rows.append({"preset": name, **row})
    print_table(rate_rows, list(rate_rows[0]))
    steps = {
        "train cpu": lambda: train_path("cpu", 2, 30, 5, None, args.threads, args.repeats),
        "train seed": lambda: train_path("seed", 2, 4, 1, args.seed_batch, args.threads, 1),
        "scores": scores_paths,
        "copy ranks": lambda: copy_rank_paths(args.ov_heads),
        "probes": probe_neuron_paths,
    }
    for path in todo:
        print(f"{path} ...", flush=True)
        new = steps[path]()
        loads.append(os.getloadavg()[0])
        for r in new:
            print({k: r[k] for k in ("path", "variant", "seconds", "fraction")}, flush=True)
        rows += new
    columns = [
        "path",
        "variant",
        "dtype",
        "matmul_gflop",
        "seconds",
        "roofline_s",
        "gflop_s",
        "fraction",
    ]
    print_table(rows, columns)
    goals = _goals(rows)
    for line in goals["lines"]:
        print(line)
    write_result(
        "roofline",
        {
            "threads": args.threads,
            "clock": clock,
            "seed_batch": args.seed_batch,
            "matmul_rates": rate_rows,
            "paths": rows,
            "goals": GOALS,
            "met": goals["met"],
            "load_avg_1min": {"min": min(loads), "max": max(loads)},
        },
        args.json,
    )


def _goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    lines, met = [], {}
    for preset in ("cpu", "seed"):
        bf16 = next(
            (r for r in rows if r["path"] == f"train {preset}" and r["variant"] == "ours bf16"),
            None,
        )
        if bf16 is None:
            continue
        met[f"train {preset} bf16 vs fp32 reference"] = ok = (
            bf16["vs_reference"] >= GOALS["train_vs_reference"]
        )
        lines.append(
            f"train {preset}: bf16 {bf16['vs_reference']:.2f}x the fp32 reference "
            f"(goal >= {GOALS['train_vs_reference']}: {'met' if ok else 'NOT met'}); "
            f"{bf16['fraction']:.0%} of the bf16 roofline"
        )
        if preset == "seed":
            met["seed step bf16 roofline fraction"] = ok = (
                bf16["fraction"] >= GOALS["seed_step_fraction"]
            )
            lines.append(
                f"seed step: {bf16['fraction']:.0%} of the bf16 roofline (goal >= "
                f"{GOALS['seed_step_fraction']:.0%}: {'met' if ok else 'NOT met'})"
            )
    for r in rows:
        if not r["path"].startswith("train"):
            met[f"{r['path']} ({r['variant']})"] = ok = r["fraction"] >= GOALS["analysis_fraction"]
            lines.append(
                f"{r['path']} ({r['variant']}): {r['fraction']:.0%} of its roofline "
                f"(goal >= 50%: {'met' if ok else 'NOT met'})"
            )
    return {"lines": lines, "met": met}


if __name__ == "__main__":
    main()
