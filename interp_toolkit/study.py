"""The study in one call: train 1, 2, 3 and 8 layers (the seed's four depths), then examine them.

:func:`reproduce` trains each model on the embedded corpus with the preset's documented recipe,
each 2+-layer model only until its induction score has stayed past the floor for
``StudyConfig.after_induction`` steps, and the 1-layer control as long as the longest of them. It
writes samples, exam results, the head table (every head's scores tested against their own null models), circuits, impact curves and a
report per run, and finally ``DIR/index.html``: the depths side by side (induction heads per layer,
exam pass rate by period, time to induction, losses, the route each grew by ablation, curves), with
every sentence built from the measurements (:mod:`interp_toolkit.reports.findings`). Re-running
reuses finished runs and resumes interrupted ones, but only runs recorded with the settings asked
for (:func:`is_finished`); every run is checked before any work.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp_toolkit.analysis.ablation import CausalRow, causal_check
from interp_toolkit.analysis.circuits import copying_table
from interp_toolkit.analysis.composition import composition_baseline, composition_scores
from interp_toolkit.analysis.heads import HeadId
from interp_toolkit.analysis.routes import THRESHOLDS
from interp_toolkit.analysis.run_analysis import RunAnalysis, RunSummary, analyse_run
from interp_toolkit.devices import resolve_device
from interp_toolkit.errors import UserError
from interp_toolkit.io import LOCK_NAME, check_writable_dir, folder_lock, write_json, write_text
from interp_toolkit.presets import LAYER_CHOICES, Preset, get_preset, with_overrides
from interp_toolkit.reports.findings import (
    DepthMeasurement,
    causal_sentence,
    data_mix_sentence,
    measure_depth,
    study_findings,
)
from interp_toolkit.reports.run_report import run_report_html
from interp_toolkit.reports.study_report import (
    causal_section,
    composition_section,
    depth_section,
    render_comparison,
)
from interp_toolkit.runs import Run, RunPaths, load_run, read_config, read_metrics
from interp_toolkit.sampling import sample
from interp_toolkit.training import train_model
from interp_toolkit.training.checkpoints import read_progress
from interp_toolkit.training.settings import config_differences, recorded_configs

#: A study (or sweep) folder: this marker, ``index.html`` and one run folder per model.
STUDY_MARKER = "study.json"
INDEX = "index.html"
SAMPLE_PROMPTS = ("def ", "import os\n", "class ", "    return ")
#: What study.json keeps of each run's summary.
STUDY_JSON_FIELDS = (
    "name",
    "n_layers",
    "final_loss",
    "exam",
    "heads",
    "partner",
    "top_induction",
    "decides",
    "test",
)


@dataclass(frozen=True)
class StudyConfig:
    """What ``interp-toolkit reproduce`` runs."""

    out: Path = Path("study")
    preset: str = "cpu"
    layers: tuple[int, ...] = LAYER_CHOICES
    seed: int = 0
    steps: int | None = None  # train exactly this many steps (default: stop after induction)
    after_induction: int = 200  # steps a 2+-layer model trains once induction has formed
    threads: int = 1  # torch threads per training run (2 threads on 2 shared cores are slower)
    workers: int = (
        2  # runs trained at once on the CPU, in separate processes (a GPU: one at a time)
    )
    corpus: str | None = None
    sample_tokens: int = 40
    device: str = "auto"


@dataclass
class StudyResult:
    out: Path
    index: Path
    summaries: list[RunSummary]
    causal: list[CausalRow] = field(default_factory=list)
    depths: list[DepthMeasurement] = field(default_factory=list)
    elapsed_s: float = 0.0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check_study_dir(out: Path) -> None:
    """``out`` must be new, empty, or a study folder this command wrote before."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file, not a folder: choose another --out.")
    held = [p for p in out.iterdir() if p.name != LOCK_NAME] if out.is_dir() else []
    if held and not (out / STUDY_MARKER).is_file():
        raise UserError(
            f"{out} holds something else (no {STUDY_MARKER}): choose a new or empty folder for --out."
        )
    check_writable_dir(out, "study folder")


@contextmanager
def study_folder(out: Path, marker: dict[str, Any]) -> Iterator[None]:
    """Hold the study folder (a second study in it is refused) and keep ``study.json`` true:
    ``running`` while the block runs, ``stopped`` with the reason if it fails (the block
    writes ``done`` itself)."""
    with folder_lock(out, "study folder"):
        write_json(out / STUDY_MARKER, {**marker, "status": "running"})
        try:
            yield
        except BaseException as exc:
            reason = str(exc) or type(exc).__name__
            write_json(out / STUDY_MARKER, {**marker, "status": "stopped", "reason": reason})
            raise


