"""Training throughput: our training step (TransformerLens's ``train`` loop on a TransformerBridge,
with our metrics/checkpoint hooks) against a reference attention-only model written the way the
seed writes it (plain PyTorch modules, same config, batch, optimizer and threads).

    python benchmarks/train_throughput.py [--steps 60] [--threads 2] [--layers 2] [--preset cpu]

Prints a table and writes benchmarks/results/train_throughput.json. Goal: ratio >= 1.0.
"""

from __future__ import annotations

import argparse
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
        x = self.embed(tokens) + self.pos(torch.arange(p))
        for layer in self.layers:
            q = layer["q"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            k = layer["k"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            v = layer["v"](x).view(b, p, self.n_heads, self.d_head).transpose(1, 2)
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
            scores = scores.masked_fill(~self.mask[:p, :p], float("-inf"))
            z = torch.softmax(scores, dim=-1) @ v
            x = x + layer["o"](z.transpose(1, 2).reshape(b, p, -1))
        return self.unembed(x)


def reference_tokens_per_s(preset, batches, warmup: int) -> float:
    cfg, tc = preset.model, preset.train
    model = SeedAttnOnly(cfg.d_vocab, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.n_layers, cfg.n_ctx)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay or 0.0
    )
    t0 = None
    for i, tokens in enumerate(batches):
        if i == warmup:
            t0 = time.perf_counter()
        logits = model(tokens[:, :-1])  # windows of n_ctx + 1 tokens, as ours
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        if tc.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.max_grad_norm)
        opt.step()
        opt.zero_grad()
    dt = time.perf_counter() - t0
    return (len(batches) - warmup) * batches[0][:, 1:].numel() / dt


def ours_tokens_per_s(preset, steps: int, warmup: int) -> float:
    from interp_toolkit.training import train_model

    marks: dict[int, float] = {}

    def clock(info):
        marks[info.step] = time.perf_counter()

    with tempfile.TemporaryDirectory() as tmp:
        train_model(
            f"{tmp}/run", preset.model, preset.data, preset.train, progress=False, callbacks=[clock]
        )

    # steps warmup+1 .. steps-1 are timed (the last step also scores heads and checkpoints)
    dt = marks[steps - 1] - marks[warmup]
    tokens = (steps - 1 - warmup) * preset.train.batch_size * preset.model.n_ctx
    return tokens / dt


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats (median)")
    ap.add_argument(
        "--json", default=None, help="where to write the JSON (default benchmarks/results/)"
    )
    args = ap.parse_args()

    from interp_toolkit.presets import get_preset, with_overrides

    torch.set_num_threads(args.threads)
    preset = get_preset(args.preset, args.layers)
    # no periodic scoring/checkpointing inside the timed window: this measures the training step
    preset = with_overrides(
        preset,
        steps=args.steps,
        threads=args.threads,
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
    # alternate the two, several times: a shared 2-core machine is noisy; compare medians
    ours_runs, ref_runs = [], []
    for _ in range(args.repeats):
        ours_runs.append(ours_tokens_per_s(preset, args.steps, args.warmup))
        ref_runs.append(reference_tokens_per_s(preset, batches, args.warmup))
    ours, ref = statistics.median(ours_runs), statistics.median(ref_runs)

    row = {
        "preset": args.preset,
        "layers": args.layers,
        "d_model": preset.model.d_model,
        "d_vocab": preset.model.d_vocab,
        "batch": f"{preset.train.batch_size}x{preset.model.n_ctx}",
        "threads": args.threads,
        "ours_tok_s": round(ours, 1),
        "seed_style_tok_s": round(ref, 1),
        "ratio": round(ours / ref, 3),
        "ours_runs": [round(x) for x in ours_runs],
        "seed_style_runs": [round(x) for x in ref_runs],
    }
    print_table([row], list(row))
    write_result(
        "train_throughput",
        {"rows": [row], "steps": args.steps, "warmup": args.warmup, "repeats": args.repeats},
        args.json,
    )


if __name__ == "__main__":
    main()
