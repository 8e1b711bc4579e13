#!/usr/bin/env python
"""Screen training recipes for a small attention-only transformer on stdlib bytes.

Self-contained: builds the byte corpus from the interpreter's stdlib .py files,
trains an attention-only transformer (no LN, no MLP) on ONE CPU thread, evaluates
induction / previous-token / loss metrics every --eval-every steps, and stops
early once the induction rule passes (unless --no-early-stop).

Writes a JSON file with config, per-checkpoint rows and the final outcome.
"""

import argparse
import json
import math
import os
import pathlib
import sys
import sysconfig
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)

PRINT_LO, PRINT_HI = 32, 126  # printable ASCII, inclusive (95 symbols)
DELTA = 50


# ----------------------------------------------------------------------------- corpus
def load_corpus(cache_dir):
    cache = pathlib.Path(cache_dir)
    tr_p, ho_p = cache / "train.u8", cache / "heldout.u8"
    if tr_p.exists() and ho_p.exists():
        return (np.fromfile(tr_p, dtype=np.uint8), np.fromfile(ho_p, dtype=np.uint8))
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    # skip site-packages and the stdlib's test folders (test/, */tests/, idlelib/idle_test/):
    # gives ~12.1 MB of source (the brief's "~12 MB").
    skip = {"test", "tests", "idle_test"}
    files = sorted(
        p
        for p in root.rglob("*.py")
        if "site-packages" not in str(p) and not (skip & set(p.relative_to(root).parts))
    )
    train, held = [], []
    for i, p in enumerate(files):
        try:
            b = p.read_bytes()
        except OSError:
            continue
        (held if i % 20 == 0 else train).append(b)
    tr = np.frombuffer(b"\n".join(train), dtype=np.uint8).copy()
    ho = np.frombuffer(b"\n".join(held), dtype=np.uint8).copy()
    cache.mkdir(parents=True, exist_ok=True)
    tr.tofile(tr_p)
    ho.tofile(ho_p)
    return tr, ho


# ----------------------------------------------------------------------------- model
class Attn(nn.Module):
    def __init__(self, d, nh, dh):
        super().__init__()
        self.nh, self.dh = nh, dh
        self.W_Q = nn.Linear(d, nh * dh, bias=False)
        self.W_K = nn.Linear(d, nh * dh, bias=False)
        self.W_V = nn.Linear(d, nh * dh, bias=False)
        self.W_O = nn.Linear(nh * dh, d, bias=False)

    def forward(self, x, qk_in, want=False):
        B, T, _ = x.shape
        q = self.W_Q(qk_in).view(B, T, self.nh, self.dh).transpose(1, 2)
        k = self.W_K(qk_in).view(B, T, self.nh, self.dh).transpose(1, 2)
        v = self.W_V(x).view(B, T, self.nh, self.dh).transpose(1, 2)
        if not want:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.W_O(z.transpose(1, 2).reshape(B, T, -1)), None
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
        A = s.softmax(-1)
        z = A @ v
        return self.W_O(z.transpose(1, 2).reshape(B, T, -1)), (A, v.norm(dim=-1))


