"""Cost of training an SAE: activations per second and peak memory, ours beside a plain loop.

Three models, randomly initialised (cost does not depend on the weights): the cpu preset's
2-layer attention-only model (SAE on ``blocks.1.attn.hook_z``, d_in 128), its MLP twin (SAE on
``blocks.0.mlp.hook_post``, d_in 512) and a GPT-2-small-shaped model (12 layers, d_model 768,
SAE on ``blocks.5.attn.hook_z``, d_in 768), each SAE a TopK (k 32) with 8 latents per input
dimension, batch 1,024 activations, on random token rows. Per model, in fresh child processes
(peak RSS = the child's ``ru_maxrss``), side by side in one run:

- ``ours (streamed)``: :func:`interp_toolkit.saes.train.fit_sae` reading activations from
  the model through the hook a block at a time (8 batches per block; forward passes included),
  with the aux-k loss, unit-norm decoder rows, gradient clipping and the dead-latent bookkeeping;
- ``plain loop (cached)``: the activations cached first (that time reported apart), then a bare
  PyTorch loop over them: TopK encode, decode, MSE, Adam; nothing else.

Throughput = training activations / training seconds. The load average is recorded: timings on a
shared box swing 2-5x, so only the side-by-side ratio carries. Run
``.venv/bin/python benchmarks/sae_cost.py``: a table and ``benchmarks/results/sae_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, run_child, write_result  # noqa: E402

GIB = 2**30
BATCH, K, EXPANSION = 1024, 32, 8
MODELS: dict[str, dict[str, Any]] = {
    "cpu-2l": {"hook": "blocks.1.attn.hook_z", "tokens": 65_536, "seq": 32},
    "cpu-1l-mlp": {"hook": "blocks.0.mlp.hook_post", "tokens": 32_768, "seq": 32},
    "gpt2-small-shape": {"hook": "blocks.5.attn.hook_z", "tokens": 8_192, "seq": 128},
}
KINDS = ("ours", "plain")


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _model(name: str, folder: Path | None) -> Any:
    from interp_toolkit.models.build import build_model
    from interp_toolkit.training.presets import get_preset

    if name == "gpt2-small-shape":
        from interp_toolkit.runs import hf

        return hf.load(folder, compat=False)
    return build_model(get_preset("cpu", 2 if name == "cpu-2l" else 1, mlp="mlp" in name).model)


class RandomRows:
    """Block ``b``: seeded random token rows (what :func:`block_activations` reads)."""

    def __init__(self, d_vocab: int, rows: int, seq: int) -> None:
        self.d_vocab, self.rows, self.seq = d_vocab, rows, seq

    def block(self, b: int) -> Any:
        import torch

        gen = torch.Generator().manual_seed(b)
        return torch.randint(0, self.d_vocab, (self.rows, self.seq), generator=gen)


def run_case(name: str, kind: str, folder: Path | None) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    from interp_toolkit.saes.activations import block_activations, hook_width
    from interp_toolkit.saes.config import SAEConfig, SAETrainConfig
    from interp_toolkit.saes.train import fit_sae

    spec = MODELS[name]
    model = _model(name, folder)
    hook, tokens, seq = spec["hook"], spec["tokens"], spec["seq"]
    d_in = hook_width(model, hook)
    rows = BATCH * 8 // seq
    source = RandomRows(int(model.cfg.d_vocab), rows, seq)
    rss_loaded = _rss()
    cache_s = 0.0
    if kind == "ours":
        cfg = SAEConfig(d_in=d_in, d_sae=d_in * EXPANSION, arch="topk", k=K, hook_name=hook)
        tcfg = SAETrainConfig(tokens=tokens, batch=BATCH)
        t0 = time.perf_counter()
        fit_sae(lambda b: block_activations(model, source, hook, b), cfg, tcfg)
        seconds = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        n_blocks = -(-tokens // (BATCH * 8))
        acts = torch.cat([block_activations(model, source, hook, b) for b in range(n_blocks)])
        cache_s = time.perf_counter() - t0
        seconds = _plain_loop(acts[:tokens], d_in * EXPANSION)
    peak = _rss()
    return {
        "model": name,
        "loop": "ours (streamed)" if kind == "ours" else "plain loop (cached)",
        "hook": hook,
        "d_in": d_in,
        "d_sae": d_in * EXPANSION,
        "tokens": tokens,
        "train_s": round(seconds, 2),
        "activations_per_s": round(tokens / seconds, 1),
        "cache_s": round(cache_s, 2) if kind == "plain" else None,
        "peak_rss_gib": round(peak / GIB, 3),
        "extra_rss_gib": round((peak - rss_loaded) / GIB, 3),
    }


def _plain_loop(acts: Any, d_sae: int) -> float:
    """A bare TopK SAE loop over cached activations; returns its seconds."""
    import torch

    d_in = acts.shape[1]
    gen = torch.Generator().manual_seed(0)
    w_dec = torch.nn.Parameter(torch.randn(d_sae, d_in, generator=gen) / d_in**0.5)
    w_enc = torch.nn.Parameter(w_dec.detach().T.clone())
    b_enc, b_dec = torch.nn.Parameter(torch.zeros(d_sae)), torch.nn.Parameter(torch.zeros(d_in))
    opt = torch.optim.Adam([w_enc, w_dec, b_enc, b_dec], lr=1e-3)
    t0 = time.perf_counter()
    for lo in range(0, len(acts) - BATCH + 1, BATCH):
        x = acts[lo : lo + BATCH]
        pre = (x - b_dec) @ w_enc + b_enc
        v, i = pre.topk(K, dim=-1)
        f = torch.zeros_like(pre).scatter(-1, i, v.relu())
        loss = (f @ w_dec + b_dec - x).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child-build", metavar="FOLDER")
    ap.add_argument("--child-case", nargs=3, metavar=("MODEL", "KIND", "FOLDER"))
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child_build:
        from gpt2_discovery_cost import build_folder

        build_folder(Path(args.child_build))
        print(json.dumps({"built": args.child_build}))
        return
    if args.child_case:
        name, kind, folder = args.child_case
        print(json.dumps(run_case(name, kind, Path(folder) if folder != "-" else None)))
        return
    rows, loads = [], [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="sae-cost-") as tmp:
        if "gpt2-small-shape" in args.models:
            run_child(__file__, ["--child-build", tmp])
        for name in args.models:
            for kind in KINDS:
                folder = tmp if name == "gpt2-small-shape" else "-"
                rows.append(run_child(__file__, ["--child-case", name, kind, folder]))
                loads.append(os.getloadavg())
                print(rows[-1], flush=True)
    for name in args.models:
        ours, plain = (
            next(r for r in rows if r["model"] == name and r["loop"].startswith(p))
            for p in ("ours", "plain")
        )
        ours["vs_plain"] = round(ours["activations_per_s"] / plain["activations_per_s"], 3)
    columns = ["model", "loop", "d_in", "d_sae", "tokens", "train_s", "activations_per_s"]
    print_table(rows, [*columns, "cache_s", "vs_plain", "peak_rss_gib", "extra_rss_gib"])
    write_result(
        "sae_cost",
        {
            "note": "one thread per case, wall time on a shared 2-core box; TopK k=32, x8, batch "
            "1024; ours includes the model's forward passes, the plain loop's caching is cache_s",
            "load_average": {"before": loads[0], "after_each_case": loads[1:]},
            "cases": rows,
        },
    )


if __name__ == "__main__":
    main()
