"""SAE claims per row family and through the encoder (issue 30, item 5), measured.

1. **Planted features** (``--planted``, the fast known answer of tests/unit/saes/test_dictionaries.py):
   96 features in 32 dimensions, TopK k 4, BatchTopK k 4 and ReLU L1 3 dictionaries of 192
   latents on 122,880 samples; each one's MMCS (decoder cosine) beside the precision and recall
   of each feature's best latent through the encoder on held-out samples
   (:func:`interp_toolkit.saes.toy.encoder_recovery`), and the same for the untrained dictionary.
2. **A run's attention SAEs** (``--run RUN``, a trained cpu-preset 2-layer run): a TopK SAE
   (``--expansion``, ``--k``, ``--tokens``, seed 0) on ``blocks.1.attn.hook_z`` and
   ``blocks.0.attn.hook_z`` of the trained model and of the untrained model of the same config;
   for each, the metrics pooled and per row family (text rows, synthetic repeated-span rows), and
   the share of live latents called monosemantic by the rule (units/reading.py) on the model,
   under the shuffled-activation control (each latent's top values on random positions), and by
   the rule without its lift (the old rule), for comparison.

Writes ``experiments/results/sae_claims.json`` (``--out``).
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

ARCHS = (("topk", 4, 0.0), ("batchtopk", 4, 0.0), ("relu", 0, 3.0))


def planted() -> list[dict[str, Any]]:
    from interp_toolkit.saes.config import SAEConfig, SAETrainConfig
    from interp_toolkit.saes.sae import SparseAutoencoder
    from interp_toolkit.saes.toy import PlantedFeatures, encoder_recovery, mmcs
    from interp_toolkit.saes.train import fit_sae

    toy = PlantedFeatures(samples_per_block=4096)
    rows = []
    for arch, k, l1 in ARCHS:
        cfg = SAEConfig(d_in=toy.d, d_sae=2 * toy.n_features, arch=arch, k=k, hook_name="toy")
        random_sae = SparseAutoencoder(cfg, seed=0)
        t0 = time.perf_counter()
        tcfg = SAETrainConfig(tokens=122_880, batch=256, lr=1e-2, l1=l1)
        sae = fit_sae(toy.block, cfg, tcfg).sae
        for name, d in (("trained", sae), ("untrained", random_sae)):
            row = {"arch": arch, "k": k, "l1": l1, "dictionary": name}
            row["mmcs"] = round(mmcs(toy.directions, d.W_dec.detach()).item(), 4)
            row["cosine_above_0.9"] = _above(toy.directions, d.W_dec.detach(), 0.9)
            row["encoder"] = encoder_recovery(d.encode, toy).summary()
            row["train_seconds"] = round(time.perf_counter() - t0, 1) if name == "trained" else 0
            print(row, flush=True)
            rows.append(row)
    return rows


def _above(features: Any, decoder: Any, cut: float) -> int:
    """Planted features whose best decoder row has cosine above ``cut``."""
    a = features / features.norm(dim=-1, keepdim=True)
    b = decoder / decoder.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return int(((a @ b.T).max(dim=1).values > cut).sum())


def _family(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "tokens": e["token_stats"]["total_tokens_eval"],
        "l0": round(e["sparsity"]["l0"], 3),
        "explained_variance": round(e["reconstruction_quality"]["explained_variance"], 4),
        "ce_loss_score": round(e["model_performance_preservation"]["ce_loss_score"], 4),
        "ce_loss_without_sae": round(e["model_performance_preservation"]["ce_loss_without_sae"], 4),
        "ce_loss_with_sae": round(e["model_performance_preservation"]["ce_loss_with_sae"], 4),
        "kl_div_with_sae": round(e["model_behavior_preservation"]["kl_div_with_sae"], 4),
        "dead": e["latents"]["dead"],
        "dense": e["latents"]["dense"],
    }


def attention_saes(folder: Path, tokens: int, expansion: int, k: int) -> list[dict[str, Any]]:
    from interp_toolkit.models.build import build_model
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.saes.options import SAEOptions
    from interp_toolkit.saes.pipeline import run_sae
    from interp_toolkit.units.reading import RuleCount

    run = load_run(folder, device="cpu")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sae-claims-") as tmp:
        for name, model in (("trained", run.model), ("untrained", build_model(run.model_cfg))):
            for layer in (1, 0):
                t0 = time.perf_counter()
                hook = f"blocks.{layer}.attn.hook_z"
                out = Path(tmp) / f"{name}{layer}"
                opts = SAEOptions(hook, expansion=expansion, k=k, tokens=tokens, quiet=True)
                res = run_sae(model, run.codec, run, out, opts)
                f, e = res.features, res.metrics.evals().to_dict()
                mono = RuleCount.of(f.concepts)
                shuffled = RuleCount.of(f.shuffled)
                old = sum(c.holds for c in f.concepts)
                row = {
                    "model": name,
                    "hook": hook,
                    "setting": res.source.setting,
                    "d_sae": res.sae.cfg.d_sae,
                    "all_rows": _family(e),
                    "by_family": {k: _family(v) for k, v in e.get("by_family", {}).items()},
                    "monosemantic": mono.to_dict(),
                    "monosemantic_shuffled": shuffled.to_dict(),
                    "old_rule_monosemantic": old,
                    "old_rule_shuffled": sum(c.holds for c in f.shuffled),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                print(row, flush=True)
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="A trained 2-layer cpu run (the SAE part).")
    ap.add_argument("--planted", action="store_true", help="Measure the planted features.")
    ap.add_argument("--tokens", type=int, default=400_000, help="Activations per SAE.")
    ap.add_argument("--expansion", type=int, default=8)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--out", help="Result JSON (default experiments/results/sae_claims.json).")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    load = [os.getloadavg()]
    t0 = time.perf_counter()
    payload: dict[str, Any] = {}
    if args.planted:
        payload["planted"] = planted()
    if args.run:
        payload["run"] = str(args.run)
        payload["sae"] = {"arch": "topk", "expansion": args.expansion, "k": args.k}
        payload["sae"]["tokens"] = args.tokens
        payload["attention_saes"] = attention_saes(args.run, args.tokens, args.expansion, args.k)
    load.append(os.getloadavg())
    payload["seconds_total"] = round(time.perf_counter() - t0, 1)
    payload["load_average"] = {"before": load[0], "after": load[1]}
    write_result("sae_claims", payload, args.out)


if __name__ == "__main__":
    main()
