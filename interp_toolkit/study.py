"""The study in one call: train 1- and 2-layer models (3/8 on request), then examine them.

:func:`reproduce` trains each model on the embedded corpus with the preset's documented recipe,
writes samples, exam results, the head table (with its null-model τ), circuits, impact curves and
a report per run, and finally ``DIR/index.html``: the seed's finding side by side (1 layer fails the
exam and has no induction head; 2 layers pass and have one, with its previous-token partner), plus
the causal check (ablate the heads an induction head reads from and its score collapses) and composition scores.
Re-running reuses finished runs and resumes interrupted ones.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp_toolkit.errors import UserError
from interp_toolkit.io import check_writable_dir, write_json, write_text
from interp_toolkit.presets import LAYER_CHOICES, get_preset, with_overrides
from interp_toolkit.runs import CONFIG, WEIGHTS, Run, load_run, read_config, read_metrics
from interp_toolkit.training import train_model

STUDY_MARKER = "study.json"
SAMPLE_PROMPTS = ("def ", "import os\n", "class ", "    return ")


@dataclass(frozen=True)
class StudyConfig:
    """What ``interp-toolkit reproduce`` runs."""

    out: Path = Path("study")
    preset: str = "cpu"
    layers: tuple[int, ...] = (1, 2)
    seed: int = 0
    steps: int | None = None
    corpus: str | None = None
    sample_tokens: int = 40


@dataclass
class StudyResult:
    out: Path
    index: Path
    summaries: list[dict[str, Any]]
    causal: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_study_dir(out: Path) -> None:
    """``out`` must be new, empty, or a study folder this command wrote before."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a folder: choose another --out.")
    if out.is_dir() and any(out.iterdir()) and not (out / STUDY_MARKER).is_file():
        raise UserError(
            f"{out} holds something else (no {STUDY_MARKER}): choose a new or empty folder for --out."
        )
    check_writable_dir(out, "study folder")


def _run_is_finished(path: Path, steps: int) -> bool:
    if not (path / WEIGHTS).is_file() or not (path / CONFIG).is_file():
        return False
    rows = read_metrics(path)
    return bool(rows) and int(rows[-1]["step"]) >= steps


def train_or_reuse(path: Path, n_layers: int, cfg: StudyConfig) -> Run:
    preset = with_overrides(
        get_preset(cfg.preset, n_layers), steps=cfg.steps, seed=cfg.seed, corpus=cfg.corpus
    )
    steps = preset.train.steps
    if _run_is_finished(path, steps):
        _say(f"[{path.name}] finished run found: reusing it")
        return load_run(path)
    resume = (path / "checkpoints" / "state.json").is_file()
    if path.exists() and not resume:
        import shutil

        shutil.rmtree(path)  # a run that died before its first checkpoint: start over
    if resume:
        read_config(path)
    _say(
        f"[{path.name}] {'resuming' if resume else 'training'}: {n_layers} layer(s), {steps} steps, preset {cfg.preset}"
    )
    res = train_model(
        path, preset.model, preset.data, preset.train, resume=resume, preset=preset.name
    )
    return res.run


def write_samples(run: Run, n_tokens: int, seed: int) -> list[dict[str, str]]:
    from interp_toolkit.sampling import sample

    samples = [
        {
            "prompt": p,
            "text": sample(
                run.model, run.codec, p, n_tokens=n_tokens, temperature=0.8, top_k=40, seed=seed + i
            ),
        }
        for i, p in enumerate(SAMPLE_PROMPTS)
    ]
    write_json(run.path / "samples.json", samples)
    return samples