def is_finished(path: Path, preset: Preset) -> bool:
    """Whether ``path`` holds the finished run ``preset`` asks for. False when it holds nothing
    yet, or that run unfinished (or shorter: it is continued); a UserError when it holds a run
    recorded with other settings, or trained past the steps asked for."""
    paths = RunPaths(path)
    if not paths.config.is_file():
        return False
    recorded = recorded_configs(read_config(path), paths.config)
    diffs = config_differences(recorded, (preset.model, preset.data, preset.train), steps=False)
    progress = read_progress(paths)
    if progress is not None and progress.step > preset.train.steps:
        diffs.append(f"steps: trained to {progress.step} (asked {preset.train.steps})")
    if diffs:
        raise UserError(
            f"{path} holds a run trained otherwise than asked: {'; '.join(diffs)}. Reusing it "
            f"would mislabel it: choose another --out, or delete {path} to train it as asked."
        )
    return paths.weights.is_file() and recorded[2].steps == preset.train.steps


def train_or_reuse(path: Path, preset: Preset, device: str = "auto") -> Run:
    """The finished run ``preset`` asks for in ``path``: reused, continued from its checkpoint,
    or trained (:func:`is_finished` says which, or why not), on ``device``."""
    if is_finished(path, preset):
        say(f"[{path.name}] finished run with the same settings found: reusing it")
        return load_run(path, device=device)
    resume = RunPaths(path).config.is_file()
    say(
        f"[{path.name}] {'resuming' if resume else 'training'}: {preset.model.n_layers} layer(s), "
        f"{preset.train.steps} steps, preset {preset.name}"
    )
    return train_model(
        path,
        preset.model,
        preset.data,
        preset.train,
        resume=resume,
        preset=preset.name,
        device=device,
    ).run


def planned_runs(out: Path, presets: dict[str, Preset]) -> None:
    """Check every run of a study or sweep before any work: valid settings, and a folder that is
    empty, or holds the same run (:func:`is_finished`)."""
    for name, preset in presets.items():
        preset.validate()
        is_finished(out / name, preset)


def _train_quietly(path: Path, preset: Preset) -> None:
    """A worker process's job: train (or reuse) one run on the CPU; the parent loads it later."""
    train_or_reuse(path, preset, "cpu")


def train_runs(jobs: Sequence[tuple[Path, Preset]], workers: int, device: str = "auto") -> None:
    """Train (or reuse) independent runs in the order given (put the longest first): on the CPU
    ``workers`` at a time in separate processes; on any other device one after another (processes
    sharing one accelerator would only contend for it). Each run is a function of its preset
    alone, so running them side by side changes nothing but the wall time."""
    jobs = [(path, preset) for path, preset in jobs if not is_finished(path, preset)]
    if workers <= 1 or len(jobs) <= 1 or resolve_device(device).type != "cpu":
        for path, preset in jobs:
            train_or_reuse(path, preset, device)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for job in [pool.submit(_train_quietly, path, preset) for path, preset in jobs]:
            job.result()


def depth_preset(cfg: StudyConfig, n_layers: int, control_steps: int | None = None) -> Preset:
    """What one depth trains with: the preset with the study's seed and corpus; ``--steps`` when
    given, else a 2+-layer model stops ``after_induction`` steps after its induction score passes
    the floor, and the 1-layer control trains ``control_steps`` (the longest deeper run)."""
    preset = with_overrides(
        get_preset(cfg.preset, n_layers), seed=cfg.seed, corpus=cfg.corpus, threads=cfg.threads
    )
    if cfg.steps is not None:
        return with_overrides(preset, steps=cfg.steps)
    if n_layers > 1:
        return with_overrides(
            preset, stop_score=THRESHOLDS.induction, stop_after=cfg.after_induction
        )
    return with_overrides(preset, steps=control_steps)


def write_samples(run: Run, n_tokens: int, seed: int) -> list[dict[str, str]]:
    samples = [
        {
            "prompt": p,
            "text": sample(
                run.model, run.codec, p, n_tokens=n_tokens, temperature=0.8, top_k=40, seed=seed + i
            ),
        }
        for i, p in enumerate(SAMPLE_PROMPTS)
    ]
    write_json(run.paths.samples, samples)
    return samples


def composition_summary(run: Run) -> dict[str, Any] | None:
    """Largest Q/K/V composition scores into layer-1+ heads, next to the random baseline."""
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
            "from": str(HeadId(la, ha)),
            "to": str(HeadId(lb, hb)),
            "random_baseline": round(float(base), 4),
        }
    return out


