"""The exams and the text measures on the slow tier's fixtures, as numbers (docs/study.md §4).

Trains the cpu preset's 2-layer and 1-layer models as ``tests/integration/conftest.py`` does
(seed 0, 700 steps, ``score_every`` 25), builds an untrained 2-layer model (seed 12345, as
``tests/integration/test_period_exam_trained.py``), and measures what that test asserts:

- the period exams (letters and random tokens, periods 2-16, 200 prompts each at random offsets):
  the 2-layer model with the untrained twin of ``exam_with_chance`` and the 1-layer model as chance
  levels (exact one-sided McNemar, Bonferroni); the 1-layer and the untrained model's own passes;
- on 256 held-out text windows: the in-context score, the repeated-passage drop (256 passages)
  with their 95% intervals, and the best text induction score.

    python experiments/exam_text_measures.py [--threads 1] [--steps 700] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common
from _common import print_table, write_result


def _train(out: Path, n_layers: int, steps: int, seed: int):
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    p = with_overrides(get_preset("cpu", n_layers), steps=steps, seed=seed, score_every=25)
    t0 = time.perf_counter()
    res = train_model(out, p.model, p.data, p.train, preset="cpu", progress=False)
    return res.run, time.perf_counter() - t0


def _held_out(run, n: int = 256):
    from interp_toolkit.text.stream import DataConfig, tokenize_corpus, windows

    d = DataConfig(**run.settings["data"])
    corpus = tokenize_corpus(d.corpus, d.val_fraction, d.max_tokens, progress=False)
    return windows(corpus.val_ids, run.codec, run.model_cfg.n_ctx)[:n]


def _exam_summary(exams) -> dict[str, Any]:
    from interp_toolkit.exams.verdict import exam_verdict

    v = exam_verdict(exams)
    lo = v.lowest
    return {
        "n_passing": v.n_passing,
        "n_exams": v.n_exams,
        "lowest": {
            "kind": lo.kind,
            "period": lo.period,
            "passes": lo.passes,
            "n_prompts": lo.n_prompts,
            "wilson95": [round(lo.interval.low, 4), round(lo.interval.high, 4)],
        },
        "max_passes": max(e.passes for e in exams),
        "alpha_per_exam": v.alpha,
        "above": {k: len(x) for k, x in v.above.items()},
        "compared": v.compared,
        "max_p_value": {
            name: max(c.p_value for e in exams for c in e.chance if c.model == name)
            for name in v.compared
        },
        "periods": [
            {
                "kind": e.kind,
                "period": e.period,
                "passes": e.passes,
                "wilson_low": round(e.interval.low, 4),
                "chance": {c.model: c.passes for c in e.chance},
            }
            for e in exams
        ],
    }


def _text_summary(m) -> dict[str, Any]:
    head, best = m.best()
    return {
        "icl_score": m.icl.score.to_dict(),
        "icl_positions": m.icl.positions(),
        "passage_drop": m.passage.drop.to_dict(),
        "passage_loss": [m.passage.first, m.passage.second],
        "val_loss": m.val_loss,
        "text_induction_best": [head, best],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from interp_toolkit.exams.periods import exam_by_period, exam_with_chance, with_chance
    from interp_toolkit.exams.text_measures import text_induction
    from interp_toolkit.models.build import build_model

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        two, t2 = _train(Path(tmp) / "cpu-2l", 2, args.steps, args.seed)
        one, t1 = _train(Path(tmp) / "cpu-1l", 1, args.steps, args.seed)
        raw = build_model(two.model_cfg.replace(seed=12345), codec=two.codec)
        codec = two.codec
        t0 = time.perf_counter()
        with torch.no_grad():
            ex1 = exam_by_period(one.model, codec)
            ex0 = exam_by_period(raw, codec)
            ex2 = with_chance(
                exam_with_chance(two.model, codec, model_cfg=two.model_cfg), ex1, "1-layer model"
            )
            ex1 = with_chance(ex1, ex0, "untrained 2-layer model (seed 12345)")
            exam_s = time.perf_counter() - t0
            held = _held_out(two)
            text = {
                name: _text_summary(text_induction(m, held, passage_rows=256))
                for name, m in (("2l", two.model), ("1l", one.model), ("untrained", raw))
            }
        logged = [r for r in two.metrics() if "icl_score" in r]
    exams = {"2l": _exam_summary(ex2), "1l": _exam_summary(ex1), "untrained": _exam_summary(ex0)}
    rows = [
        {
            "model": name,
            "exams_passing": f"{e['n_passing']}/{e['n_exams']}",
            "lowest_wilson_low": e["lowest"]["wilson95"][0],
            "max_passes": e["max_passes"],
            "above": "; ".join(f"{k}: {v}" for k, v in e["above"].items()) or "-",
            "icl": round(text[name]["icl_score"]["estimate"], 3),
            "icl_ci": [round(text[name]["icl_score"][k], 3) for k in ("low", "high")],
            "drop": round(text[name]["passage_drop"]["estimate"], 3),
            "drop_ci": [round(text[name]["passage_drop"][k], 3) for k in ("low", "high")],
            "best_text_induction": text[name]["text_induction_best"],
        }
        for name, e in exams.items()
    ]
    print_table(rows, list(rows[0]))
    write_result(
        "exam_text_measures",
        {
            "preset": "cpu",
            "seed": args.seed,
            "steps": args.steps,
            "score_every": 25,
            "threads": args.threads,
            "untrained_seed": 12345,
            "held_out_windows": len(held),
            "train_seconds": {"2l": round(t2, 1), "1l": round(t1, 1)},
            "exam_seconds_all": round(exam_s, 1),
            "first_logged_text_step": logged[0]["step"] if logged else None,
            "rows": rows,
            "exams": exams,
            "text": text,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        args.json,
    )


if __name__ == "__main__":
    main()
