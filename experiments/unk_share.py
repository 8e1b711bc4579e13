"""The compaction hypothesis (issue 34): does the share of ``<unk>`` tokens delay induction?

The byte preset (``--preset text``) grows a layer-1 head with the induction role for every seed
(docs/recipes.md §0g); the older BPE recipe (GPT-2 BPE compacted to 256 ids, 20% of stdlib tokens
``<unk>``) grew none. Here everything of the byte preset is kept (shape, context 256, batch 4, lr,
bf16, the stop rule, the scoring) and only the codec changes: GPT-2 BPE compacted to K ids
(``DataConfig(codec="bpe", vocab_size=K)``, ``d_vocab=K``). Per K:

1. the codec's ``<unk>`` share of the training and held-out tokens, and the bytes of text per
   token (a 256-token BPE context covers more text than 256 bytes: a confound);
2. per seed, the 2-layer model trained and searched for its *role step* exactly as
   experiments/text_seeds.py does (its ``train``, ``role_step`` and ``roles``: stop once the
   logged score has stayed past the floor for ``--window`` steps, at most ``--max-steps``; then
   ``heads RUN@STEP`` at every kept scoring from the floor on until a layer-1 head has the
   induction role). A run that does not form is reported (``role_step`` null) with its best
   layer-1 score and previous-token score at the end;
3. its final model on ``heads``'s probe drawn from the 255 most frequent ids only, beside the
   default probe (all K-1 ids; at K=4096 most are rare): ``frequent_probe_2l`` (``--merge``
   with ``--runs DIR`` adds it to runs that lack it);
4. with ``--control``, its 1-layer control trained as long.

The byte rows of §0g's table (experiments/archive/results/text_seeds_bf16_sdpa/, 0% ``<unk>``)
are copied into the result as the reference, marked ``"source": "text_seeds.json"``.

    python experiments/unk_share.py [--vocab-sizes 256,1024,4096] [--seeds 0,1] [--max-steps 12000]
                                   [--window 3000] [--control] [--out DIR] [--json PATH]
    python experiments/unk_share.py --shares-only [--vocab-sizes ...]   (step 1 alone, seconds)
    python experiments/unk_share.py --merge A.json B.json ... [--runs DIR]  (per-run results in one)

One thread, one run at a time (pin it with ``taskset``). Prints a table and writes
experiments/results/unk_share.json (or ``--json``); the run folders stay in ``--out`` (default: a
temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result
from natural_text import curve
from text_seeds import PRESET, first_past, role_step, roles, train

COLUMNS = [
    "vocab_size",
    "unk_share_train",
    "unk_share_val",
    "bytes_per_token",
    "seed",
    "floor_step",
    "role_step",
    "role_tokens",
    "role_minutes",
    "role_2l",
    "best_vw_2l",
    "tau_2l",
    "steps_2l",
    "minutes_2l",
    "logged_layer1_end",
    "prev_token_l0_2l",
    "val_loss_end",
    "tokens_per_s_2l",
    "role_1l",
    "best_vw_1l",
]


def shares(vocab_size: int) -> dict[str, Any]:
    """The ``<unk>`` share of the training and held-out tokens under the K-id codec (the codec a
    run builds: :func:`build_codec` on the corpus's GPT-2 counts), and bytes of text per token."""
    import numpy as np

    from interp_toolkit.text.stream import build_codec, tokenize_corpus
    from interp_toolkit.training.presets import get_preset

    data = get_preset(PRESET, 2).data
    gpt2 = tokenize_corpus(data.corpus, data.val_fraction, progress=False, store="gpt2")
    raw = tokenize_corpus(data.corpus, data.val_fraction, progress=False, store="bytes")
    codec = build_codec(gpt2, vocab_size, "bpe")
    train_unk = codec.from_store(np.asarray(gpt2.train_ids)) == codec.unk_id
    val_unk = codec.from_store(np.asarray(gpt2.val_ids)) == codec.unk_id
    return {
        "vocab_size": vocab_size,
        "d_vocab": int(codec.d_vocab),
        "unk_share_train": round(float(train_unk.mean()), 4),
        "unk_share_val": round(float(val_unk.mean()), 4),
        "train_tokens": len(gpt2.train_ids),
        "val_tokens": len(gpt2.val_ids),
        "train_bytes": len(raw.train_ids),
        # both stores end every document with one separator, so the ratio is text per token
        "bytes_per_token": round(len(raw.train_ids) / len(gpt2.train_ids), 3),
    }


def frequent_probe(run: Path, high: int = 255) -> dict[str, Any]:
    """The final model's best layer-1 value-weighted induction score and best layer-0
    previous-token score on ``heads``'s probe with its random ids drawn from the ``high`` most
    frequent ids only (``token_range=(0, high)``; compact ids are in frequency order), beside the
    default probe (every id below ``<unk>``): is a flat score the probe's rare ids?"""
    from interp_toolkit.heads.discovery import discover_heads
    from interp_toolkit.heads.options import DiscoveryOptions
    from interp_toolkit.runs.folder import load_run

    loaded = load_run(run, "cpu")
    out: dict[str, Any] = {}
    for name, token_range in (("default", None), (f"ids_0_{high}", (0, high))):
        options = DiscoveryOptions(token_range=token_range)
        heads = discover_heads(loaded.model, loaded.codec, options).to_dict()["heads"]
        l1 = max((h for h in heads if h["layer"] >= 1), key=lambda h: h["scores"]["induction_vw"])
        l0 = max((h for h in heads if h["layer"] == 0), key=lambda h: h["scores"]["previous_token"])
        out[name] = {
            "best_layer1_head": f"{l1['layer']}.{l1['index']}",
            "best_layer1_vw": round(l1["scores"]["induction_vw"], 3),
            "layer1_induction_roles": [
                f"{h['layer']}.{h['index']}" for h in heads if h["role"] == "induction"
            ],
            "best_prev_token_l0": round(l0["scores"]["previous_token"], 3),
        }
    return out


def one_run(
    root: Path, vocab: dict[str, Any], seed: int, budget: int, window: int, control: bool
) -> dict[str, Any]:
    from interp_toolkit.stats.thresholds import THRESHOLDS

    k = vocab["vocab_size"]
    changes = {"codec": "bpe", "vocab_size": k, "d_vocab": k}
    load = os.getloadavg()[0]
    run2, run1 = root / f"k{k}-s{seed}-2", root / f"k{k}-s{seed}-1"
    two = train(run2, 2, seed, budget, stop_after=window, precision=None, **changes)
    curve2 = curve(two["metrics"], 2)
    hit = first_past(curve2, THRESHOLDS.induction)
    role, tried = role_step(run2, curve2, THRESHOLDS.induction)
    r2 = tried[-1] if tried else roles(run2, 2)
    row: dict[str, Any] = {
        **vocab,
        "seed": seed,
        "budget_steps": budget,
        "window_steps": window,
        "floor_step": hit["step"] if hit else None,
        "floor_minutes": round(hit["elapsed_s"] / 60, 2) if hit else None,
        "role_step": role["step"] if role else None,
        "role_tokens": role["tokens"] if role else None,
        "role_bytes": round(role["tokens"] * vocab["bytes_per_token"]) if role else None,
        "role_minutes": round(role["elapsed_s"] / 60, 2) if role else None,
        "role_2l": ", ".join(r2["induction_heads"]) or "none",
        "best_head_2l": r2["best_head"],
        "best_vw_2l": r2["best_induction_vw"],
        "tau_2l": r2["best_tau"],
        "previous_token_heads_2l": r2["previous_token_heads"],
        "steps_2l": two["steps"],
        "minutes_2l": round(two["elapsed_s"] / 60, 2),
        "logged_layer1_end": round(curve2[-1]["best_induction"], 3),
        "prev_token_l0_2l": round(curve2[-1]["best_prev_token_l0"], 3),
        "val_loss_end": curve2[-1].get("val_loss"),
        "tokens_per_s_2l": curve2[-1].get("tokens_per_s"),
        "load_1min_before": round(load, 2),
        "role_1l": None,
        "best_vw_1l": None,
        "heads_tried_2l": tried,
        "frequent_probe_2l": frequent_probe(run2),
        "curve_2l": curve2,
    }
    if control:
        steps = role["step"] if role else two["steps"]
        one = train(run1, 1, seed, steps, stop_after=None, precision=None, **changes)
        r1 = roles(run1, 1)
        row |= {
            "steps_1l": one["steps"],
            "role_1l": ", ".join(r1["induction_heads"]) or "none",
            "best_vw_1l": r1["best_induction_vw"],
            "minutes_1l": round(one["elapsed_s"] / 60, 2),
            "heads_1l": r1,
            "curve_1l": curve(one["metrics"], 1),
        }
    return row


def byte_reference(seeds: list[int]) -> list[dict[str, Any]]:
    """The byte preset's rows for ``seeds`` from §0g's table (the code these runs used:
    experiments/archive/results/text_seeds_bf16_sdpa/text_seeds.json)."""
    path = Path(__file__).resolve().parent / "archive/results/text_seeds_bf16_sdpa/text_seeds.json"
    if not path.exists():
        return []
    rows = json.loads(path.read_text())["rows"]
    keep = ("seed", "floor_step", "role_step", "role_tokens", "role_minutes", "role_2l")
    keep += ("best_vw_2l", "tau_2l", "steps_2l", "prev_token_l0_2l", "tokens_per_s_2l")
    keep += ("steps_1l", "role_1l", "best_vw_1l")
    return [
        {
            "vocab_size": "bytes",
            "unk_share_train": 0.0,
            "unk_share_val": 0.0,
            "bytes_per_token": 1.0,
            **{k: r.get(k) for k in keep},
            "source": "text_seeds.json",
        }
        for r in rows
        if r["seed"] in seeds
    ]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--vocab-sizes", default="256,1024,4096", help="K of the compact BPE codec")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--max-steps", type=int, default=12_000)
    ap.add_argument("--window", type=int, default=3000, help="steps trained past the floor")
    ap.add_argument("--control", action="store_true", help="train each 1-layer control too")
    ap.add_argument("--shares-only", action="store_true", help="only the <unk> shares")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--merge", nargs="+", default=None, help="per-run JSON files to combine")
    ap.add_argument(
        "--runs", default=None, help="with --merge: the run folders, to add the frequent-id probe"
    )
    args = ap.parse_args()
    sizes = [int(k) for k in args.vocab_sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.merge:
        rows = [r for f in args.merge for r in json.loads(Path(f).read_text())["rows"]]
        rows = [r for r in rows if r.get("source") != "text_seeds.json"]
        for r in rows:
            if args.runs and "frequent_probe_2l" not in r:
                run = Path(args.runs) / f"k{r['vocab_size']}-s{r['seed']}-2"
                r["frequent_probe_2l"] = frequent_probe(run)
        seeds = sorted({r["seed"] for r in rows})
        finish(sorted(rows, key=lambda r: (r["vocab_size"], r["seed"])), seeds, args.json)
        return
    vocabs = [shares(k) for k in sizes]
    print_table(vocabs, list(vocabs[0]))
    if args.shares_only:
        return
    root = Path(args.out or tempfile.mkdtemp(prefix="unk-share-"))
    rows = []
    for vocab in vocabs:
        for seed in seeds:
            rows.append(one_run(root, vocab, seed, args.max_steps, args.window, args.control))
            print_table([rows[-1]], COLUMNS)
    finish(rows, seeds, args.json)


def finish(rows: list[dict[str, Any]], seeds: list[int], out: str | None) -> None:
    reference = byte_reference(seeds)
    print_table(reference + rows, COLUMNS)
    write_result(
        "unk_share",
        {
            "preset": PRESET,
            "changed": "codec: GPT-2 BPE compacted to vocab_size ids (d_vocab the same)",
            "rows": rows,
            "byte_reference": reference,
        },
        out,
    )


if __name__ == "__main__":
    main()
