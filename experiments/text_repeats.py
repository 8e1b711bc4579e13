"""How much induction there is to learn in stdlib text, under each codec (docs/recipes.md).

    python experiments/text_repeats.py [--tokens 2000000] [--windows 3000]

For windows of n_ctx tokens drawn from the first ``--tokens`` training ids: the share of tokens
whose token occurred earlier in the window (``<unk>`` excluded), how often the token that followed
its last earlier occurrence is the next token (what an induction head would copy), and the share of
all tokens such a copy predicts. Codecs: the full GPT-2 ids; compact K (the K-1 most frequent
ids + ``<unk>``, as the toolkit); hash K/B (the K-B most frequent ids, the rest hashed into B
bucket ids, so repeats of a rare identifier stay repeats).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import write_result  # noqa: E402

from interp_toolkit.text.codecs import EOT_ID, GPT2_VOCAB_SIZE  # noqa: E402
from interp_toolkit.text.stream import tokenize_corpus  # noqa: E402


def codecs(counts: np.ndarray) -> dict[str, tuple[np.ndarray, int | None]]:
    counts = counts.astype(np.int64)
    counts[EOT_ID] = 1 << 62
    order = np.lexsort((np.arange(GPT2_VOCAB_SIZE), -counts))

    def compact(k: int) -> tuple[np.ndarray, int]:
        lut = np.full(GPT2_VOCAB_SIZE, k - 1)
        lut[order[: k - 1]] = np.arange(k - 1)
        return lut, k - 1

    def hashed(k: int, b: int) -> tuple[np.ndarray, None]:
        lut = np.full(GPT2_VOCAB_SIZE, -1)
        lut[order[: k - b]] = np.arange(k - b)
        rare = lut < 0
        lut[rare] = (k - b) + (np.arange(GPT2_VOCAB_SIZE)[rare] * 2654435761 % b)
        return lut, None

    return {
        "gpt2": (np.arange(GPT2_VOCAB_SIZE), None),
        "compact 1024": compact(1024),
        "compact 512": compact(512),
        "compact 256": compact(256),
        "hash 512/256": hashed(512, 256),
    }


def stats(ids: np.ndarray, unk: int | None, n_ctx: int, n_windows: int) -> tuple[float, ...]:
    rng = np.random.default_rng(0)
    n_rep = n_ok = n_tok = 0
    for s in rng.integers(0, len(ids) - n_ctx - 1, n_windows):
        w = ids[s : s + n_ctx + 1]
        last: dict[int, int] = {}
        for t in range(n_ctx):
            x = int(w[t])
            if x in last and x != unk:
                n_rep += 1
                n_ok += int(w[last[x] + 1] == w[t + 1])
            last[x] = t
            n_tok += 1
    return n_rep / n_tok, n_ok / max(1, n_rep), n_ok / n_tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=2_000_000)
    ap.add_argument("--windows", type=int, default=3000)
    ap.add_argument("--out", default=None, help="result JSON (default: results/ beside this)")
    args = ap.parse_args()
    corpus = tokenize_corpus("stdlib", progress=False)
    ids = np.asarray(corpus.train_ids[: args.tokens]).astype(np.int64)
    counts = np.bincount(np.asarray(corpus.train_ids), minlength=GPT2_VOCAB_SIZE)
    print("| codec | n_ctx | token seen earlier | copy right | tokens a copy predicts |")
    print("|---|---|---|---|---|")
    rows = []
    for n_ctx in (32, 64, 128):
        for name, (lut, unk) in codecs(counts).items():
            a, b, c = stats(lut[ids], unk, n_ctx, args.windows)
            print(f"| {name} | {n_ctx} | {a:.3f} | {b:.3f} | {c:.3f} |")
            row = {"codec": name, "n_ctx": n_ctx, "seen_earlier": a, "copy_right": b}
            rows.append(row | {"copy_predicts": c})
    payload = {"tokens": args.tokens, "windows": args.windows, "rows": rows}
    write_result("text_repeats", payload, args.out)


if __name__ == "__main__":
    main()
