"""``RUN/report.html``: a run's config, training curves, samples, exams, heads and key attention.

:func:`build_run_report` loads the run and analyses it (:func:`~interp_toolkit.analysis.run_analysis.analyse_run`);
everything else here renders that data.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from interp_toolkit.analysis.heads import ROLE_SCORE, ROLES, SCORES, HeadId
from interp_toolkit.analysis.nulls import without_control
from interp_toolkit.analysis.run_analysis import RunAnalysis, analyse_run
from interp_toolkit.analysis.scores import HeadReport
from interp_toolkit.errors import UserError
from interp_toolkit.io import check_writable_dir, write_text
from interp_toolkit.runs import RunPaths, load_run
from interp_toolkit.views import plots
from interp_toolkit.views.attention import layer_views, layers_html, token_labels
from interp_toolkit.views.page import (
    Item,
    Row,
    Section,
    kv_table,
    render_report,
    table,
    text,
    verdict,
)

#: The scores drawn as heatmaps (every score is in the head table).
HEATMAP_SCORES = ("previous_token", "induction")


def exam_section(analysis: RunAnalysis) -> Section:
    rows, figs, caps = [], [], []
    for e in analysis.exams:
        ex = e.exam
        if e.result is None:
            rows.append([ex.name, ex.prompt, ex.target, None, None, verdict(False, e.error)])
            continue
        rows.append(
            [ex.name, ex.prompt, ex.target, e.result.rank, e.result.prob, verdict(e.passed)]
        )
        figs.append(plots.exam_topk(e.result))
        caps.append(ex.name)
    items: list[Item] = [
        table(["exam", "prompt", "target", "rank (0 = top)", "p(target)", "result"], rows, raw=(5,))
    ]
    if figs:
        items.append(Row(figs, caps))
    return Section(
        "Exam",
        items,
        intro="Does the model continue the repeated pattern? Rank 0 is its top prediction: a pass.",
    )


def head_table(rep: HeadReport) -> str:
    """Every head's every registry score (★ = above τ and floor) and its role."""
    above = {s.name: rep.above(s.name) for s in SCORES}
    rows = []
    for ly, roles in enumerate(rep.roles):
        for h, role in enumerate(roles):
            cells = [
                f"{float(rep.scores.get(s.name)[ly, h]):.3f}"
                + (" ★" if above[s.name][ly, h] else "")
                for s in SCORES
            ]
            cls = "pass" if role != ROLES[-1] else ""
            rows.append(
                [str(HeadId(ly, h)), *cells, f'<span class="{cls}">{html.escape(role)}</span>']
            )
    taus = "; ".join(f"τ({k}) = {v:.3g}" for k, v in rep.taus.items())
    floors = ", ".join(f"{k} {v:.2g}" for k, v in rep.floors.items())
    no_test = without_control(rep.null)
    caveat = (
        f" τ of {', '.join(no_test)}: their stripes need no repeats, so under this null τ is a "
        "quantile over this model's own heads, not a test against chance."
        if no_test
        else ""
    )
    header = ["head", *[s.label for s in SCORES], "role"]
    note = text(
        f"{taus}; floors {floors}. Null model: {rep.null} ({rep.n_null_samples} samples). "
        f"★ = score > τ and ≥ floor. A head's role is the first of {', '.join(ROLES[:-1])} it "
        f"passes.{caveat}",
        "p",
        "note",
    )
    return note + table(header, rows, raw=(len(header) - 1,))


def _describe(analysis: RunAnalysis, head: HeadId, role: str) -> str:
    rep = analysis.head_report
    kind = ROLE_SCORE[role]
    article = "an" if role[0] in "aeiou" else "a"
    has = f"role {role}" if rep.has_role(head, role) else f"not {article} {role} head"
    return (
        f"{head}: strongest {role} score {float(rep.scores.get(kind)[head]):.3f} "
        f"(τ {rep.taus[kind]:.3g}; {has})"
    )


