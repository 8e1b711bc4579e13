"""Neurons against SAE latents on an MLP twin, each beside its baselines (docs/dictionaries.md).

For every MLP layer of a cpu-preset ``--mlp`` run: the monosemanticity rule and every other
neuron statistic on the model, on its untrained twin (same config and seed, before training) and
under the shuffled-activation control, then the rule on the latents of a TopK SAE on the layer's
``mlp.hook_post`` and of one trained the same way on the untrained twin
(:func:`interp_toolkit.study.layers.measure_neurons`, what ``reproduce --mlp`` measures), with the
sentences the study page would print.

``--run RUN`` reads a trained run (e.g. ``reproduce --mlp``'s ``cpu-1l-mlp``); without it a
1-layer twin is trained first (``--steps``, default 700: past the cpu preset's phase change at
~350) in a temporary folder. Writes ``experiments/results/neurons_vs_features.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="A trained MLP run folder (default: train one).")
    ap.add_argument("--layers", type=int, default=1, help="Layers of the twin trained here.")
    ap.add_argument("--steps", type=int, default=700, help="Steps of the twin trained here.")
    ap.add_argument("--sae-tokens", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="Result JSON (default benchmarks/results/...).")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from interp_toolkit.reports.layer_findings import mlp_findings
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.study.layers import SAE_EXPANSION, SAE_K, measure_neurons

    load = [os.getloadavg()]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mlp-twin-") as tmp:
        folder = args.run
        if folder is None:
            from interp_toolkit.api import train

            folder = Path(tmp) / f"cpu-{args.layers}l-mlp"
            train(
                folder,
                layers=args.layers,
                steps=args.steps,
                seed=args.seed,
                mlp=True,
                d_mlp=512,
                act_fn="gelu",
                normalization="LN",
            )
        run = load_run(folder, device="cpu")
        trained_s = time.perf_counter() - t0
        m = measure_neurons(run, seed=args.seed, sae_tokens=args.sae_tokens)
    load.append(os.getloadavg())
    sentences = mlp_findings([], [m])
    for s in sentences:
        print(s)
    write_result(
        "neurons_vs_features",
        {
            "run": str(args.run) if args.run else f"trained here: {args.steps} steps",
            "sae": {"arch": "topk", "expansion": SAE_EXPANSION, "k": SAE_K},
            "sae_tokens": args.sae_tokens,
            "seconds": {
                "training": round(trained_s, 1),
                "total": round(time.perf_counter() - t0, 1),
            },
            "load_average": {"before": load[0], "after": load[1]},
            "measurement": m.to_dict(),
            "sentences": sentences,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
