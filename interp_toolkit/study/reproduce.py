"""The study in one call: both settings (natural text, the curriculum), every depth, examined.

:func:`reproduce` trains each model on the embedded corpus with its preset's documented recipe:
the natural-text pair (``text``: 1 and 2 layers on plain text read as bytes) beside the
curriculum's four depths (``cpu``: 1, 2, 3 and 8 layers); in each setting every 2+-layer model
trains only until its induction score has stayed past the floor for its preset's
``after_induction`` steps (``StudyConfig.after_induction`` overrides it), and the 1-layer control
as long as the longest of them.
``preset`` picks one setting alone.
With ``mlp``, the 1- and 2-layer models get MLP twins (the same recipe on the GPT-2 block). It
writes samples, exam results, the head table (every head's scores tested against their own null
models), circuits, impact curves and a report per run, and finally ``DIR/index.html``: the depths
side by side (induction heads per layer, exam pass rate by period, time to induction, losses, the
route each grew by path patching, its discovered circuit, curves), the MLP twins beside theirs with their neurons'
polysemanticity, and the previous-token probe of the 1- and 2-layer models
(:mod:`interp_toolkit.study.layers`), with every sentence built from the measurements
(:mod:`interp_toolkit.reports.findings`, :mod:`interp_toolkit.reports.layer_findings`).
Re-running reuses finished runs and resumes interrupted ones, but only runs recorded with the
settings asked for (:mod:`interp_toolkit.study.folder`); every run is checked before any work.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp_toolkit.causal import study_task
from interp_toolkit.causal.summary import CircuitSummary, summarise_circuits
from interp_toolkit.errors import UserError
from interp_toolkit.files.io import write_json, write_text
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.measures.depth import DepthMeasurement, measure_depth, one_layer_chance
from interp_toolkit.measures.layers import NeuronMeasurement, ProbeMeasurement
from interp_toolkit.measures.run import RunAnalysis, RunSummary, analyse_run
from interp_toolkit.measures.seeds import SeedMeasurements, over_seeds
from interp_toolkit.models.sampling import sample
from interp_toolkit.reports.circuit_report import circuit_section, circuit_sentence, route_section
from interp_toolkit.reports.claims import claim_lines, claims_json, claims_markdown
from interp_toolkit.reports.findings import data_mix_sentence
from interp_toolkit.reports.layer_findings import block_phrase, mlp_findings, probe_sentence
from interp_toolkit.reports.layers_report import mlp_section, probes_section
from interp_toolkit.reports.run_report import run_report_html
from interp_toolkit.reports.seeds import seeds_section
from interp_toolkit.reports.study_page import SettingPage, heads_table, lede, study_page
from interp_toolkit.reports.study_report import comparison_sections, depth_section
from interp_toolkit.runs.folder import Run, read_metrics, save_samples
from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.runtime.machine import machine_record
from interp_toolkit.runtime.seeds import check_study_seeds, derive, study_seeds
from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.study.folder import (
    CLAIMS_MD,
    INDEX,
    STUDY_MARKER,
    TRAINED_HERE,
    check_study_dir,
    is_finished,
    planned_runs,
    say,
    study_folder,
    train_job,
    train_or_reuse,
)
from interp_toolkit.study.jobs import Job, run_jobs
from interp_toolkit.study.layers import (
    MLP_LAYERS,
    PROBE_LAYERS,
    layer0_previous_token_heads,
    measure_neurons,
    measure_probe,
)
from interp_toolkit.study.plan import (  # noqa: F401  (StudyConfig: importable here)
    StudyConfig,
    StudyRun,
    control_steps,
    depth_preset,
    stops_on_induction,
    study_runs,
    study_settings,
)
from interp_toolkit.study.seeds import seed_configs, stages_section
from interp_toolkit.training.presets import PRESETS, Preset, check_layers
from interp_toolkit.views.page import Section
from interp_toolkit.weights.circuits import copying_table

SAMPLE_PROMPTS = ("def ", "import os\n", "class ", "    return ")
#: How the page names a setting (any other preset: ``Preset NAME``).
SETTING_TITLES = {
    "text": "Natural text (bytes)",
    "text-bpe": "Natural text (BPE)",
    "cpu": "Curriculum",
}


@dataclass
class StudyResult:
    out: Path
    index: Path
    summaries: list[RunSummary]
    circuits: list[CircuitSummary] = field(default_factory=list)
    depths: list[DepthMeasurement] = field(default_factory=list)  # attention-only
    mlp_depths: list[DepthMeasurement] = field(default_factory=list)
    probes: list[ProbeMeasurement] = field(default_factory=list)
    neurons: list[NeuronMeasurement] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # the page's Finding, in order
    elapsed_s: float = 0.0


def write_samples(run: Run, n_tokens: int, seed: int) -> list[dict[str, str]]:
    samples = [
        {
            "prompt": p,
            "text": sample(
                run.model,
                run.codec,
                p,
                n_tokens=n_tokens,
                temperature=0.8,
                top_k=40,
                seed=derive(seed, "sample_prompt", i),
            ),
        }
        for i, p in enumerate(SAMPLE_PROMPTS)
    ]
    save_samples(run.path, samples)  # stamped with the run it belongs to
    return samples


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
    return analysis.summary(href=f"{run.name}/{paths.report.name}"), analysis


def reproduce(cfg: StudyConfig) -> StudyResult:
    settings = study_settings(cfg)
    depths = {n for _, layers in settings for n in layers}
    for n in depths:
        check_layers(n)
    for preset, _ in settings:
        if preset not in PRESETS:  # before any work; a study also takes "all"
            raise UserError(
                f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}, or all (both "
                "settings on one page)."
            )
    check_study_seeds(cfg.seed, cfg.seeds)  # --seeds 1 or more, the last a seed
    if cfg.workers < 1 or cfg.threads < 1:
        raise UserError(f"--workers {cfg.workers} / threads {cfg.threads}: use 1 or more.")
    if cfg.mlp and not set(MLP_LAYERS) & depths:
        raise UserError(
            f"--mlp trains MLP twins of the {' and '.join(map(str, MLP_LAYERS))}-layer models: "
            "include one of them in --layers."
        )
    resolve_device(cfg.device)  # an absent device -> UserError before any work
    out = Path(cfg.out)
    check_study_dir(out)
    runs = study_runs(cfg)
    # what each model trains with (a 1-layer control's length is settled later), in every seed
    planned_runs(out, {r.name: depth_preset(cfg, r) for r in runs})
    for extra in seed_configs(cfg):  # made when that seed's study starts
        check_study_dir(extra.out, create=False)
        planned_runs(extra.out, {r.name: depth_preset(extra, r) for r in runs})
    if len(settings) == 1:
        marker: dict[str, Any] = {"preset": settings[0][0], "layers": sorted(settings[0][1])}
    else:
        marker = {"presets": {name: sorted(layers) for name, layers in settings}}
    marker |= {"seed": cfg.seed, "mlp": sorted({r.n_layers for r in runs if r.mlp})}
    if cfg.seeds > 1:
        marker["seeds"] = study_seeds(cfg.seed, cfg.seeds)
    with study_folder(out, marker):
        return _reproduce(cfg, out, runs, marker)


@dataclass
class RunMeasurements:
    """Everything the study page takes from one trained run."""

    summary: RunSummary
    depth: DepthMeasurement
    circuit: CircuitSummary | None
    probe: ProbeMeasurement | None
    neurons: NeuronMeasurement | None
    data_mix: str


def measure_run(run: Run, cfg: StudyConfig, *, mlp: bool) -> RunMeasurements:
    """Samples, analyses (with the route by path) and the run's report, then the circuit, the
    probe (1 and 2 layers) and the neurons (MLP twins)."""
    summary, analysis = analyse_and_report(run, cfg)
    circuit = None
    if analysis.route.n_prompts:  # the induction task could be built for this model
        say(f"[{run.name}] circuit (EAP-IG and EAP) ...")
        task = study_task(run.model, run.codec, seed=cfg.seed)
        circuit = summarise_circuits(run.name, run.model, task, analysis.route, seed=cfg.seed)
    probe = None
    if run.model_cfg.n_layers in PROBE_LAYERS:
        say(f"[{run.name}] probes{' and neurons' if mlp else ''} ...")
        heads = layer0_previous_token_heads(summary)
        probe = measure_probe(run.model, run.codec, run.name, heads, cfg.seed, run.model_cfg)
    neurons = measure_neurons(run, seed=cfg.seed) if mlp else None
    return RunMeasurements(
        summary=summary,
        depth=measure_depth(
            run,
            summary,
            analysis.period_exams,
            analysis.route,
            circuit,
            analysis.role_checks,
            analysis.passage_order,
            probe,
        ),
        circuit=circuit,
        probe=probe,
        neurons=neurons,
        data_mix=data_mix_sentence(run.settings, run.model_cfg.n_ctx),
    )


def _train_and_measure(
    cfg: StudyConfig, out: Path, runs: Sequence[StudyRun]
) -> dict[str, RunMeasurements]:
    """Every run trained, then measured, as jobs on ``cfg.workers`` processes
    (:mod:`~interp_toolkit.study.jobs`): the runs whose length is known now train first (MLP
    twins, then the longest); a 1-layer control, unless --steps fixes it, trains once the deeper
    runs of its setting have, as long as the longest of them (:func:`control_steps`); each run is
    measured once trained, trainings before measurements, the deepest measured first."""
    known = [
        r
        for r in runs
        if r.n_layers > 1 or cfg.steps is not None or not stops_on_induction(r.preset)
    ]
    presets = {r.name: depth_preset(cfg, r) for r in known}
    parent = os.getpid()

    def preset_of(r: StudyRun) -> Preset:
        if r.name not in presets:  # a control: its length is read once its setting's runs trained
            presets[r.name] = depth_preset(cfg, r, control_steps(out, runs, r))
        return presets[r.name]

    def train(r: StudyRun) -> tuple[Any, tuple[Any, ...]]:
        path, preset = out / r.name, preset_of(r)
        if is_finished(path, preset):  # its measurement says it reuses it
            return _nothing, ()
        TRAINED_HERE.add(path.resolve())  # its measurement says it loads the run trained here
        return train_job, (path, preset, cfg.device, parent)

    def measure(r: StudyRun) -> tuple[Any, tuple[Any, ...]]:
        path = out / r.name
        trained_here = path.resolve() in TRAINED_HERE
        return measure_job, (path, preset_of(r), cfg, r.mlp, trained_here, parent)

    jobs = []
    for r in runs:
        if r in known:  # the longest first: MLP twins, then by its most work, tokens x layers
            t, m = presets[r.name].train, presets[r.name].model
            after, rank = (), (0, int(not r.mlp), -t.steps * t.batch_size * m.n_ctx * m.n_layers)
        else:
            after, rank = tuple(f"train {k.name}" for k in known if k.preset == r.preset), (1,)
        jobs.append(Job(f"train {r.name}", lambda r=r: train(r), after, rank))
        jobs.append(
            Job(f"measure {r.name}", lambda r=r: measure(r), (f"train {r.name}",), (2, -r.n_layers))
        )
    done = run_jobs(jobs, cfg.workers, cfg.device)
    return {r.name: done[f"measure {r.name}"] for r in runs}


def _nothing() -> None:
    """The job of a run found finished: nothing to train."""


def measure_job(
    path: Path, preset: Preset, cfg: StudyConfig, mlp: bool, trained_here: bool, parent: int
) -> RunMeasurements:
    """One trained run's measurements as a job: load it (``trained_here``: by this study, which
    is what its line then says), then :func:`measure_run`; in a worker process (not ``parent``)
    on ``cfg.threads`` threads, as its training had."""
    if os.getpid() != parent:
        torch.set_num_threads(cfg.threads)
    if trained_here:
        TRAINED_HERE.add(path.resolve())  # a worker process's own record
    return measure_run(train_or_reuse(path, preset, cfg.device), cfg, mlp=mlp)


@dataclass
class SettingBlock(Jsonable):
    """One setting's part of the study: its page sections and its measurements (its JSON, the
    setting's block of study.json: the runs, depths, MLP depths, probes and neurons)."""

    preset: str = field(metadata=json_field(skip=True))
    sections: list[Section] = field(metadata=json_field(skip=True))
    summaries: list[RunSummary] = field(metadata=json_field(key="runs"))
    circuits: list[CircuitSummary] = field(metadata=json_field(skip=True))
    depths: list[DepthMeasurement]
    mlp_depths: list[DepthMeasurement]
    probes: list[ProbeMeasurement]
    neurons: list[NeuronMeasurement]


