"""torch.compile tried on the training step and on the head scoring (issue 24, item 3).

    python benchmarks/compile_trial.py [--threads 2] [--steps 40] [--warmup 10]

Training: the cpu preset's 2-layer step (NextTokenLoss on the bridge, fused attention, as
train_model runs it; AdamW and gradient clipping as TL's loop does) eager and under
``torch.compile(loss_module)`` (inductor), in fp32 and bf16, alternating: graph breaks
(``torch._dynamo.explain``), compile seconds (the first steps), steady tokens/s, and the loss
difference over the same batches. Scoring: ``head_scores`` (the hooks read patterns and stop the
pass early) with the bridge's forward compiled: graph breaks, seconds, and whether the scores are
equal. Writes experiments/archive/results/compile_trial.json (with the load average).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import print_table, write_result  # noqa: E402
from _flops import now, set_clock  # noqa: E402


def _explain(fn, *args) -> dict[str, Any]:
    import torch._dynamo

    torch._dynamo.reset()
    try:
        ex = torch._dynamo.explain(fn)(*args)
    except Exception as exc:  # noqa: BLE001 - what compile says is the measurement
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    reasons = sorted({str(getattr(b, "reason", b)).splitlines()[0][:160] for b in ex.break_reasons})
    return {"graphs": ex.graph_count, "graph_breaks": ex.graph_break_count, "reasons": reasons}


def train_case(preset, batches, precision: str, compiled: bool, warmup: int) -> dict[str, Any]:
    from interp_toolkit.models.build import build_model
    from interp_toolkit.runtime.devices import precision_named
    from interp_toolkit.training.loop import NextTokenLoss
    from interp_toolkit.training.sdpa import fused_attention

    cpu = torch.device("cpu")
    prec = precision_named(precision)
    model = build_model(preset.model)
    model.train()
    module = NextTokenLoss(model, prec, cpu)
    step_fn = torch.compile(module) if compiled else module
    opt = torch.optim.AdamW(model.parameters(), lr=preset.train.lr, betas=preset.train.betas)
    losses, t_first, t0 = [], 0.0, 0.0
    start = now()
    with fused_attention(model), prec.matmuls(cpu):
        for i, tokens in enumerate(batches):
            if i == warmup:
                t_first, t0 = now() - start, now()
            loss = step_fn(tokens)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            losses.append(float(loss))
    dt = now() - t0
    tok = (len(batches) - warmup) * batches[0][:, 1:].numel()
    return {"tokens_per_s": tok / dt, "first_steps_s": t_first, "losses": losses}


def scoring_case(compiled: bool) -> dict[str, Any]:
    from interp_toolkit.heads.discovery import head_scores
    from interp_toolkit.heads.repeats import default_layout, repeated_tokens
    from interp_toolkit.models.build import build_model
    from interp_toolkit.training.presets import get_preset

    cfg = get_preset("cpu", 2).model
    model = build_model(cfg)
    period, prefix = default_layout(cfg.n_ctx)
    probe = repeated_tokens(32, period, low=1, high=cfg.d_vocab, bos_id=0, prefix_max=prefix)
    if compiled:
        model.forward = torch.compile(model.forward)
    out = {}
    t0 = now()
    first = head_scores(model, probe)
    out["first_s"] = now() - t0
    times = []
    for _ in range(5):
        t0 = now()
        head_scores(model, probe)
        times.append(now() - t0)
    out["seconds"] = statistics.median(times)
    out["induction"] = first.induction
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = set_clock(args.threads)
    from train_throughput import timed_preset

    from interp_toolkit.models.build import build_model
    from interp_toolkit.runtime.devices import PRECISIONS
    from interp_toolkit.training.loop import NextTokenLoss
    from interp_toolkit.training.sdpa import fused_attention

    loads = [os.getloadavg()[0]]
    preset, batches = timed_preset("cpu", 2, args.steps, args.threads)
    model = build_model(preset.model)
    model.train()
    explain = {}
    for precision in ("fp32", "bf16"):
        module = NextTokenLoss(model, PRECISIONS[precision], torch.device("cpu"))
        with fused_attention(model):
            explain[f"train {precision}"] = _explain(module, batches[0])
    rows, results = [], {}
    for precision in ("fp32", "bf16"):
        for compiled in (False, True):
            name = f"train {precision} {'compiled' if compiled else 'eager'}"
            try:
                results[name] = train_case(preset, batches, precision, compiled, args.warmup)
            except Exception as exc:  # noqa: BLE001
                results[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
            loads.append(os.getloadavg()[0])
            print(name, {k: v for k, v in results[name].items() if k != "losses"}, flush=True)
    for precision in ("fp32", "bf16"):
        eager, comp = (results[f"train {precision} {m}"] for m in ("eager", "compiled"))
        row = {"case": f"train step {precision}", **explain[f"train {precision}"]}
        if "error" not in comp:
            row |= {
                "eager_tok_s": round(eager["tokens_per_s"]),
                "compiled_tok_s": round(comp["tokens_per_s"]),
                "speedup": round(comp["tokens_per_s"] / eager["tokens_per_s"], 3),
                "compile_s": round(comp["first_steps_s"] - eager["first_steps_s"], 1),
                "max_loss_diff": round(
                    max(abs(a - b) for a, b in zip(eager["losses"], comp["losses"], strict=True)),
                    5,
                ),
            }
        else:
            row["error"] = comp["error"]
        rows.append(row)
    score = {}
    for compiled in (False, True):
        try:
            score[compiled] = scoring_case(compiled)
        except Exception as exc:  # noqa: BLE001
            score[compiled] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
    loads.append(os.getloadavg()[0])
    row = {"case": "head_scores (hooks)"}
    if "error" in score[True]:
        row["error"] = score[True]["error"]
    else:
        row |= {
            "eager_s": round(score[False]["seconds"], 4),
            "compiled_s": round(score[True]["seconds"], 4),
            "speedup": round(score[False]["seconds"] / score[True]["seconds"], 3),
            "compile_s": round(score[True]["first_s"] - score[False]["first_s"], 1),
            "scores_equal": bool(torch.equal(score[True]["induction"], score[False]["induction"])),
        }
    rows.append(row)
    for r in rows:
        print(r)
    print_table(rows, sorted({k for r in rows for k in r if k != "reasons"}, key=str))
    write_result(
        "compile_trial",
        {
            "threads": args.threads,
            "clock": clock,
            "steps": args.steps,
            "warmup": args.warmup,
            "rows": rows,
            "load_avg_1min": {"min": min(loads), "max": max(loads)},
        },
        str(Path(__file__).resolve().parent / "results" / "compile_trial.json"),
    )


if __name__ == "__main__":
    main()
