"""Attention-SAE latents with a head role, measured (what tests/integration/test_dictionaries_trained.py
checks, with the numbers written out; docs/dictionaries.md "Known answers").

On a trained cpu-preset 2-layer run: the heads from :func:`discover_heads` (induction heads in
layer 1, previous-token heads in layer 0), then a TopK SAE (x8, k 16, ``--tokens`` activations,
seed 0) on ``blocks.1.attn.hook_z`` and on ``blocks.0.attn.hook_z`` of the trained model and of the
untrained model of the same config, each read by :mod:`interp_toolkit.saes.roles` with the
trained model's heads. ``--run RUN`` reads a run (e.g. ``interp-toolkit train --layers 2 --steps
700 --seed 0``); without it one is trained here (``--steps``, default 700, the test fixture's).
Writes ``experiments/results/sae_roles.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import write_result  # noqa: E402


def _measure(
    model: Any, run: Any, layer: int, heads: list[int], repeats: Any, out: Path, tokens: int
) -> dict[str, Any]:
    from interp_toolkit.saes.options import SAEOptions
    from interp_toolkit.saes.pipeline import run_sae
    from interp_toolkit.saes.roles import induction_latents, previous_token_latents

    t0 = time.perf_counter()
    hook = f"blocks.{layer}.attn.hook_z"
    opts = SAEOptions(hook, expansion=8, k=16, tokens=tokens, quiet=True)
    res = run_sae(model, run.codec, run, out, opts)
    if layer == 1:
        found = induction_latents(model, res.sae, res.features, heads, repeats)
    else:
        found = previous_token_latents(res.sae, res.features, heads)
    m = res.metrics
    return {
        "hook": hook,
        "role": found.role,
        "heads": list(found.heads),
        "share_floor": round(found.floor, 3),
        "latents": list(found.latents),
        "head_share": [round(s, 3) for s in found.head_share],
        "second_copy": [round(s, 3) for s in found.second_copy],
        "descriptions": [res.features.descriptions[i] for i in found.latents],
        "monosemantic": sum(c.monosemantic for c in res.features.concepts),
        "d_sae": res.sae.cfg.d_sae,
        "l0": round(m.l0, 2),
        "explained_variance": round(m.explained_variance, 3),
        "ce_loss_score": round(m.ce_loss_score, 3),
        "dead": m.dead,
        "dense": m.dense,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="A trained 2-layer cpu run (default: train one).")
    ap.add_argument("--steps", type=int, default=700, help="Steps of the run trained here.")
    ap.add_argument("--tokens", type=int, default=262_144, help="Activations per SAE.")
    ap.add_argument("--out", help="Result JSON (default benchmarks/results/...).")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.options import DiscoveryOptions
    from interp_toolkit.models.build import build_model
    from interp_toolkit.probing.data import varied_repeats
    from interp_toolkit.runs.folder import load_run

    load = [os.getloadavg()]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sae-roles-") as tmp:
        folder = args.run
        if folder is None:
            from interp_toolkit.api import train

            folder = Path(tmp) / "cpu-2l"
            train(folder, layers=2, steps=args.steps, seed=0)
        run = load_run(folder, device="cpu")
        report = discover_heads(
            run.model, run.codec, DiscoveryOptions(n_seqs=64, seed=0), model_cfg=run.model_cfg
        )
        heads = {
            1: sorted(h.head for h in report.heads_with_role("induction") if h.layer == 1),
            0: sorted(h.head for h in report.heads_with_role("previous-token") if h.layer == 0),
        }
        repeats = varied_repeats(run.codec, seq_len=run.model_cfg.n_ctx, n_seqs=256, seed=1)
        untrained = build_model(run.model_cfg)
        cases = []
        for name, model in (("trained", run.model), ("untrained", untrained)):
            for layer in (1, 0):
                row = _measure(
                    model,
                    run,
                    layer,
                    heads[layer],
                    repeats,
                    Path(tmp) / f"{name}{layer}",
                    args.tokens,
                )
                row["model"] = name
                print(row, flush=True)
                cases.append(row)
    load.append(os.getloadavg())
    write_result(
        "sae_roles",
        {
            "run": str(args.run)
            if args.run
            else f"trained here: cpu preset, 2 layers, seed 0, {args.steps} steps",
            "sae": {"arch": "topk", "expansion": 8, "k": 16, "tokens": args.tokens, "seed": 0},
            "seconds_total": round(time.perf_counter() - t0, 1),
            "load_average": {"before": load[0], "after": load[1]},
            "cases": cases,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