def run_report_sections(analysis: RunAnalysis) -> list[Section]:
    run, rep = analysis.run, analysis.head_report
    sections: list[Section] = []
    cfg_items: list[Item] = [kv_table({"model": run.model_cfg.to_dict()})]
    if run.settings:
        cfg_items.append(kv_table({"recipe": run.settings}))
    sections.append(Section("Config and recipe", cfg_items))

    if analysis.rows:
        sections.append(
            Section(
                "Training",
                [plots.loss_curve(analysis.rows)],
                intro="Loss and, if logged, per-head scores over training (the phase change).",
            )
        )
    else:
        sections.append(Section("Training", [text("No metrics.jsonl in this run folder.")]))

    if analysis.samples:
        rows = [
            [s["prompt"], f'<pre class="sample">{html.escape(s["text"])}</pre>']
            for s in analysis.samples
        ]
        sections.append(Section("Samples", [table(["prompt", "text"], rows, raw=(1,))]))

    sections.append(exam_section(analysis))

    heat = Row(
        [
            plots.head_score_heatmap(
                rep.scores.get(k), kind=k, tau=rep.taus[k], floor=rep.floors[k]
            )
            for k in HEATMAP_SCORES
        ]
    )
    sections.append(
        Section(
            "Heads",
            [heat, head_table(rep)],
            intro="Per-head scores on repeated random tokens; τ is the null threshold.",
        )
    )

    labels = token_labels(run.codec, analysis.repeated)
    key_items: list[Item] = []
    if analysis.impact is not None:
        key_items.append(
            plots.head_impact_curves(
                analysis.impact,
                labels=labels[:-1],
                title="Drop in log-prob of the next token when one head is mean-ablated "
                f"(repeated random tokens, period {analysis.period})",
            )
        )
    ind, prev = analysis.induction_head, analysis.prev_token_head
    role = "induction head" if rep.has_role(ind, "induction") else "top induction score, below τ"
    key_items.append(
        plots.attention_heatmap(
            analysis.patterns[ind.layer][ind.head],
            labels,
            period=analysis.period,
            stripe_from=analysis.period + 1,
            title=f"{ind} ({role}) on a repeated sequence",
        )
    )
    sections.append(Section("Impact and the induction stripe", key_items))

    plan: dict[int, list[int]] = {}
    for layer, head in sorted({prev, ind}):
        plan.setdefault(layer, []).append(head)
    views = layer_views(analysis.patterns, plan, labels)
    sections.append(
        Section(
            "Attention of the key heads",
            [layers_html(views)],
            intro=f"{_describe(analysis, prev, 'previous-token')}. "
            f"{_describe(analysis, ind, 'induction')}. On a repeated random sequence "
            f"(period {analysis.period}): hover a head, click a token to see where it attends.",
        )
    )
    return sections


def run_report_html(analysis: RunAnalysis) -> str:
    cfg = analysis.run.model_cfg
    return render_report(
        run_report_sections(analysis),
        title=f"Run report: {analysis.name}",
        subtitle=f"{cfg.n_layers} layer(s) x {cfg.n_heads} heads, d_model {cfg.d_model}, n_ctx {cfg.n_ctx}, "
        f"vocabulary {cfg.d_vocab}",
    )


def report_path(run_path: str | Path, out: str | Path | None) -> Path:
    """Where the report goes, checked writable (UserError otherwise) before any work is done."""
    default = RunPaths(Path(run_path)).report
    path = Path(out) if out is not None else default
    if path.is_dir():
        raise UserError(
            f"output {path} is a folder: give a file name such as {path / default.name}."
        )
    check_writable_dir(path.parent, "report folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"output {path} is not writable: choose another file with --out.")
    return path


def build_run_report(
    run_path: str | Path,
    out: str | Path | None = None,
    *,
    samples: list[dict[str, str]] | None = None,
    head_report: HeadReport | None = None,
    device: str = "auto",
) -> Path:
    """Load the run, analyse it and write RUN/report.html (or ``out``) atomically."""
    run = load_run(run_path, device=device)
    path = report_path(run_path, out)
    analysis = analyse_run(run, samples=samples, head_report=head_report)
    return write_text(path, run_report_html(analysis))
