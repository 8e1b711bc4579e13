"""``RUN/report.html``: a run's config, training curves, samples, exams, heads and key attention.

:func:`build_run_report` loads the run and analyses it (:func:`~interp_toolkit.analysis.run_analysis.analyse_run`);
everything else here renders that data.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from interp_toolkit.analysis.heads import NO_ROLE, ROLES, SCORE, SCORES, HeadId
from interp_toolkit.analysis.routes import THRESHOLDS
from interp_toolkit.analysis.run_analysis import RunAnalysis, analyse_run
from interp_toolkit.analysis.scores import HeadReport
from interp_toolkit.errors import UserError
from interp_toolkit.io import check_writable_dir, write_text
from interp_toolkit.reports.circuit_report import route_section
from interp_toolkit.reports.findings import data_mix_sentence, exam_phrase
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

#: The roles whose deciding scores are drawn as heatmaps (every score is in the head table).
HEATMAP_ROLES = ("previous-token", "induction")


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


def period_exam_section(analysis: RunAnalysis) -> Section:
    """Two-repeat exams at every period: a table and a plot, and the verdict in words."""
    exams = analysis.period_exams
    if not exams:
        return Section("Exam at every period", [text(f"Not run: {analysis.period_exam_error}")])
    rows = [
        [e.period, e.n_prompts, f"{e.pass_rate:.1%}", e.median_rank, f"{e.chance:.1%}"]
        for e in exams
    ]
    return Section(
        "Exam at every period",
        [
            text(f"The model {exam_phrase(exams)}.", "p", "finding"),
            plots.period_exam_plot({analysis.name: exams}, pass_rate=THRESHOLDS.exam_pass),
            table(["period", "prompts", "pass rate", "median rank", "chance"], rows),
        ],
        intro="Prompts [BOS] s s[:-1] of distinct random letters s; the target is the last letter "
        "of s (never the alphabet's next letter). A prompt passes when the target's logit is above "
        "every other (ties fail).",
    )


def head_table(rep: HeadReport) -> str:
    """Every head's every registry score with its own τ and p-value (★ = significant and ≥ the
    effect-size floor), and its role."""
    t = rep.tests
    rows = []
    for ly, roles in enumerate(rep.roles):
        for h, role in enumerate(roles):
            cells = [
                f"{float(rep.scores.get(s.name)[ly, h]):.3f}"
                + (" ★" if rep.passes(s.name)[ly, h] else "")
                + f'<br><span class="note">τ {float(t.tau[s.name][ly, h]):.3g} · '
                f"p {float(t.p_value[s.name][ly, h]):.3g}</span>"
                for s in SCORES
            ]
            cls = "pass" if role != ROLES[-1] else ""
            rows.append(
                [str(HeadId(ly, h)), *cells, f'<span class="{cls}">{html.escape(role)}</span>']
            )
    nulls = "; ".join(
        f"{name}: {', '.join(k for k in SCORE if t.null[k] == name)}"
        for name in dict.fromkeys(t.null.values())
    )
    floors = ", ".join(f"{k} {v:.2g}" for k, v in rep.floors.items())
    expected = rep.test["expected_false_positives"]["per_score"]
    smallest = min(rep.test["smallest_p"].values())
    header = ["head", *[s.label for s in SCORES], "role"]
    note = text(
        f"Each (head, score) is tested against its own null ({nulls}); τ is that null's "
        f"{t.quantile:g} quantile and p = (1 + #null ≥ score) / (1 + N) (smallest possible "
        f"{smallest:.3g}). ★ = significant ({rep.significance()}) and ≥ the effect-size floor "
        f"({floors}; a size, not a test). By chance {expected:.2g} of the "
        f"{rep.scores.n_layers * rep.scores.n_heads} heads would reach {rep.significance()} per "
        f"score. Rule: {rep.rule()}.",
        "p",
        "note",
    )
    return note + table(header, rows, raw=tuple(range(1, len(header))))


def _role_of(rep: HeadReport, head: HeadId) -> str:
    role = rep.roles[head.layer][head.head]
    return "no role" if role == NO_ROLE else role


def _key_heads_intro(analysis: RunAnalysis) -> str:
    """Why each key head is drawn, from the measurements."""
    rep, ind = analysis.head_report, analysis.induction_head
    kind = rep.decides["induction"]
    with_role = [h for h in analysis.key_heads() if rep.roles[h.layer][h.head] != NO_ROLE]
    parts = [
        "Heads with a role: "
        + (", ".join(f"{h} ({_role_of(rep, h)})" for h in with_role) if with_role else "none")
        + ".",
        f"Highest {SCORE[kind].title}: {ind} ({float(rep.scores.get(kind)[ind]):.3f}, "
        f"τ {float(rep.tests.tau[kind][ind]):.3g}, p {float(rep.tests.p_value[kind][ind]):.3g}; "
        f"{_role_of(rep, ind)}).",
    ]
    for h in analysis.route.heads:
        if h.feeder is not None:
            main = max(h.carrying, key=lambda c: h.inputs[c].value)
            p = h.path(h.feeder, main)
            parts.append(
                f"{h.feeder} ({_role_of(rep, h.feeder)}) feeds {h.head}'s {main} input: "
                f"resampling that path alone removes {p.removed} of the induction gap."
            )
    return " ".join(parts)


def run_report_sections(analysis: RunAnalysis) -> list[Section]:
    run, rep = analysis.run, analysis.head_report
    sections: list[Section] = []
    cfg_items: list[Item] = [kv_table({"model": run.model_cfg.to_dict()})]
    if run.settings:
        cfg_items.insert(0, text(data_mix_sentence(run.settings, run.model_cfg.n_ctx), "p"))
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
    sections.append(period_exam_section(analysis))

    heat = Row(
        [
            plots.head_score_heatmap(
                rep.scores.get(k),
                kind=k,
                passes=rep.passes(k),
                floor=rep.floors[k],
                tau=rep.tests.tau[k],
                p_value=rep.tests.p_value[k],
                test=rep.significance(),
            )
            for k in (rep.decides[role] for role in HEATMAP_ROLES)
        ]
    )
    sections.append(
        Section(
            "Heads",
            [heat, head_table(rep)],
            intro="Per-head scores on repeated random tokens, each tested against its own null "
            "model (hover a heatmap cell for its τ and p-value).",
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
    ind = analysis.induction_head
    role = (
        "induction head"
        if rep.has_role(ind, "induction")
        else "top induction score, no induction role"
    )
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
    sections.append(route_section([(analysis.name, analysis.route)]))

    key = analysis.key_heads()
    plan: dict[int, list[int]] = {}
    for layer, head in key:
        plan.setdefault(layer, []).append(head)
    names = {h: f"{h} {_role_of(rep, h)}" for h in key}
    views = layer_views(analysis.patterns, plan, labels, head_labels=names)
    sections.append(
        Section(
            "Attention of the key heads",
            [layers_html(views)],
            intro=f"{_key_heads_intro(analysis)} On a repeated random sequence "
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