def causal_check(run: Run, report: Any, *, seed: int = 0) -> list[dict[str, Any]]:
    """Ablate earlier-layer heads and re-score the best later-layer induction head.

    Rows: the strongest previous-token head (the textbook K-composition partner), each
    earlier-layer duplicate-token head (the Q-composition route: find the earlier copy, then shift
    by position), and every earlier-layer head with a role at once. Mean ablation on hook_z.
    """
    from interp_toolkit.analysis.ablation import induction_after_ablation
    from interp_toolkit.analysis.batches import default_probe
    from interp_toolkit.analysis.scores import head_name, head_scores

    if run.model_cfg.n_layers < 2:
        return []
    sc = report.scores
    later = sc.induction[1:]
    flat = int(later.reshape(-1).argmax())
    ind = (1 + flat // later.shape[1], flat % later.shape[1])
    prev = sc.previous_token[: ind[0]]
    pflat = int(prev.reshape(-1).argmax())
    partner = (pflat // prev.shape[1], pflat % prev.shape[1])
    earlier_roles = [
        (layer, head, role)
        for layer, row in enumerate(report.roles[: ind[0]])
        for head, role in enumerate(row)
        if role != "none"
    ]
    sets: list[tuple[str, list[tuple[int, int]]]] = [("strongest previous-token head", [partner])]
    sets += [
        ("duplicate-token head", [(la, h)]) for la, h, r in earlier_roles if r == "duplicate-token"
    ]
    all_roles = [(la, h) for la, h, _ in earlier_roles]
    if len(all_roles) > 1:
        sets.append(("all earlier heads with a role", all_roles))
    batch = default_probe(run.codec, run.model_cfg.n_ctx, n_seqs=64, seed=seed + 11)
    with torch.no_grad():
        before = float(head_scores(run.model, batch).induction[ind])
        rows = []
        for what, heads in sets:
            after = induction_after_ablation(run.model, batch, heads, mode="mean")
            rows.append(
                {
                    "run": run.name,
                    "induction_head": head_name(*ind),
                    "ablated": what,
                    "ablated_heads": [head_name(*h) for h in heads],
                    "ablation": "mean (hook_z)",
                    "induction_before": round(before, 4),
                    "induction_after": round(float(after.induction[ind]), 4),
                }
            )
    return rows


def composition_summary(run: Run) -> dict[str, Any] | None:
    """Largest Q/K/V composition scores into layer-1+ heads, next to the random baseline."""
    from interp_toolkit.analysis.circuits import composition_baseline, composition_scores
    from interp_toolkit.analysis.scores import head_name

    if run.model_cfg.n_layers < 2:
        return None
    out: dict[str, Any] = {"run": run.name}
    base = composition_baseline(run.model)  # same shapes for Q, K and V composition
    for kind in ("q", "k", "v"):
        comp = composition_scores(run.model, kind)
        flat = comp.reshape(-1)
        best = int(torch.nan_to_num(flat, nan=-1.0).argmax())
        la, ha, lb, hb = (int(i) for i in torch.unravel_index(torch.tensor(best), comp.shape))
        out[kind] = {
            "max": round(float(flat[best]), 4),
            "from": head_name(la, ha),
            "to": head_name(lb, hb),
            "random_baseline": round(float(base), 4),
        }
    return out


def analyse_and_report(run: Run, cfg: StudyConfig) -> tuple[dict[str, Any], Any]:
    from interp_toolkit.analysis.circuits import copying_scores
    from interp_toolkit.views.report import analyse_run, run_report_html

    _say(f"[{run.name}] samples, exams, heads, circuits, impact ...")
    samples = write_samples(run, cfg.sample_tokens, cfg.seed)
    analysis = analyse_run(run, samples=samples, seed=cfg.seed)
    write_json(run.path / "heads.json", analysis.head_report.to_dict())
    write_json(
        run.path / "exam.json",
        [
            e.result.to_dict() if e.result is not None else {"name": e.name, "error": e.error}
            for e in analysis.exams
        ],
    )
    with torch.no_grad():
        copy = copying_scores(run.model)
    write_json(
        run.path / "circuits.json",
        {"copying_score": [[round(float(v), 4) for v in row] for row in copy]},
    )
    write_text(run.path / "report.html", run_report_html(analysis))
    return analysis.summary(href=f"{run.name}/report.html"), analysis.head_report


def reproduce(cfg: StudyConfig) -> StudyResult:
    from interp_toolkit.views.report import Section, render_comparison, table

    for n in cfg.layers:
        if n not in LAYER_CHOICES:
            raise UserError(
                f"--layers {n} is not offered: use some of {', '.join(map(str, LAYER_CHOICES))}."
            )
    get_preset(cfg.preset, cfg.layers[0])  # unknown preset -> UserError before any work
    out = Path(cfg.out)
    check_study_dir(out)
    t0 = time.perf_counter()
    write_json(
        out / STUDY_MARKER,
        {"preset": cfg.preset, "layers": list(cfg.layers), "seed": cfg.seed, "status": "running"},
    )
    summaries, causal, comps = [], [], []
    for n in sorted(cfg.layers):
        run = train_or_reuse(out / f"{cfg.preset}-{n}l", n, cfg)
        summary, report = analyse_and_report(run, cfg)
        summaries.append(summary)
        causal.extend(causal_check(run, report, seed=cfg.seed))
        comp = composition_summary(run)
        if comp:
            comps.append(comp)

    extra = []
    if causal:
        extra.append(
            Section(
                "Causal check: ablate the earlier-layer heads",
                [
                    "<p>Mean-ablating (hook_z) earlier-layer heads, then re-scoring the best later-layer "
                    "induction head on repeated random tokens. The textbook circuit runs through a "
                    "previous-token head (K-composition); a model can also find the earlier copy with a "
                    "duplicate-token head and shift by position (Q-composition). Whichever head the "
                    "induction head needs, ablating it makes the score collapse.</p>",
                    table(
                        ["run", "induction head", "ablated", "heads", "induction before", "after"],
                        [
                            [
                                c["run"],
                                c["induction_head"],
                                c["ablated"],
                                ", ".join(c["ablated_heads"]),
                                c["induction_before"],
                                c["induction_after"],
                            ]
                            for c in causal
                        ],
                    ),
                ],
            )
        )
    if comps:
        rows = [
            [c["run"], k.upper(), c[k]["from"], c[k]["to"], c[k]["max"], c[k]["random_baseline"]]
            for c in comps
            for k in ("q", "k", "v")
        ]
        extra.append(
            Section(
                "Composition scores",
                [
                    "<p>Largest ‖W_A W_B‖_F / (‖W_A‖_F ‖W_B‖_F) from an earlier head's OV into a later head's "
                    "Q, K or V side, next to the mean for random matrices of the same shapes. Induction runs on "
                    "K-composition.</p>",
                    table(["run", "kind", "from", "to", "score", "random baseline"], rows),
                ],
            )
        )
    elapsed = time.perf_counter() - t0
    html = render_comparison(
        summaries,
        title="Induction heads: one layer versus two",
        subtitle=f"preset {cfg.preset}, seed {cfg.seed}, layers {', '.join(map(str, sorted(cfg.layers)))}; "
        f"this run took {elapsed / 60:.1f} min",
        extra=extra,
    )
    index = write_text(out / "index.html", html)
    write_json(
        out / STUDY_MARKER,
        {
            "preset": cfg.preset,
            "layers": sorted(cfg.layers),
            "seed": cfg.seed,
            "status": "done",
            "elapsed_s": round(elapsed, 1),
            "runs": [
                {
                    k: s[k]
                    for k in (
                        "name",
                        "n_layers",
                        "final_loss",
                        "exam",
                        "heads",
                        "partner",
                        "top_induction",
                        "taus",
                    )
                }
                for s in summaries
            ],
            "causal": causal,
            "composition": comps,
        },
    )
    return StudyResult(out=out, index=index, summaries=summaries, causal=causal, elapsed_s=elapsed)


def parse_layers(text: str) -> tuple[int, ...]:
    try:
        layers = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise UserError(
            f"--layers {text!r} must be comma-separated integers such as 1,2."
        ) from None
    if not layers:
        raise UserError("--layers is empty: give e.g. 1,2.")
    return layers


def summary_lines(result: StudyResult) -> Sequence[str]:
    from interp_toolkit.views.report import describe_run

    lines = [describe_run(s) for s in result.summaries]
    for c in result.causal:
        lines.append(
            f"causal check ({c['run']}): ablating {c['ablated']} {', '.join(c['ablated_heads'])} moves induction head "
            f"{c['induction_head']} from {c['induction_before']:.2f} to {c['induction_after']:.2f}"
        )
    lines.append(f"report: {result.index} ({result.elapsed_s / 60:.1f} min)")
    return lines


#: settings ``sweep`` can vary -> whether their values are integers
SWEEPABLE = {
    "n_ctx": True,
    "vocab_size": True,
    "d_model": True,
    "repeat_fraction": False,
    "lr": False,
}


@dataclass(frozen=True)
class SweepConfig:
    """Train the same preset at several values of one setting and time induction in each."""

    out: Path
    param: str
    values: tuple[float, ...]
    preset: str = "cpu"
    layers: int = 2
    steps: int | None = None
    seed: int = 0
    threshold: float = 0.4


def sweep(cfg: SweepConfig) -> list[dict[str, Any]]:
    """For each value: train (stopping once a layer-1+ head stays above ``threshold``), then record
    the step, tokens and minutes to induction and the final loss. Writes ``OUT/sweep.json`` and
    ``OUT/index.html``; finished runs are reused."""
    from interp_toolkit.analysis.dynamics import trajectory
    from interp_toolkit.views.report import Section, render_report, table

    if cfg.param not in SWEEPABLE:
        raise UserError(f"cannot sweep {cfg.param!r}: choose one of {', '.join(SWEEPABLE)}.")
    if not cfg.values:
        raise UserError("--values is empty: give e.g. 16,32,64.")
    out = Path(cfg.out)
    check_study_dir(out)
    write_json(
        out / STUDY_MARKER, {"sweep": cfg.param, "values": list(cfg.values), "status": "running"}
    )
    rows = []
    for value in cfg.values:
        v: Any = int(value) if SWEEPABLE[cfg.param] else value
        changes: dict[str, Any] = {
            cfg.param: v,
            "steps": cfg.steps,
            "seed": cfg.seed,
            "stop_score": cfg.threshold,
        }
        base = get_preset(cfg.preset, cfg.layers)
        if cfg.param == "d_model":
            changes["d_head"] = int(v) // base.model.n_heads
        preset = with_overrides(base, **changes)
        path = out / f"{cfg.param}-{value:g}"
        finished = (path / WEIGHTS).is_file()
        if not finished:
            resume = (path / "checkpoints" / "state.json").is_file()
            _say(f"[sweep] {cfg.param}={v}: training")
            train_model(
                path, preset.model, preset.data, preset.train, resume=resume, preset=preset.name
            )
        tr = trajectory(path)
        pc = tr.phase_change(cfg.threshold)
        rows_m = read_metrics(path)
        hit = next((r for r in rows_m if r["step"] == pc["step"]), None)
        rows.append(
            {
                cfg.param: v,
                "steps_trained": rows_m[-1]["step"],
                "step_to_induction": pc["step"],
                "tokens_to_induction": pc.get("tokens"),
                "minutes_to_induction": round(hit["elapsed_s"] / 60, 2) if hit else None,
                "best_induction": round(
                    float(tr.induction[:, min(1, tr.induction.shape[1] - 1) :].max()), 3
                ),
                "final_loss": rows_m[-1]["loss"],
            }
        )
    write_json(
        out / "sweep.json",
        {
            "param": cfg.param,
            "preset": cfg.preset,
            "layers": cfg.layers,
            "threshold": cfg.threshold,
            "rows": rows,
        },
    )
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Scatter(
            x=[r[cfg.param] for r in rows],
            y=[r["step_to_induction"] for r in rows],
            mode="lines+markers",
            name="steps to induction",
        )
    )
    fig.update_layout(
        title=f"Steps until a layer-1+ head's induction score > {cfg.threshold}",
        xaxis_title=cfg.param,
        yaxis_title="steps (none = never)",
        height=380,
    )
    cols = list(rows[0])
    html = render_report(
        [Section("Sweep", [fig, table(cols, [[r[c] for c in cols] for r in rows])])],
        title=f"Sweep over {cfg.param}",
        subtitle=f"preset {cfg.preset}, {cfg.layers} layers, seed {cfg.seed}",
    )
    write_text(out / "index.html", html)
    write_json(
        out / STUDY_MARKER, {"sweep": cfg.param, "values": list(cfg.values), "status": "done"}
    )
    return rows