class Model(nn.Module):
    def __init__(
        self,
        n_layers,
        d,
        nh,
        ctx,
        pos="shortformer",
        emb_std=1.0,
        pos_std=1.0,
        w_scale=0.8,
        vocab=256,
        pos_init="normal",
        d_head=None,
    ):
        super().__init__()
        self.pos_kind = pos
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(ctx, d))
        self.layers = nn.ModuleList([Attn(d, nh, d_head or d // nh) for _ in range(n_layers)])
        self.unembed = nn.Linear(d, vocab, bias=False)
        nn.init.normal_(self.embed.weight, 0.0, emb_std)
        nn.init.normal_(self.pos, 0.0, pos_std)
        if pos_init == "sin":  # sinusoids (Vaswani et al.), per-dimension std pos_std
            t = torch.arange(ctx, dtype=torch.float32)[:, None]
            f = torch.exp(-math.log(10_000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
            with torch.no_grad():
                self.pos[:, 0::2] = torch.sin(t * f) * math.sqrt(2) * pos_std
                self.pos[:, 1::2] = torch.cos(t * f) * math.sqrt(2) * pos_std
        std = w_scale / math.sqrt(d)
        for L in self.layers:
            for W in (L.W_Q, L.W_K, L.W_V):
                nn.init.normal_(W.weight, 0.0, std)
            nn.init.normal_(L.W_O.weight, 0.0, std / math.sqrt(2 * n_layers))
        nn.init.normal_(self.unembed.weight, 0.0, std)

    def forward(self, idx, want=False):
        T = idx.shape[1]
        x = self.embed(idx)
        p = self.pos[:T].unsqueeze(0)
        if self.pos_kind == "standard":
            x = x + p
        caches = []
        for L in self.layers:
            qk = x + p if self.pos_kind == "shortformer" else x
            o, c = L(x, qk, want)
            x = x + o
            caches.append(c)
        return self.unembed(x), caches


# ----------------------------------------------------------------------------- eval data
def distinct_printable(rng, n, exclude=()):
    pool = np.array([c for c in range(PRINT_LO, PRINT_HI + 1) if c not in set(exclude)])
    return rng.choice(pool, size=n, replace=False)


def make_probe(seed=12345, rows=32, T=256, seg=DELTA):
    rng = np.random.default_rng(seed)
    rep = np.zeros((rows, T), dtype=np.int64)
    ctl = np.zeros((rows, T), dtype=np.int64)
    starts = []
    for r in range(rows):
        p = int(rng.integers(0, 17))
        ps = distinct_printable(rng, p + seg)
        pre, s = ps[:p], ps[p:]
        fresh = distinct_printable(rng, seg)
        fill = rng.integers(PRINT_LO, PRINT_HI + 1, size=T - p - 2 * seg)
        rep[r] = np.concatenate([pre, s, s, fill])
        ctl[r] = np.concatenate([pre, s, fresh, fill])
        starts.append(p)
    return torch.from_numpy(rep), torch.from_numpy(ctl), starts


def make_heldout_sets(held, seed=777, n=16, T=256, half=128):
    rng = np.random.default_rng(seed)
    w = np.stack([held[s : s + T + 1] for s in rng.integers(0, len(held) - T - 2, size=n)])
    d = []
    for s in rng.integers(0, len(held) - half - 1, size=n):
        a = held[s : s + half]
        d.append(np.concatenate([a, a]))
    return torch.from_numpy(w.astype(np.int64)), torch.from_numpy(np.stack(d).astype(np.int64))


@torch.no_grad()
def evaluate(model, probe, heldw, dropw):
    model.eval()
    rep, ctl, starts = probe
    nL = len(model.layers)
    ind_layer = nL - 1  # layer 1 for 2-layer models; layer 0 for the 1-layer control
    out = {}
    # --- probe (repeat + control)
    _, c_rep = model(rep, want=True)
    _, c_ctl = model(ctl, want=True)
    Q = torch.stack([torch.arange(p + DELTA, p + 2 * DELTA) for p in starts])  # [R,50]
    Rr = torch.arange(len(starts))[:, None].expand_as(Q)

    def stripe(A, vn, off, weighted, denom=None):
        # A: [B,H,T,T], vn: [B,H,T]; returns [H] mean over rows/queries
        K = Q - DELTA + off
        a = A[Rr, :, Q, K]  # [R,50,H]
        if weighted:
            a = a * vn[Rr, :, K] / denom[Rr, :, Q]
        return a.mean((0, 1))

    heads = []
    for li in range(nL):
        A, vn = c_rep[li]
        Ac, vnc = c_ctl[li]
        den = torch.einsum("bhqk,bhk->bhq", A, vn)
        denc = torch.einsum("bhqk,bhk->bhq", Ac, vnc)
        vw = stripe(A, vn, 1, True, den)
        plain = stripe(A, vn, 1, False)
        vw_c = stripe(Ac, vnc, 1, True, denc)
        plain_c = stripe(Ac, vnc, 1, False)
        neigh = torch.stack([stripe(A, vn, o, False) for o in (-1, 0, 2, 3)])  # [4,H]
        for h in range(A.shape[1]):
            re = float(vw[h] - vw_c[h])
            ratio_ok = bool((plain[h] > 2 * neigh[:, h]).all())
            heads.append(
                dict(
                    layer=li,
                    head=h,
                    vw=float(vw[h]),
                    plain=float(plain[h]),
                    vw_ctl=float(vw_c[h]),
                    plain_ctl=float(plain_c[h]),
                    repeat_effect=re,
                    plain_repeat_effect=float(plain[h] - plain_c[h]),
                    max_neigh=float(neigh[:, h].max()),
                    ratio_ok=ratio_ok,
                    passes=bool(vw[h] >= 0.4 and re >= 0.4 and ratio_ok),
                )
            )
    cand = [h for h in heads if h["layer"] == ind_layer] if nL > 1 else heads
    best = max(cand, key=lambda h: h["vw"])
    out["best_ind"] = best
    out["rule_pass"] = any(h["passes"] for h in cand)
    out["passing_heads"] = [(h["layer"], h["head"]) for h in cand if h["passes"]]
    out["heads"] = heads
    # --- held-out loss + previous-token score
    logits, caches = model(heldw[:, :-1], want=True)
    out["heldout_loss"] = float(
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), heldw[:, 1:].reshape(-1))
    )
    A0 = caches[0][0]  # [B,H,T,T]
    T = A0.shape[-1]
    t = torch.arange(1, T)
    prev = A0[:, :, t, t - 1].mean((0, 2))
    out["prev_tok_per_head"] = [float(x) for x in prev]
    out["best_prev_tok"] = float(prev.max())
    out["best_prev_head"] = int(prev.argmax())
    # --- repeated passage drop (loss at position t = -log p(x_t | x_<t))
    logits, _ = model(dropw)
    lp = F.log_softmax(logits[:, :-1].float(), -1)
    tok_loss = -lp.gather(-1, dropw[:, 1:, None]).squeeze(-1)  # index t-1 -> position t
    h = dropw.shape[1] // 2  # 128 at context 256: positions 4..h-2 against h+4..2h-1
    first = tok_loss[:, 3 : h - 2].mean()
    second = tok_loss[:, h + 3 : 2 * h - 1].mean()
    out["drop"] = float(first - second)
    out["loss_first_copy"] = float(first)
    out["loss_second_copy"] = float(second)
    model.train()
    return out


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--d-head", type=int, default=None, help="default d_model / n_heads")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.98)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--pos", choices=["shortformer", "standard"], default="shortformer")
    ap.add_argument("--emb-std", type=float, default=1.0)
    ap.add_argument("--pos-std", type=float, default=1.0)
    ap.add_argument("--pos-init", choices=["normal", "sin"], default="normal")
    ap.add_argument("--w-scale", type=float, default=0.8)
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--steps", type=int, default=10**9)
    ap.add_argument("--minutes", type=float, default=9.0, help="training-loop wall budget")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--no-early-stop", action="store_true")
    ap.add_argument("--cache", default="/work/screen/cache")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", type=int, default=0, help="only time N steps, no eval")
    ap.add_argument("--no-flush-denormal", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(1)
    if not args.no_flush_denormal:
        torch.set_flush_denormal(True)
    train, held = load_corpus(args.cache)
    train_t = torch.from_numpy(train.astype(np.int64))
    # probes and held-out windows at the training context when it is shorter than 256
    # (positions past the context are never trained); the probe itself is unchanged
    # (prefix of 0-16 + 50 distinct printable bytes + the same 50, the rest filled).
    T_eval = min(args.ctx, 256)
    probe = make_probe(T=T_eval)
    heldw, dropw = make_heldout_sets(held, T=T_eval, half=T_eval // 2)
    pos_len = max(args.ctx, T_eval)

    torch.manual_seed(args.seed)
    model = Model(
        args.layers,
        args.d_model,
        args.n_heads,
        pos_len,
        pos=args.pos,
        emb_std=args.emb_std,
        pos_std=args.pos_std,
        w_scale=args.w_scale,
        pos_init=args.pos_init,
        d_head=args.d_head,
    )
    opt = torch.optim.AdamW(
        model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2), weight_decay=args.wd
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, args.warmup))
    )
    g = torch.Generator().manual_seed(args.seed)
    N = len(train_t)
    offs = torch.arange(args.ctx + 1)

    rows, outcome = [], None
    train_time, eval_time = 0.0, 0.0
    tokens_per_step = args.batch * args.ctx
    first_pass = None

    def log_row(step):
        nonlocal eval_time, first_pass
        t0 = time.perf_counter()
        ev = evaluate(model, probe, heldw, dropw)
        eval_time += time.perf_counter() - t0
        b = ev["best_ind"]
        row = dict(
            step=step,
            tokens=step * tokens_per_step,
            train_s=round(train_time, 2),
            eval_s=round(eval_time, 2),
            train_loss=round(run_loss, 4) if run_loss else None,
            heldout_loss=round(ev["heldout_loss"], 4),
            best_ind_layer=b["layer"],
            best_ind_head=b["head"],
            best_vw=round(b["vw"], 4),
            best_plain=round(b["plain"], 4),
            best_repeat_effect=round(b["repeat_effect"], 4),
            best_max_neigh=round(b["max_neigh"], 4),
            best_ratio_ok=b["ratio_ok"],
            best_passes=b["passes"],
            rule_pass=ev["rule_pass"],
            passing_heads=ev["passing_heads"],
            best_prev_tok=round(ev["best_prev_tok"], 4),
            best_prev_head=ev["best_prev_head"],
            drop=round(ev["drop"], 4),
            heads=[
                {k: (round(v, 4) if isinstance(v, float) else v) for k, v in h.items()}
                for h in ev["heads"]
            ],
        )
        rows.append(row)
        print(
            f"step {step:6d} tok {row['tokens'] / 1e6:6.2f}M t {train_time:6.1f}s "
            f"loss {row['train_loss']} ho {row['heldout_loss']:.3f} "
            f"vw {row['best_vw']:.3f} re {row['best_repeat_effect']:.3f} "
            f"pl {row['best_plain']:.3f} nb {row['best_max_neigh']:.3f} "
            f"pass {row['rule_pass']} prev {row['best_prev_tok']:.3f} drop {row['drop']:.3f}",
            flush=True,
        )
        with open(args.out + ".partial", "w") as f:
            json.dump(
                dict(
                    config=vars(args),
                    rows=[{k: v for k, v in r.items() if k != "heads"} for r in rows],
                ),
                f,
            )
        if ev["rule_pass"] and first_pass is None:
            first_pass = dict(
                step=step, tokens=step * tokens_per_step, train_minutes=round(train_time / 60, 3)
            )
        return ev["rule_pass"]

    run_loss = None
    step = 0
    if not args.bench:
        log_row(0)
    ac = (
        torch.autocast("cpu", dtype=torch.bfloat16)
        if args.precision == "bf16"
        else torch.autocast("cpu", enabled=False)
    )
    reason = "steps"
    while step < (args.bench or args.steps):
        t0 = time.perf_counter()
        st = torch.randint(0, N - args.ctx - 1, (args.batch,), generator=g)
        w = train_t[st[:, None] + offs]
        x, y = w[:, :-1], w[:, 1:]
        with ac:
            logits, _ = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        sched.step()
        step += 1
        lv = loss.item()
        run_loss = lv if run_loss is None else 0.98 * run_loss + 0.02 * lv
        train_time += time.perf_counter() - t0
        if args.bench:
            if step % 200 == 0:
                print(
                    f"bench step {step} {step / train_time:.2f} steps/s loss {run_loss:.3f}",
                    flush=True,
                )
            continue
        if step % args.eval_every == 0:
            passed = log_row(step)
            if passed and not args.no_early_stop:
                reason = "rule_passed"
                break
        if train_time > args.minutes * 60:
            reason = "time_budget"
            if step % args.eval_every != 0:
                log_row(step)
            break
    if args.bench:
        print(
            json.dumps(
                dict(
                    steps=step,
                    train_s=train_time,
                    steps_per_s=step / train_time,
                    tokens_per_s=step * tokens_per_step / train_time,
                )
            )
        )
        return
    final = rows[-1]
    outcome = dict(
        stop_reason=reason,
        steps=step,
        tokens=step * tokens_per_step,
        train_s=round(train_time, 2),
        eval_s=round(eval_time, 2),
        steps_per_s=round(step / train_time, 3),
        tokens_per_s=round(step * tokens_per_step / train_time, 1),
        first_pass=first_pass,
        final=dict((k, final[k]) for k in final if k != "heads"),
    )
    res = dict(
        config=vars(args),
        argv=sys.argv,
        torch=torch.__version__,
        threads=torch.get_num_threads(),
        corpus=dict(train_bytes=len(train), heldout_bytes=len(held)),
        rows=rows,
        outcome=outcome,
    )
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print("OUTCOME", json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