def _setting_block(
    cfg: StudyConfig, out: Path, runs: Sequence[StudyRun], by_name: dict[str, RunMeasurements]
) -> SettingBlock:
    """What one setting's runs measured, as detail sections and its study.json part."""
    measured = [by_name[r.name] for r in runs]  # in the runs' order
    summaries = [m.summary for m in measured]
    depths = {r.name: m.depth for r, m in zip(runs, measured, strict=True)}
    circuits = [m.circuit for m in measured if m.circuit is not None]
    probes = [m.probe for m in measured if m.probe]
    neurons = [m.neurons for m in measured if m.neurons]
    attn = one_layer_chance([depths[r.name] for r in runs if not r.mlp])
    twin = {d.n_layers: d for d in attn}
    pairs = [(depths[r.name], twin.get(r.n_layers)) for r in runs if r.mlp]
    curves = {s.name: read_metrics(out / s.name) for s in summaries}
    twins = f"; MLP twins of {', '.join(str(m.n_layers) for m, _ in pairs)}" if pairs else ""
    intro = (
        f"Preset {runs[0].preset}, seed {cfg.seed}, layers "
        f"{', '.join(str(d.n_layers) for d in attn)}{twins}. {measured[-1].data_mix}"
    )
    sections = comparison_sections(summaries, finding=mlp_findings(pairs, []) or None)
    sections[0] = dataclasses.replace(sections[0], title="Runs", intro=intro)
    sections.insert(1, Section("Heads with a role", [heads_table(attn, summaries)]))
    sections.insert(2, depth_section(attn, curves=curves))
    if pairs:
        block = block_phrase(depth_preset(cfg, next(r for r in runs if r.mlp)).model)
        sections.append(mlp_section(pairs, neurons, curves=curves, block=block))
    if probes:
        sections.append(probes_section(probes))
    sections.append(route_section([(d.name, d.route) for d in depths.values()]))
    if circuits:
        sections.append(circuit_section(circuits))
    mlps = [m for m, _ in pairs]
    return SettingBlock(runs[0].preset, sections, summaries, circuits, attn, mlps, probes, neurons)


