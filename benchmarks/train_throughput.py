"""Training throughput: our training step (TransformerLens's ``train`` loop on a TransformerBridge,
with our metrics/checkpoint hooks) against a reference attention-only model written the way the
seed writes it (plain PyTorch modules, same config, batch, optimizer, threads, device, precision).

    python benchmarks/train_throughput.py [--preset cpu] [--layers 2] [--device auto]
        [--precision fp32] [--steps 60] [--threads 2] [--repeats 3]

Three trainers alternate, ``--repeats`` times each, in this one process: ``new`` (train_model as
it is), ``old`` (train_model with fused attention switched off: TransformerLens's explicit softmax
in every training step, as before) and ``reference``. Medians are compared; ``new`` and ``old``
must end with the same weights up to float rounding (``max_dw_new_old``). Prints a table and writes
benchmarks/results/train_throughput[_DEVICE].json. Goal: new / reference >= 1.0.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import print_table, write_result


class SeedAttnOnly(nn.Module):
    """An attention-only transformer as the seed writes it: nn.Embedding, nn.Linear, manual attention."""

    def __init__(
        self, d_vocab: int, d_model: int, n_heads: int, d_head: int, n_layers: int, n_ctx: int
    ):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_head
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
        x = self.embed(tokens) + self.pos(torch.arange(p, device=tokens.device))
        for layer in self.layers:
            q = layer["q"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            k = layer["k"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
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
    cfg, tc = preset.model, preset.train
    model = SeedAttnOnly(cfg.d_vocab, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.n_layers, cfg.n_ctx)
    model.to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay or 0.0
    )
    t0 = None
    with precision.apply(device):
        for i, cpu_tokens in enumerate(batches):
            if i == warmup:
                _sync(device)
                t0 = time.perf_counter()
            tokens = cpu_tokens.to(device)
            logits = model(tokens[:, :-1])  # windows of n_ctx + 1 tokens, as ours
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            loss.backward()
            if tc.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tc.max_grad_norm)
            opt.step()
            opt.zero_grad()
        _sync(device)
    dt = time.perf_counter() - t0
    return (len(batches) - warmup) * batches[0][:, 1:].numel() / dt


def ours_tokens_per_s(
    preset, steps: int, warmup: int, device, fused: bool
) -> tuple[float, dict[str, torch.Tensor]]:
    """tokens/s of train_model between steps ``warmup`` and ``steps - 1``, and its final weights;
    ``fused=False`` switches the fused attention path off (the old training step)."""
    from interp_toolkit.training import loop, train_model

    marks: dict[int, float] = {}

    def clock(info):
        if info.step in (warmup, steps - 1):
            _sync(device)
            marks[info.step] = time.perf_counter()

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


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    ap.add_argument("--precision", default="fp32", help="fp32 | tf32 | bf16 (CUDA only)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats (median)")
    ap.add_argument(
        "--json", default=None, help="where to write the JSON (default benchmarks/results/)"
    )
    args = ap.parse_args()

    from interp_toolkit.devices import precision_named, resolve_device
    from interp_toolkit.presets import get_preset, with_overrides

    device = resolve_device(args.device)
    precision = precision_named(args.precision)
    torch.set_num_threads(args.threads)
    preset = get_preset(args.preset, args.layers)
    # no periodic scoring/checkpointing inside the timed window: this measures the training step
    preset = with_overrides(
        preset,
        steps=args.steps,
        threads=args.threads,
        precision=args.precision,
        score_every=10**9,
        checkpoint_every=10**9,
        log_every=10,
    )
    # the reference trains on batches drawn the same way (same stream, same shapes)
    from interp_toolkit.analysis.batches import default_token_range
    from interp_toolkit.data import TrainStream, build_codec, tokenize_corpus, windows

    corpus = tokenize_corpus(preset.data.corpus, preset.data.val_fraction, preset.data.max_tokens)
    codec = build_codec(corpus, preset.data.vocab_size)
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
        end_step=args.steps,
    )
    batches = [stream.batch(s) for s in range(args.steps)]
    # alternate the three, several times: a shared machine is noisy; compare medians
    runs: dict[str, list[float]] = {"new": [], "old": [], "reference": []}
    weights: dict[str, dict[str, torch.Tensor]] = {}
    for _ in range(args.repeats):
        for name in ("new", "old"):
            tok_s, weights[name] = ours_tokens_per_s(
                preset, args.steps, args.warmup, device, fused=name == "new"
            )
            runs[name].append(tok_s)
        runs["reference"].append(
            reference_tokens_per_s(preset, batches, args.warmup, device, precision)
        )
    med = {k: statistics.median(v) for k, v in runs.items()}
    max_dw = max(float((weights["new"][k] - weights["old"][k]).abs().max()) for k in weights["new"])

    row = {
        "preset": args.preset,
        "layers": args.layers,
        "device": str(device),
        "precision": args.precision,
        "d_model": preset.model.d_model,
        "d_vocab": preset.model.d_vocab,
        "batch": f"{preset.train.batch_size}x{preset.model.n_ctx}",
        "threads": args.threads,
        "new_tok_s": round(med["new"], 1),
        "old_tok_s": round(med["old"], 1),
        "seed_style_tok_s": round(med["reference"], 1),
        "new_vs_ref": round(med["new"] / med["reference"], 3),
        "old_vs_ref": round(med["old"] / med["reference"], 3),
        "max_dw_new_old": float(f"{max_dw:.2e}"),
    }
    print_table([row], list(row))
    write_result(
        "train_throughput" if device.type == "cpu" else f"train_throughput_{device.type}",
        {
            "rows": [row],
            "runs": {k: [round(x) for x in v] for k, v in runs.items()},
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
