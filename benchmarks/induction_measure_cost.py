"""What the text measures and the new exams cost, side by side with what they replace.

Per scoring during training (every ``score_every`` steps): the synthetic-probe head scores
(unchanged), the old held-out loss (one plain forward pass over 64 windows) and its replacement,
:func:`~interp_toolkit.training.metrics.text_metrics` (256 windows, the first 64 of them
the old held-out loss's, with the text head scores and the in-context score from one hooked
forward pass, plus 16 repeated passages). Per run
(``reproduce``'s analysis): the old period exam (letters, 30 prompts, right after BOS) and the
new one (letters and random tokens, 200 prompts at random offsets, plus the same prompts on an
untrained model: :func:`~interp_toolkit.exams.periods.exam_with_chance`).

Models are untrained cpu-preset models (cost does not depend on the weights), 1, 2 and 8 layers,
one thread (what ``reproduce`` gives each run). The machine is shared: the cases run side by side,
interleaved, ``--repeats`` times each; the median CPU seconds of this process are reported (one
torch thread: the work done), the wall seconds and the load average beside them.

    python benchmarks/induction_measure_cost.py [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from _common import print_table, write_result


def _codec():
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab, gpt2_encoding

    enc = gpt2_encoding()
    letters = [" " + chr(c) for c in [*range(65, 91), *range(97, 123)]]
    kept = [enc.encode_ordinary(s)[0] for s in letters]
    rest = [i for i in range(1000, 3000) if i not in kept][: 1024 - 2 - len(kept)]
    return CompactVocab([EOT_ID, *kept, *rest])


def _timed(fn) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (one torch thread: CPU time is the work done,
    much less sensitive than wall time to the other processes of a shared machine)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layers", default="1,2,8")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from interp_toolkit.exams.periods import exam_by_period, exam_with_chance
    from interp_toolkit.heads.repeats import default_probe
    from interp_toolkit.models.build import build_model
    from interp_toolkit.training.metrics import (
        TEXT_WINDOWS,
        VAL_WINDOWS,
        score_grids,
        text_metrics,
    )
    from interp_toolkit.training.presets import get_preset

    codec = _codec()
    load_before = os.getloadavg()
    rows = []
    for n_layers in [int(x) for x in args.layers.split(",")]:
        cfg = get_preset("cpu", n_layers).model
        model = build_model(cfg, codec=codec).eval()
        probe = default_probe(codec, cfg.n_ctx, n_seqs=32, seed=1)
        val = torch.randint(1, codec.d_vocab - 1, (TEXT_WINDOWS, cfg.n_ctx))
        cases = {
            "probe_scores": lambda m=model, p=probe: score_grids(m, p),
            "old_val_loss": lambda m=model, v=val[:VAL_WINDOWS]: m(v, return_type="loss"),
            "text_metrics": lambda m=model, v=val: text_metrics(m, v),
            "old_exam": lambda m=model: exam_by_period(
                m, codec, kinds=("letters",), n_prompts=30, max_offset=0
            ),
            "new_exam": lambda m=model, c=cfg: exam_with_chance(m, codec, model_cfg=c),
        }
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        with torch.no_grad():
            for fn in cases.values():  # warm-up
                fn()
            for _ in range(args.repeats):
                for name, fn in cases.items():
                    times[name].append(_timed(fn))
        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        wall = {k: statistics.median(w for w, _ in v) for k, v in times.items()}
        rows.append(
            {
                "layers": n_layers,
                **{f"{k}_cpu_s": round(v, 4) for k, v in cpu.items()},
                "added_per_scoring_cpu_s": round(cpu["text_metrics"] - cpu["old_val_loss"], 4),
                "added_per_run_exam_cpu_s": round(cpu["new_exam"] - cpu["old_exam"], 3),
                "wall_s": {k: round(v, 4) for k, v in wall.items()},
            }
        )
        print_table(rows[-1:], [k for k in rows[-1] if k != "wall_s"])
    write_result(
        "induction_measure_cost",
        {
            "rows": rows,
            "repeats": args.repeats,
            "threads": 1,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        args.json,
    )


if __name__ == "__main__":
    main()