def _reproduce(
    cfg: StudyConfig, out: Path, runs: Sequence[StudyRun], marker: dict[str, Any]
) -> StudyResult:
    t0 = time.perf_counter()
    by_name = _train_and_measure(cfg, out, runs)  # every run trained and measured once
    presets = list(dict.fromkeys(r.preset for r in runs))
    blocks = [
        _setting_block(cfg, out, [r for r in runs if r.preset == p], by_name) for p in presets
    ]
    measured = [SeedMeasurements(cfg.seed, [d for b in blocks for d in b.depths])]
    for i, extra in enumerate(seed_configs(cfg), start=2):  # each a whole study of its own
        say(f"seed {extra.seed} ({i} of {cfg.seeds}): the whole study in {extra.out}")
        measured.append(SeedMeasurements(extra.seed, reproduce(extra).depths))
    seeds = over_seeds([(b.preset, [d.name for d in b.depths]) for b in blocks], measured)
    for b, over in zip(blocks, seeds, strict=True):
        if cfg.seeds > 1:
            b.sections.insert(1, seeds_section(over))
        if section := stages_section(cfg, b.depths):
            b.sections.append(section)
    elapsed = time.perf_counter() - t0
    machine = dataclasses.replace(machine_record(), threads=cfg.threads)  # each run's threads
    titles = [SETTING_TITLES.get(b.preset, f"Preset {b.preset}") for b in blocks]
    pages = [
        SettingPage(t, tuple(b.depths), o.claims, o.reliable_copier, tuple(b.sections))
        for t, b, o in zip(titles, blocks, seeds, strict=True)
    ]
    html = study_page(
        pages,
        title="Induction heads: the original post's claims, checked",
        lede=lede(study_seeds(cfg.seed, cfg.seeds), machine.words(), elapsed / 60),
    )
    findings = [line for p in pages for line in claim_lines(p.title, p.claims)]
    parts = [
        {"preset": b.preset, "claims": claims_json(o.claims), **b.to_dict()}
        for b, o in zip(blocks, seeds, strict=True)
    ]
    body: dict[str, Any] = {"machine": machine.to_dict()}
    if len(parts) == 1:  # one setting: its keys at the top, as before
        body |= {k: v for k, v in parts[0].items() if k != "preset"}
    else:
        body["settings"] = parts
    if cfg.seeds > 1:
        body["over_seeds"] = [o.to_dict() for o in seeds]
    index = write_text(out / INDEX, html)
    write_text(out / CLAIMS_MD, claims_markdown([(p.title, p.claims) for p in pages]))
    thresholds = dataclasses.asdict(THRESHOLDS)
    done = {"status": "done", "elapsed_s": round(elapsed, 1), "thresholds": thresholds}
    write_json(out / STUDY_MARKER, {**marker, **done, **body})
    kept = ("summaries", "circuits", "depths", "mlp_depths", "probes", "neurons")
    every = {k: [x for b in blocks for x in getattr(b, k)] for k in kept}  # the settings' in turn
    return StudyResult(out, index, findings=findings, elapsed_s=elapsed, **every)


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
    return [
        *result.findings,
        *map(circuit_sentence, result.circuits),
        *map(probe_sentence, result.probes),
        f"report: {result.index} ({result.elapsed_s / 60:.1f} min)",
    ]
