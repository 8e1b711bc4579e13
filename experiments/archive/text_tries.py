"""The exploration harness behind docs/recipes.md's table of tries: plain-PyTorch attention-only
models on stdlib text (no synthetic windows), scored every ``--eval-every`` steps.

    python benchmarks/text_tries.py --name L --pos shortformer --vocab 256 --lr 6e-3 --warmup 200

It mirrors the toolkit's recipe (TL's gpt2 init: N(0, 0.8/sqrt(d)), W_O / sqrt(2L), zero biases;
token and position embeddings N(0, 1); windows of n_ctx + 1 tokens in a seeded per-epoch
permutation; AdamW, betas (0.9, beta2), clip 1.0, linear warmup) without TransformerLens, so
settings the toolkit does not offer (hashed codecs, rotary/shortformer variants, schedules) can be
tried quickly. Logged per scoring (one JSON line each in LOG_DIR/NAME.jsonl): tokens, minutes,
held-out loss, ``icl`` (loss over the last quarter of positions minus positions n_ctx/16..n_ctx/8),
``rep_drop`` (a held-out half-window followed by itself: loss on copy 1 minus copy 2), each
layer-0 head's previous-token score and each last-layer head's induction score (plain and
value-weighted) on 64 repeated-random-token rows laid out like the toolkit's default probe.
Codecs: ``compact`` (the K-1 most frequent ids + <unk>, as the toolkit), ``hash`` (the K-B most
frequent ids, the rest hashed into B bucket ids), ``gpt2``.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from interp_toolkit.text.codecs import EOT_ID, GPT2_VOCAB_SIZE  # noqa: E402
from interp_toolkit.text.stream import tokenize_corpus  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--log-dir", default="experiments/archive/results/text_tries")
p.add_argument("--layers", type=int, default=2)
p.add_argument("--ctx", type=int, default=64)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--d", type=int, default=128)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--vocab", type=int, default=1024)
p.add_argument("--codec", default="compact")
p.add_argument("--buckets", type=int, default=256)
p.add_argument("--pos", default="standard")
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--wd", type=float, default=0.0)
p.add_argument("--warmup", type=int, default=0)
p.add_argument("--steps", type=int, default=10000)
p.add_argument("--eval-every", type=int, default=250)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--bf16", action="store_true")
p.add_argument("--minutes", type=float, default=1e9)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--emb-std", type=float, default=1.0)
p.add_argument("--pos-std", type=float, default=None)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--pos-init", default="normal")
p.add_argument("--decay", default="none")
p.add_argument("--decay-start", type=int, default=0)
p.add_argument("--final-lr-frac", type=float, default=0.0)
p.add_argument("--beta2", type=float, default=0.98)
p.add_argument("--stop-ind", type=float, default=0.0, help="stop 2 evals after vw >= this")
args = p.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)

# ---------------------------------------------------------------- data / codec
tc = tokenize_corpus("stdlib", progress=False)
tr = np.asarray(tc.train_ids).astype(np.int64)
va = np.asarray(tc.val_ids).astype(np.int64)
counts = np.bincount(tr, minlength=GPT2_VOCAB_SIZE).astype(np.int64)
counts[EOT_ID] = np.iinfo(np.int64).max
order = np.lexsort((np.arange(GPT2_VOCAB_SIZE), -counts))
K = args.vocab
if args.codec == "compact":
    lut = np.full(GPT2_VOCAB_SIZE, K - 1)
    lut[order[: K - 1]] = np.arange(K - 1)
    probe_ids = np.arange(0, K - 1)
elif args.codec == "hash":
    B = args.buckets
    lut = np.full(GPT2_VOCAB_SIZE, -1)
    lut[order[: K - B]] = np.arange(K - B)
    rare = lut < 0
    lut[rare] = (K - B) + (np.arange(GPT2_VOCAB_SIZE)[rare] * 2654435761 % B)
    probe_ids = np.arange(0, K)
elif args.codec == "gpt2":
    K = GPT2_VOCAB_SIZE
    lut = np.arange(K)
    probe_ids = np.arange(1000, 20000)
bos = int(lut[EOT_ID])
probe_ids = probe_ids[probe_ids != bos]
trm, vam = lut[tr], lut[va]
C = args.ctx
W = C + 1
n_win = len(trm) // W
train_windows = torch.from_numpy(trm[: n_win * W].reshape(n_win, W))
val_windows = torch.from_numpy(vam[: (len(vam) // W) * W].reshape(-1, W))[:128]


def batch_at(step):
    per_epoch = n_win // args.batch
    epoch, i = divmod(step, per_epoch)
    perm = batch_at.perms.get(epoch)
    if perm is None:
        perm = torch.from_numpy(np.random.default_rng([args.seed, 2, epoch]).permutation(n_win))
        batch_at.perms = {epoch: perm}
    return train_windows[perm[i * args.batch : (i + 1) * args.batch]]


batch_at.perms = {}


# ---------------------------------------------------------------- model
class Attn(nn.Module):
    def __init__(s, d, h, L):
        super().__init__()
        s.h, s.dh = h, d // h
        std = 0.8 / math.sqrt(d)
        s.q, s.k, s.v, s.o = (nn.Linear(d, d) for _ in range(4))
        for m in (s.q, s.k, s.v, s.o):
            nn.init.normal_(m.weight, std=std)
            nn.init.zeros_(m.bias)
        s.o.weight.data /= math.sqrt(2 * L)

    def forward(s, x, pos=None, rope=None, need=False):
        b, t, d = x.shape
        qk_in = x if pos is None else x + pos
        q = s.q(qk_in).view(b, t, s.h, s.dh).transpose(1, 2)
        k = s.k(qk_in).view(b, t, s.h, s.dh).transpose(1, 2)
        v = s.v(x).view(b, t, s.h, s.dh).transpose(1, 2)
        if rope is not None:
            q, k = rope(q), rope(k)
        if not need:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return s.o(z.transpose(1, 2).reshape(b, t, d)), None
        sc = q @ k.transpose(-1, -2) / math.sqrt(s.dh)
        sc = sc.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        a = sc.softmax(-1)
        z = a @ v
        return s.o(z.transpose(1, 2).reshape(b, t, d)), (a, v)


def make_rope(dh, T):
    inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
    ang = torch.arange(T).float()[:, None] * inv[None]
    cos, sin = ang.cos(), ang.sin()

    def rope(x):
        t = x.shape[-2]
        x1, x2 = x[..., ::2], x[..., 1::2]
        c, s_ = cos[:t], sin[:t]
        return torch.stack([x1 * c - x2 * s_, x1 * s_ + x2 * c], -1).flatten(-2)

    return rope


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        d = args.d
        s.E = nn.Parameter(torch.randn(K, d) * args.emb_std)
        s.P = nn.Parameter(torch.randn(C, d) * (args.pos_std or args.emb_std))
        if args.pos_init == "sinusoidal":
            pos = torch.arange(C).float()[:, None]
            inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
            P = torch.zeros(C, d)
            P[:, 0::2], P[:, 1::2] = torch.sin(pos * inv), torch.cos(pos * inv)
            s.P = nn.Parameter(P * math.sqrt(2) * (args.pos_std or args.emb_std))
        s.blocks = nn.ModuleList(Attn(d, args.heads, args.layers) for _ in range(args.layers))
        s.U = nn.Linear(d, K, bias=False)
        nn.init.normal_(s.U.weight, std=0.8 / math.sqrt(d))
        s.rope = make_rope(d // args.heads, C) if args.pos == "rotary" else None

    def forward(s, tok, need=False):
        t = tok.shape[1]
        x = s.E[tok]
        pos = None
        if args.pos == "standard":
            x = x + s.P[:t]
        elif args.pos == "shortformer":
            pos = s.P[:t]
        caches = []
        for blk in s.blocks:
            out, c = blk(x, pos, s.rope, need)
            x = x + out
            caches.append(c)
        return s.U(x), caches


model = Model()
opt = torch.optim.AdamW(
    model.parameters(), lr=args.lr, betas=(0.9, args.beta2), weight_decay=args.wd
)

# ---------------------------------------------------------------- probes
gen = torch.Generator().manual_seed(123)
period = min(50, (C - 1 - min(16, C // 8)) // 2)
prefix_max = min(16, C // 8)
NP = 64
pid = torch.from_numpy(probe_ids)
probe = torch.empty(NP, 1 + prefix_max + 2 * period, dtype=torch.long)
starts = torch.randint(0, prefix_max + 1, (NP,), generator=gen)
for i in range(NP):
    ids = pid[torch.randperm(len(pid), generator=gen)[: period + prefix_max]]
    seg, extra = ids[:period], ids[period:]
    p_ = int(starts[i])
    probe[i] = torch.cat([torch.tensor([bos]), extra[:p_], seg, seg, extra[p_:]])
starts = starts + 1


@torch.no_grad()
def scores():
    _, caches = model(probe, need=True)
    out = {}
    for layer, (a, v) in enumerate(caches):
        vn = v.norm(dim=-1)  # b h k
        ind, vw, prev = [], [], []
        for i in range(NP):
            s0 = int(starts[i])
            qs = torch.arange(s0 + period, s0 + 2 * period)
            ks = qs - period + 1
            A = a[i][:, qs, :]  # h q k
            ind.append(A[:, torch.arange(len(qs)), ks].mean(-1))
            Aw = A * vn[i][:, None, :]
            Aw = Aw / Aw.sum(-1, keepdim=True)
            vw.append(Aw[:, torch.arange(len(qs)), ks].mean(-1))
            qb = torch.arange(2, s0 + 2 * period)
            prev.append(a[i][:, qb, qb - 1].mean(-1))
        out[layer] = (torch.stack(ind).mean(0), torch.stack(vw).mean(0), torch.stack(prev).mean(0))
    return out


@torch.no_grad()
def text_metrics():
    x = val_windows
    logits, _ = model(x[:, :-1])
    lpt = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # b t
    loss = lpt.mean().item()
    e0, e1 = max(1, C // 16), max(2, C // 8)
    icl = (lpt[:, -C // 4 :].mean() - lpt[:, e0:e1].mean()).item()
    half = C // 2
    rep = torch.cat([x[:, :half], x[:, :half]], 1)
    lg, _ = model(rep)
    lr_ = F.cross_entropy(lg[:, :-1].transpose(1, 2), rep[:, 1:], reduction="none")
    drop = (lr_[:, : half - 1].mean() - lr_[:, half:].mean()).item()
    return loss, icl, drop


# ---------------------------------------------------------------- train
os.makedirs(args.log_dir, exist_ok=True)
log = open(f"{args.log_dir}/{args.name}.jsonl", "w")
log.write(json.dumps({"args": vars(args)}) + "\n")
t0 = time.time()
losses = []
hit = None
ctx = (
    torch.autocast("cpu", dtype=torch.bfloat16)
    if args.bf16
    else torch.autocast("cpu", enabled=False)
)
for step in range(args.steps + 1):
    if step % args.eval_every == 0 or step == args.steps:
        model.eval()
        sc = scores()
        loss, icl, drop = text_metrics()
        last = sc[args.layers - 1]
        row = {
            "step": step,
            "tokens": step * args.batch * C,
            "min": round((time.time() - t0) / 60, 2),
            "train": round(float(np.mean(losses[-50:])), 4) if losses else None,
            "val": round(loss, 4),
            "icl": round(icl, 4),
            "rep_drop": round(drop, 4),
            "prev0": [round(v, 3) for v in sc[0][2].tolist()],
            "ind_last": [round(v, 3) for v in last[0].tolist()],
            "vw_last": [round(v, 3) for v in last[1].tolist()],
        }
        log.write(json.dumps(row) + "\n")
        log.flush()
        print(
            f"{step:6d} {row['min']:6.2f}m val {loss:.3f} icl {icl:+.3f} rep {drop:.3f} "
            f"prev0 {max(row['prev0']):.2f} ind {max(row['ind_last']):.3f} vw {max(row['vw_last']):.3f}",
            flush=True,
        )
        if hit is None and max(row["vw_last"]) >= args.stop_ind > 0:
            hit = step
        if hit is not None and step >= hit + 2 * args.eval_every:
            break
        if (time.time() - t0) / 60 > args.minutes:
            break
        model.train()
    if step == args.steps:
        torch.save(model.state_dict(), f"{args.log_dir}/{args.name}.pt")
        break
    xb = batch_at(step)
    lr = args.lr * (min(1.0, (step + 1) / args.warmup) if args.warmup else 1.0)
    if args.decay != "none" and step >= args.decay_start:
        frac = (step - args.decay_start) / max(1, args.steps - args.decay_start)
        shape = 0.5 * (1 + math.cos(math.pi * frac)) if args.decay == "cosine" else 1 - frac
        lr = lr * (args.final_lr_frac + (1 - args.final_lr_frac) * shape)
    for g in opt.param_groups:
        g["lr"] = lr
    with ctx:
        logits, _ = model(xb[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, K), xb[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if args.clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    opt.step()
    losses.append(loss.item())
