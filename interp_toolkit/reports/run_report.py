"""``RUN/report.html``: a run's config, training curves, samples, exams, heads and key attention.

:func:`build_run_report` loads the run and analyses it (:func:`~interp_toolkit.measures.run.analyse_run`);
everything else here renders that data.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from interp_toolkit.development.curve import Stages
from interp_toolkit.exams.prompts import MIN_OFFSETS
from interp_toolkit.exams.role_checks import RoleChecks
from interp_toolkit.exams.verdict import chance_rule, pass_rule, passes_rule
from interp_toolkit.files.io import check_output, write_text
from interp_toolkit.heads.discovery import HeadReport
from interp_toolkit.heads.patterns import heads_by_layer
from interp_toolkit.heads.registry import NO_ROLE, ROLES, SCORE, SCORES, HeadId
from interp_toolkit.measures.run import RunAnalysis, analyse_run
from interp_toolkit.models.architecture import architecture_of
from interp_toolkit.reports.circuit_report import route_section
from interp_toolkit.reports.findings import (
    KIND_WORDS,
    data_mix_sentence,
    exam_phrase,
    interval_pct,
    role_check_phrase,
)
from interp_toolkit.reports.terminal import PERIOD_COLUMNS, chance_cell
from interp_toolkit.reports.text_findings import text_sentences
from interp_toolkit.runs.folder import Run, RunPaths, load_run, read_stages
from interp_toolkit.runs.target import Target
from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.text.labels import token_labels
from interp_toolkit.views import plots
from interp_toolkit.views.attention import layer_views, layers_html
from interp_toolkit.views.induction_plots import period_exam_plot, text_curves
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
from interp_toolkit.views.stages import stages_section

#: The roles whose deciding scores are drawn as heatmaps (every score is in the head table).
HEATMAP_ROLES = ("previous-token", "induction")


def exam_section(analysis: RunAnalysis) -> Section:
    ran = [(e.exam, e.result) for e in analysis.exams if e.result is not None]
    rows = [
        [e.exam.name, e.exam.prompt, e.exam.target]
        + ([None, None] if e.result is None else [e.result.rank, e.result.prob])
        + [verdict(e.passed, e.error)]
        for e in analysis.exams
    ]
    items: list[Item] = [
        table(["exam", "prompt", "target", "rank (0 = top)", "p(target)", "result"], rows, raw=(5,))
    ]
    if ran:
        items.append(Row([plots.exam_topk(r) for _, r in ran], [ex.name for ex, _ in ran]))
    return Section(
        "Exam",
        items,
        intro="Does the model continue the repeated pattern? Rank 0 is its top prediction: a pass.",
    )


def period_exam_section(analysis: RunAnalysis) -> Section:
    """Two-repeat exams at every period and token kind: the verdict in words, a plot with Wilson
    intervals and a table with the measured chance levels."""
    exams = analysis.period_exams
    if not exams:
        return Section("Exam at every period", [text(f"Not run: {analysis.period_exam_error}")])
    t = THRESHOLDS
    refs = list(dict.fromkeys(c.model for e in exams for c in e.chance))
    rows = [
        [
            e.period,
            KIND_WORDS.get(e.kind, e.kind),
            f"{e.offsets[0]}..{e.offsets[1]} of {e.positions}",
            e.n_prompts,
            f"{e.pass_rate:.1%} [{e.interval.low:.1%}, {e.interval.high:.1%}]",
            verdict(passes_rule(e, t)),
            e.median_rank,
            *[chance_cell(e, r, "p ") for r in refs],
        ]
        for e in exams
    ]
    return Section(
        "Exam at every period",
        [
            text(f"The model {exam_phrase(exams, t)}.", "p", "finding"),
            period_exam_plot({analysis.name: exams}, lower_bound=t.exam_lower_bound),
            table(
                [*PERIOD_COLUMNS, "median rank", *[f"chance: {r}" for r in refs]], rows, raw=(5,)
            ),
        ],
        intro="Prompts [BOS] prefix s s[:-1]: s is distinct tokens (single letters, never "
        "followed by the alphabet's next letter, or random tokens of the vocabulary), after a "
        "random prefix of random tokens (the offsets column: the smallest and largest drawn, of how "
        f"many start positions; every default period has at least {MIN_OFFSETS}, so no "
        "fixed-position shortcut passes). The target is the last token of s. "
        "A prompt passes when the target's logit is above every other (ties fail); "
        f"{pass_rule(t)}; {chance_rule(len(exams), t)}.",
    )


def text_section(analysis: RunAnalysis) -> Section:
    """Induction on held-out text over training (metrics.jsonl), when the run logged it."""
    rows = [r for r in analysis.rows if "icl_score" in r]
    if not rows:
        return Section(
            "Induction on text",
            [text("This run's metrics.jsonl has no text measures (logged since this version).")],
        )
    return Section(
        "Induction on text",
        [text(s, "p", "finding") for s in text_sentences(rows)] + [text_curves(rows)],
        intro="Measured on the first held-out text windows every scoring: Olsson et al.'s "
        "in-context-learning score (late minus early token loss; negative: the context helps), "
        "the loss drop when a held-out passage repeats (a 1-layer model also copies in context: "
        "compare with the 1-layer run), and the best induction score on natural text (attention "
        "from a token to the position after its previous occurrence).",
    )


def head_table(rep: HeadReport) -> str:
    """Every head's every registry score with its specificity test's p-value and deciding
    comparison (★ = significant and ≥ the effect-size floor), and its role and what decided it."""
    t, rows = rep.tests, []
    for e in rep.head_entries():
        cells = [
            f'{e.scores[k]:.3f}{" ★" if e.passes[k] else ""}<br><span class="note">p '
            f"{e.p_value[k]:.2g} · {html.escape(e.decided_by[k])}</span>"
            for k in SCORE
        ]
        why, cls = e.role_reason, "pass" if e.role != ROLES[-1] else ""
        shown = e.role if why is None else f"{e.role} ({why.score}, p {why.p_value:.2g})"
        rows.append([str(e.head), *cells, f'<span class="{cls}">{html.escape(shown)}</span>'])
    floors = ", ".join(f"{k} {v:.2g}" for k, v in rep.floors.items())
    expected = rep.test.expected_false_positives.per_score
    header = ["head", *[s.label for s in SCORES], "role"]
    warnings = "".join(f" Warning: {w}." for w in rep.test.warnings)
    note = text(
        f"Each (head, score) is tested for specificity against the head itself: its attention at "
        f"the score's key must beat its attention at each nearby key (same queries), and a "
        f"repeat score its own score on a no-repeat control (one-sided sign-flip tests over rows; "
        f"p is the largest, shown with the comparison that gave it; smallest attainable "
        f"{t.smallest_p:.2g}). ★ = significant ({rep.significance()}) and ≥ the effect-size floor "
        f"({floors}; a size, not a test). By chance {expected:.2g} of the "
        f"{rep.scores.n_layers * rep.scores.n_heads} heads would reach {rep.significance()} per "
        f"score. Rule: {rep.rule()}.{warnings}",
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
    facts = run.model_cfg.to_dict() if run.model_cfg else architecture_of(run.model).to_dict()
    cfg_items: list[Item] = [kv_table({"model": facts})]
    if run.settings:
        cfg_items.insert(0, text(data_mix_sentence(run.settings, run.model_cfg.n_ctx), "p"))
        cfg_items.append(kv_table({"recipe": run.settings}))
    sections.append(Section("Config and recipe", cfg_items))

    if analysis.rows:
        intro = "Loss and, if logged, per-head scores over training (the phase change)."
        sections.append(Section("Training", [plots.loss_curve(analysis.rows)], intro=intro))
    else:
        sections.append(Section("Training", [text("No metrics.jsonl in this run folder.")]))

    if analysis.samples:
        rows = [
            [s["prompt"], f'<pre class="sample">{html.escape(s["text"])}</pre>']
            for s in analysis.samples
        ]
        sections.append(Section("Samples", [table(["prompt", "text"], rows, raw=(1,))]))

    sections += [exam_section(analysis), period_exam_section(analysis), text_section(analysis)]

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
            intro="Per-head scores on repeated random tokens, each tested for specificity "
            "against the head itself (hover a heatmap cell for its τ and p-value).",
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
    sections += [
        Section("Impact and the induction stripe", key_items),
        route_section([(analysis.name, analysis.route)]),
        role_check_section(analysis.role_checks),
    ]
    if run.paths.stages.exists() or run.paths.stages.is_symlink():  # `stages RUN` was run
        title = "Stages from the local learning coefficient (`stages RUN`)"
        sections.append(
            stages_section(Stages.from_dict(read_stages(run.path)), analysis.rows, title)
        )

    key = analysis.key_heads()
    plan = heads_by_layer(rep.scores.n_layers, rep.scores.n_heads, None, key)
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


def role_check_section(rc: RoleChecks | None) -> Section:
    """The causal check of each induction and previous-token role, one row per head."""
    title = "Causal check of each role"
    if rc is None:
        return Section(title, [text("Not measured: the run's corpus has no held-out window.")])
    if not rc.checks:
        return Section(title, [text("No head has the induction or the previous-token role.")])
    rows = [
        [
            str(c.head),
            c.role,
            "—" if c.removed is None else interval_pct(c.removed),
            c.of or "—",
            verdict(bool(c.passed), c.why if c.passed is None else ""),
        ]
        for c in rc.checks
    ]
    phrase = role_check_phrase(rc)
    intro = (
        f"An induction head is mean-ablated on {rc.n_passages} held-out passages of "
        f"{rc.length} tokens repeated once (their drop: {rc.drop} nats); a previous-token head's "
        "write into a later induction head's input is resampled (the route by path). "
        f"{phrase[0].upper()}{phrase[1:]}."
    )
    header = ["head", "role", "share removed [95% interval]", "of", "check"]
    return Section(title, [table(header, rows, raw=(4,))], intro=intro)


def _shape(cfg: Any) -> str:
    return (
        f"{cfg.n_layers} layer(s) x {cfg.n_heads} heads, d_model {cfg.d_model}, n_ctx "
        f"{cfg.n_ctx}, vocabulary {cfg.d_vocab}"
    )


def run_report_html(analysis: RunAnalysis) -> str:
    return render_report(
        run_report_sections(analysis),
        title=f"Run report: {analysis.name}",
        subtitle=_shape(analysis.run.model.cfg),
    )


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
    default = RunPaths(Path(run_path)).report
    path = Path(out) if out is not None else default
    check_output(path, "output", default.name)  # writable (UserError otherwise) before any work
    analysis = analyse_run(run, samples=samples, head_report=head_report)
    return write_text(path, run_report_html(analysis))


def build_target_report(target: Target, out: str | Path) -> Path:
    """The same report for a model that is not a run folder (a Hugging Face model): no training
    curves or samples; the role checks on held-out stdlib text, as GPT-2's probes read."""
    path = Path(out)
    check_output(path, "output", "report.html")
    folder = target.source if isinstance(target.source, Path) else Path(target.name)
    run = Run(path=folder, model=target.model, codec=target.codec, model_cfg=None)
    analysis = analyse_run(run, samples=[])
    arch = architecture_of(target.model)
    notes = [*arch.notes("heads", period=analysis.head_report.batch.period)]
    notes += [n for n in arch.notes("circuit") + arch.notes("copying") if n not in notes]
    return write_text(
        path,
        render_report(
            [
                Section("What this architecture changes", [text(f"{n}.", "p") for n in notes])
                if notes
                else Section("Architecture", [text("Nothing a score here reads differently.")]),
                *run_report_sections(analysis),
            ],
            title=f"Model report: {analysis.name}",
            subtitle=f"{arch.name}: {_shape(target.model.cfg)}",
        ),
    )
