"""Collect results/*.json(.partial) and logs into a markdown table (printed)."""

import glob
import json
import os

rows = []
for f in sorted(glob.glob("results/*.json*")):
    d = json.load(open(f))
    c = d["config"]
    R = d["rows"]
    last = R[-1]
    fp = next((r for r in R if r["rule_pass"]), None)
    o = d.get("outcome")
    sps = o["steps_per_s"] if o else (last["step"] / last["train_s"] if last["train_s"] else 0)
    tps = sps * c["batch"] * c["ctx"]
    setting = (
        f"L{c['layers']} d{c['d_model']} h{c['n_heads']} ctx{c['ctx']} b{c['batch']} "
        f"lr{c['lr']:g} wu{c['warmup']} {c['precision']} emb{c['emb_std']:g} {c['pos']}"
    )
    status = "done" if o else "killed (partial)"
    if fp:
        passed = f"step {fp['step']}, {fp['tokens'] / 1e6:.2f}M tok, {fp['train_s'] / 60:.2f} min"
    else:
        passed = f"none by step {last['step']} ({last['tokens'] / 1e6:.1f}M tok, {last['train_s'] / 60:.1f} min)"
    rows.append(
        (
            os.path.basename(f).split("_")[0],
            setting,
            c["seed"],
            f"{sps:.1f}",
            f"{tps:.0f}",
            passed,
            f"{last['best_vw']:.3f}",
            f"{last['best_repeat_effect']:.3f}",
            f"{last['best_prev_tok']:.3f}",
            f"{last['drop']:.3f}",
            f"{last['heldout_loss']:.3f}",
            status,
        )
    )
hdr = (
    "run",
    "setting",
    "seed",
    "steps/s",
    "tok/s",
    "rule first passed",
    "vw (end)",
    "repeat eff (end)",
    "prev-tok (end)",
    "drop (end)",
    "held-out loss (end)",
    "status",
)
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for r in rows:
    print("| " + " | ".join(map(str, r)) + " |")