def analyse_and_report(run: Run, cfg: StudyConfig) -> tuple[RunSummary, RunAnalysis]:
    """Samples, the run analysis (heads, exams, impact), circuits and the run's report.html."""
    say(f"[{run.name}] samples, exams, heads, circuits, impact ...")
    samples = write_samples(run, cfg.sample_tokens, cfg.seed)
    analysis = analyse_run(run, samples=samples, seed=cfg.seed)
    paths = run.paths
    write_json(paths.heads, analysis.head_report.to_dict())
    write_json(
        paths.exam,
        {
            "prompts": [
                e.result.to_dict()
                if e.result is not None
                else {"name": e.exam.name, "error": e.error}
                for e in analysis.exams
            ],
            "periods": [e.to_dict() for e in analysis.period_exams],
        },
    )
    with torch.no_grad():
        write_json(paths.circuits, copying_table(run.model))
    write_text(paths.report, run_report_html(analysis))
    href = f"{run.name}/{paths.report.name}"
    return analysis.summary(href=href), analysis


def reproduce(cfg: StudyConfig) -> StudyResult:
    for n in cfg.layers:
        if n not in LAYER_CHOICES:
            raise UserError(
                f"--layers {n} is not offered: use some of {', '.join(map(str, LAYER_CHOICES))}."
            )
    get_preset(cfg.preset, cfg.layers[0])  # unknown preset -> UserError before any work
    if cfg.workers < 1 or cfg.threads < 1:
        raise UserError(f"--workers {cfg.workers} / threads {cfg.threads}: use 1 or more.")
    resolve_device(cfg.device)  # an absent device -> UserError before any work
    out = Path(cfg.out)
    check_study_dir(out)
    # what each depth trains with (the 1-layer control's length is settled later)
    presets = {f"{cfg.preset}-{n}l": depth_preset(cfg, n) for n in sorted(cfg.layers)}
    planned_runs(out, presets)
    marker = {"preset": cfg.preset, "layers": sorted(cfg.layers), "seed": cfg.seed}
    with study_folder(out, marker):
        return _reproduce(cfg, out, presets, marker)


def _reproduce(
    cfg: StudyConfig, out: Path, presets: dict[str, Preset], marker: dict[str, Any]
) -> StudyResult:
    t0 = time.perf_counter()
    summaries, causal, comps, depths, mix = [], [], [], [], ""
    # Every run whose length is known now trains first, side by side (deepest first); the
    # 1-layer control, unless --steps fixes it, trains as long as the longest of them.
    path = {n: out / f"{cfg.preset}-{n}l" for n in cfg.layers}
    now = [n for n in sorted(cfg.layers, reverse=True) if n > 1 or cfg.steps is not None]
    train_runs([(path[n], presets[path[n].name]) for n in now], cfg.workers, cfg.device)
    for n in sorted(cfg.layers, key=lambda n: (n not in now, n)):
        longest = max((d.steps for d in depths), default=None)
        run = train_or_reuse(path[n], depth_preset(cfg, n, longest), cfg.device)
        summary, analysis = analyse_and_report(run, cfg)
        mix = data_mix_sentence(run.settings, run.model_cfg.n_ctx)
        rows = causal_check(
            run.model, run.codec, analysis.head_report, name=run.name, seed=cfg.seed
        )
        depths.append(measure_depth(run, summary, analysis.period_exams, rows))
        summaries.append(summary)
        causal.extend(rows)
        comp = composition_summary(run)
        if comp:
            comps.append(comp)
    order = sorted(range(len(depths)), key=lambda i: depths[i].n_layers)
    summaries, depths = [summaries[i] for i in order], [depths[i] for i in order]

    extra = [depth_section(depths, curves={s.name: read_metrics(out / s.name) for s in summaries})]
    if causal:
        extra.append(causal_section(causal))
    if comps:
        rows = [
            [c["run"], k.upper(), c[k]["from"], c[k]["to"], c[k]["max"], c[k]["random_baseline"]]
            for c in comps
            for k in ("q", "k", "v")
        ]
        extra.append(composition_section(rows))
    elapsed = time.perf_counter() - t0
    html = render_comparison(
        summaries,
        title="Induction heads at every depth",
        subtitle=f"preset {cfg.preset}, seed {cfg.seed}, layers "
        f"{', '.join(str(d.n_layers) for d in depths)}; this run took {elapsed / 60:.1f} min. {mix}",
        finding=study_findings(depths),
        extra=extra,
    )
    index = write_text(out / INDEX, html)
    write_json(
        out / STUDY_MARKER,
        {
            **marker,
            "status": "done",
            "elapsed_s": round(elapsed, 1),
            "thresholds": dataclasses.asdict(THRESHOLDS),
            "runs": [{k: s.to_dict()[k] for k in STUDY_JSON_FIELDS} for s in summaries],
            "depths": [d.to_dict() for d in depths],
            "causal": [dataclasses.asdict(c) for c in causal],
            "composition": comps,
        },
    )
    return StudyResult(
        out=out, index=index, summaries=summaries, causal=causal, depths=depths, elapsed_s=elapsed
    )


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
    lines = list(study_findings(result.depths))
    lines += [causal_sentence(c) for c in result.causal]
    lines.append(f"report: {result.index} ({result.elapsed_s / 60:.1f} min)")
    return lines
