"""Training throughput: our training step (TransformerLens's ``train`` loop on a TransformerBridge,
with our metrics/checkpoint hooks) against a reference attention-only model written the way the
seed writes it (plain PyTorch modules, same config, batch, optimizer, threads, device), and
against the machine's matmul roofline (benchmarks/_flops.py).

    python benchmarks/train_throughput.py [--preset cpu] [--layers 2] [--device auto]
        [--precision fp32] [--steps 60] [--threads 2] [--repeats 3]

The trainers alternate, ``--repeats`` times each, each run in a fresh process (process-wide
settings such as the allocator's cannot leak from one to the next), and medians are compared.
On the CPU our training keeps freed memory for reuse (``runtime.devices.keep_freed_memory``);
the plain model runs as written (glibc's default) and, as ``reference*_kept``, with that setting
too.
With ``--precision fp32``: ``new`` (train_model as it is), ``old`` (train_model with fused
attention switched off: TransformerLens's explicit softmax in every training step, as before) and
``reference``; ``new`` and ``old`` must end with the same weights up to float rounding
(``max_dw_new_old``). Goal: new / reference >= 1.0.
With ``--precision bf16`` (or tf32): ``new`` (train_model in that precision), ``new_fp32``,
``reference`` (the plain model in fp32) and ``reference_bf16`` (the plain model in the same
precision: the baseline of the goal). Goal, in every precision: new / the reference in the same
precision >= 1.0; it also prints new / the fp32 reference, and the share of the matmul roofline
each reaches (on the CPU: the step's FLOPs at the rate ``torch.matmul`` reaches at its shapes,
measured in each repeat). The reference has the preset's positions (standard, or shortformer:
learned positions added to every layer's query and key inputs only) and flushes denormals when
the preset does. Prints a table and writes
benchmarks/results/train_throughput[_PRESET][_PRECISION][_DEVICE].json (no preset suffix for cpu).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import print_table, write_result
from _flops import (
    dtype_of,
    flops,
    forward_matmuls,
    measure_rates,
    median_rates,
    now,
    roofline_seconds,
    set_clock,
    training_matmuls,
)

GOAL = 1.0  # new / the plain model in the same precision


class SeedAttnOnly(nn.Module):
    """An attention-only transformer as the seed writes it: nn.Embedding, nn.Linear, manual attention."""

    def __init__(
        self,
        d_vocab: int,
        d_model: int,
        n_heads: int,
        d_head: int,
        n_layers: int,
        n_ctx: int,
        shortformer: bool = False,
    ):
        super().__init__()
        self.n_heads, self.d_head, self.shortformer = n_heads, d_head, shortformer
        self.embed = nn.Embedding(d_vocab, d_model)
        self.pos = nn.Embedding(n_ctx, d_model)
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {
                    "q": nn.Linear(d_model, n_heads * d_head),
                    "k": nn.Linear(d_model, n_heads * d_head),
                    "v": nn.Linear(d_model, n_heads * d_head),
                    "o": nn.Linear(n_heads * d_head, d_model),
                }
            )
            for _ in range(n_layers)
        )
        self.unembed = nn.Linear(d_model, d_vocab, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool)))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        b, p = tokens.shape
        pos = self.pos(torch.arange(p, device=tokens.device))
        x = self.embed(tokens) if self.shortformer else self.embed(tokens) + pos
        for layer in self.layers:
            qk = x + pos if self.shortformer else x  # shortformer: positions in queries and keys
            q = layer["q"](qk).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            k = layer["k"](qk).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            v = layer["v"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
            scores = scores.masked_fill(~self.mask[:p, :p], float("-inf"))
            z = torch.softmax(scores, dim=-1) @ v
            x = x + layer["o"](z.transpose(1, 2).reshape(b, p, -1))
        return self.unembed(x)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reference_tokens_per_s(preset, batches, warmup: int, device, precision) -> float:
    """tokens/s of the plain model on ``batches``: ``precision``'s matmul setting over the loop,
    its autocast around each forward pass and loss (as our loop does)."""
    cfg, tc = preset.model, preset.train
    model = SeedAttnOnly(
        cfg.d_vocab,
        cfg.d_model,
        cfg.n_heads,
        cfg.d_head,
        cfg.n_layers,
        cfg.n_ctx,
        shortformer=cfg.positional == "shortformer",
    )
    model.to(device)
    if tc.flush_denormal and device.type == "cpu":
        torch.set_flush_denormal(True)  # as the preset's training does (process-wide)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay or 0.0
    )
    t0 = None
    with precision.matmuls(device):
        for i, cpu_tokens in enumerate(batches):
            if i == warmup:
                _sync(device)
                t0 = now()
            tokens = cpu_tokens.to(device)
            with precision.autocast(device):
                logits = model(tokens[:, :-1])  # windows of n_ctx + 1 tokens, as ours
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
                )
            loss.backward()
            if tc.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tc.max_grad_norm)
            opt.step()
            opt.zero_grad()
        _sync(device)
    dt = now() - t0
    return (len(batches) - warmup) * batches[0][:, 1:].numel() / dt


def ours_tokens_per_s(
    preset, steps: int, warmup: int, device, fused: bool = True, precision: str | None = None
) -> tuple[float, dict[str, torch.Tensor]]:
    """tokens/s of train_model between steps ``warmup`` and ``steps - 1``, and its final weights;
    ``fused=False`` switches the fused attention path off (the old training step);
    ``precision``: a --precision name (default: the preset's)."""
    from interp_toolkit.training import loop, train_model
    from interp_toolkit.training.presets import with_overrides

    preset = with_overrides(preset, precision=precision)
    marks: dict[int, float] = {}

    def clock(info):
        if info.step in (warmup, steps - 1):
            _sync(device)
            marks[info.step] = now()

    fused_attention = loop.fused_attention
    if not fused:
        loop.fused_attention = lambda model: contextlib.nullcontext()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            res = train_model(
                f"{tmp}/run",
                preset.model,
                preset.data,
                preset.train,
                progress=False,
                callbacks=[clock],
                device=device,
            )
    finally:
        loop.fused_attention = fused_attention
    # steps warmup+1 .. steps-1 are timed (the last step also scores heads and checkpoints)
    dt = marks[steps - 1] - marks[warmup]
    tokens = (steps - 1 - warmup) * preset.train.batch_size * preset.model.n_ctx
    weights = {k: v.detach().cpu() for k, v in res.run.model.state_dict().items()}
    return tokens / dt, weights


#: The suffix of a reference run with :func:`~interp_toolkit.runtime.devices.keep_freed_memory`
#: set (as our training sets it on the CPU): the plain model as written runs without it.
KEPT = "_kept"


def _measure(
    name: str, args: dict, preset, batches: list[torch.Tensor]
) -> tuple[float, dict[str, torch.Tensor] | None]:
    """One trainer's tokens/s (and ours, its final weights), in this (fresh) process, on the
    driver's :func:`timed_preset` (read once, not per trainer)."""
    from interp_toolkit.runtime.devices import (
        STRICT_FP32,
        keep_freed_memory,
        precision_named,
        resolve_device,
    )

    device = resolve_device(args["device"])
    torch.set_num_threads(args["threads"])
    if device.type == "cpu":
        set_clock(args["threads"], args["clock"])
    else:
        set_clock(0, "wall")
    if name.startswith("reference"):
        if name.endswith(KEPT):
            keep_freed_memory()
        base = name.removesuffix(KEPT)
        p = STRICT_FP32 if base == "reference" else precision_named(args["precision"])
        return reference_tokens_per_s(preset, batches, args["warmup"], device, p), None
    return ours_tokens_per_s(
        preset,
        args["steps"],
        args["warmup"],
        device,
        fused=name != "old",
        precision="fp32" if name == "new_fp32" else args["precision"],
    )


def timed_preset(name: str, layers: int, steps: int, threads: int):
    """The preset with the codec's vocabulary, no scoring or checkpoints inside the timed window,
    and the reference's batches (the same stream, the same shapes)."""
    from interp_toolkit.heads.repeats import default_token_range
    from interp_toolkit.text.stream import TrainStream, build_codec, tokenize_corpus, windows
    from interp_toolkit.training.presets import get_preset, with_overrides

    preset = with_overrides(
        get_preset(name, layers),
        steps=steps,
        threads=threads,
        score_every=10**9,
        checkpoint_every=10**9,
        log_every=10,
    )
    d = preset.data
    corpus = tokenize_corpus(d.corpus, d.val_fraction, d.max_tokens, store=d.store)
    codec = build_codec(corpus, d.vocab_size, d.codec)  # as training/trainer.py builds it
    preset = with_overrides(preset, d_vocab=codec.d_vocab)
    low, high = default_token_range(codec)
    span_min, span_max = preset.data.span_range(preset.model.n_ctx)
    stream = TrainStream(
        windows(corpus.train_ids, codec, preset.model.n_ctx + 1),
        batch_size=preset.train.batch_size,
        repeat_fraction=preset.data.repeat_fraction,
        low=low,
        high=high,
        span_min=span_min,
        span_max=span_max,
        seed=preset.train.seed,
        end_step=steps,
    )
    return preset, [stream.batch(s) for s in range(steps)]


def step_matmuls(preset):
    """The matmuls of one training step of ``preset`` (benchmarks/_flops.py)."""
    return training_matmuls(forward_matmuls(preset.model, preset.train.batch_size))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    ap.add_argument("--precision", default="fp32", help="fp32 | tf32 (CUDA only) | bf16")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats (median)")
    ap.add_argument(
        "--clock", choices=("cpu", "wall"), default=None, help="default: cpu with 1 thread"
    )
    ap.add_argument(
        "--json", default=None, help="where to write the JSON (default benchmarks/results/)"
    )
    args = ap.parse_args()

    from interp_toolkit.runtime.devices import precision_named, resolve_device

    device = resolve_device(args.device)
    precision_named(args.precision)  # a bad name: refused before any run
    torch.set_num_threads(args.threads)
    clock = set_clock(args.threads, args.clock) if device.type == "cpu" else set_clock(0, "wall")
    preset, batches = timed_preset(args.preset, args.layers, args.steps, args.threads)
    mixed = args.precision != "fp32"
    names = (
        ("new", "new_fp32", "reference", f"reference_{args.precision}")
        if mixed
        else ("new", "old", "reference")
    )
    if device.type == "cpu":  # the plain model with our allocator setting too
        names += tuple(f"{n}{KEPT}" for n in names if n.startswith("reference"))
    mms = step_matmuls(preset)
    dtypes = sorted({torch.float32, dtype_of(args.precision)}, key=str)
    on_cpu = device.type == "cpu"
    # alternate the trainers (and the matmul rates), several times: a shared machine is noisy
    runs: dict[str, list[float]] = {n: [] for n in names}
    rate_runs, loads = [], []
    weights: dict[str, dict[str, torch.Tensor]] = {}
    spawn = multiprocessing.get_context("spawn")
    for _ in range(args.repeats):
        for name in names:
            loads.append(os.getloadavg()[0])
            # each trainer in a fresh process: allocator, denormal and thread settings are
            # process-wide, and ours sets the allocator (keep_freed_memory) as it trains
            with ProcessPoolExecutor(1, mp_context=spawn) as pool:
                tok_s, w = pool.submit(_measure, name, vars(args), preset, batches).result()
            runs[name].append(tok_s)
            if w is not None:
                weights[name] = w
        if on_cpu:
            rate_runs.append(measure_rates(mms, dtypes))
    med = {k: statistics.median(v) for k, v in runs.items()}
    tokens_per_step = preset.train.batch_size * preset.model.n_ctx
    row = {
        "preset": args.preset,
        "layers": args.layers,
        "device": str(device),
        "precision": args.precision,
        "d_model": preset.model.d_model,
        "d_vocab": preset.model.d_vocab,
        "batch": f"{preset.train.batch_size}x{preset.model.n_ctx}",
        "threads": args.threads,
        "clock": clock,
        **{f"{k}_tok_s": round(v, 1) for k, v in med.items()},
        "new_vs_ref": round(med["new"] / med["reference"], 3),
    }
    same = f"reference_{args.precision}" if mixed else "reference"
    if mixed:
        row[f"new_vs_ref_{args.precision}"] = round(med["new"] / med[same], 3)
        row["new_fp32_vs_ref"] = round(med["new_fp32"] / med["reference"], 3)
        row[f"ref_{args.precision}_vs_ref"] = round(med[same] / med["reference"], 3)
    else:
        row["old_vs_ref"] = round(med["old"] / med["reference"], 3)
        row["max_dw_new_old"] = float(
            f"{max(float((weights['new'][k] - weights['old'][k]).abs().max()) for k in weights['new']):.2e}"
        )
    roofline = {}
    if on_cpu:
        rates = median_rates(rate_runs)
        for name in names:
            fp32 = name.removesuffix(KEPT) in ("new_fp32", "reference")
            dt = torch.float32 if fp32 else dtype_of(args.precision)
            roof_tok_s = tokens_per_step / roofline_seconds(mms, rates[dt])
            roofline[name] = {
                "matmul_dtype": str(dt).removeprefix("torch."),
                "roofline_tok_s": round(roof_tok_s, 1),
                "fraction": round(med[name] / roof_tok_s, 3),
            }
        row["new_roofline_fraction"] = roofline["new"]["fraction"]
    kept = f"{same}{KEPT}" if f"{same}{KEPT}" in med else None
    if kept:
        row[f"new_vs_{kept}"] = round(med["new"] / med[kept], 3)
    print_table([row], list(row))
    ratio = med["new"] / med[same]
    print(
        f"{args.precision}: ours / the plain model in {args.precision}: {ratio:.2f}x "
        f"(goal >= {GOAL}: {'met' if ratio >= GOAL else 'NOT met'})"
    )
    if kept:
        print(
            f"{args.precision}: ours / the plain model with our allocator setting "
            f"(keep_freed_memory): {med['new'] / med[kept]:.2f}x"
        )
    if mixed:
        print(
            f"{args.precision}: ours / the plain model in fp32: {med['new'] / med['reference']:.2f}x"
        )
    per_token = flops(mms) / tokens_per_step
    for name, r in roofline.items():
        print(
            f"{name}: {med[name] * per_token / 1e9:.0f} GFLOP/s = {r['fraction']:.0%} of the "
            f"{r['matmul_dtype']} matmul roofline ({r['roofline_tok_s']:,.0f} tokens/s)"
        )
    suffix = ("" if args.preset == "cpu" else f"_{args.preset}") + (
        "" if args.precision == "fp32" else f"_{args.precision}"
    )
    write_result(
        f"train_throughput{suffix}" + ("" if on_cpu else f"_{device.type}"),
        {
            "rows": [row],
            "runs": {k: [round(x) for x in v] for k, v in runs.items()},
            "flops_per_token": per_token,
            "roofline": roofline,
            "load_avg_1min": {"min": min(loads), "max": max(loads)},
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "goal": f"new / reference in {args.precision} >= {GOAL}",
            "goal_met": ratio >= GOAL,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
