"""The study page: runs side by side (from their :class:`RunSummary`) and the depths compared.
The route by path and the circuits are :mod:`.circuit_report`'s sections. Every sentence is built
from the summaries' measurements."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.registry import MEASURES
from interp_toolkit.measures.run import RunSummary, TopHead
from interp_toolkit.reports.findings import layers_phrase
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.views import plots
from interp_toolkit.views.induction_plots import period_exam_plot
from interp_toolkit.views.page import Row, Section, cell, render_report, table, text, verdict


def describe_run(summary: RunSummary) -> str:
    """One sentence: 'L layers: passes/fails the single-prompt exams (k/n); induction head … / no
    induction head.' (The period exams are :func:`depth_section`'s and the findings'.)"""
    exam = summary.prompt_exams
    s = (
        f"{layers_phrase(summary.n_layers)} ({summary.name}): "
        f"{'passes' if exam.passed else 'fails'} the single-prompt exams "
        f"({exam.n_passed}/{exam.n_total})"
    )
    ind = summary.heads["induction"]
    if ind:
        s += f"; induction head {', '.join(ind)}"
        if summary.feeder:
            s += f" fed by {summary.feeder} (route by path)"
    else:
        top = summary.top_induction
        s += (
            f"; no induction head (best head {top.head} scores {top.score:.2f} on "
            f"{SCORE[top.kind].title}, τ {top.tau:.2g}, p {top.p_value:.2g}; a head needs "
            f"{summary.test} in its specificity test and ≥ the effect-size floor "
            f"{summary.floors[top.kind]:.2f})"
        )
    return s + "."


#: The single-prompt exams' name on the page (table rows, sentences; study.json's
#: ``runs[].prompt_exams``; the period exams are ``depths[].period_exams``).
PROMPT_EXAMS = "single-prompt exams"


def prompt_verdict(r: RunSummary) -> str:
    """The single-prompt exams' cell: pass/fail (k/n passed), never a period exam's verdict."""
    e = r.prompt_exams
    return f"{verdict(e.passed)} ({e.n_passed}/{e.n_total} passed)"


def _side_by_side(runs: Sequence[RunSummary]) -> Section:
    def link(r: RunSummary) -> str:
        return f'<a href="{html.escape(r.href)}">{html.escape(r.name)}</a>'

    def heads(r: RunSummary, role: str) -> str:
        return html.escape(", ".join(r.heads[role]) or "none")

    def best(t: TopHead) -> str:
        return f"{t.head} scores {t.score:.3f} (τ {t.tau:.2g}, p {t.p_value:.2g})"

    rows = [
        ["run (report)", *[link(r) for r in runs]],
        ["layers", *[str(r.n_layers) for r in runs]],
        ["final loss", *[cell(r.final_loss) for r in runs]],
        [PROMPT_EXAMS, *[prompt_verdict(r) for r in runs]],
        ["induction heads", *[heads(r, "induction") for r in runs]],
        ["previous-token heads", *[heads(r, "previous-token") for r in runs]],
        ["route by path", *[html.escape(r.route.name.value) for r in runs]],
        ["feeds the strongest induction head", *[html.escape(r.feeder or "—") for r in runs]],
        ["best induction score", *[html.escape(best(r.top_induction)) for r in runs]],
        ["best previous-token score", *[html.escape(best(r.top_previous_token)) for r in runs]],
        ["role needs", *[html.escape(f"{r.test}, ≥ effect-size floor") for r in runs]],
    ]
    return Section(
        "Side by side",
        [table(["", *[r.name for r in runs]], rows, raw=tuple(range(1, len(runs) + 1)))],
    )


def comparison_sections(
    runs: Sequence[RunSummary], *, finding: Sequence[str] | None = None
) -> list[Section]:
    lines = list(finding) if finding else [describe_run(r) for r in runs]
    sections = [Section("Finding", ["".join(text(x, "p", "finding") for x in lines)])]
    sections.append(_side_by_side(runs))

    for kind in dict.fromkeys(k for r in runs for k in r.scores):
        shown = [r for r in runs if kind in r.scores]
        figs = [
            plots.head_score_heatmap(
                plots.score_matrix(r.scores[kind]),
                kind=kind,
                passes=torch.tensor(r.passes[kind]),
                floor=r.floors[kind],
                tau=plots.score_matrix(r.tau[kind]),
                p_value=plots.score_matrix(r.p_value[kind]),
                test=r.test,
                title=r.name,
            )
            for r in shown
        ]
        caps = [f"{r.name} ({layers_phrase(r.n_layers)})" for r in shown]
        sections.append(Section(f"{SCORE[kind].title.capitalize()}s", [Row(figs, caps)]))

    if any(r.loss_curve for r in runs):
        fig = go.Figure()
        for r in runs:
            x, y = [p[0] for p in r.loss_curve], [p[1] for p in r.loss_curve]
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=r.name))
        fig.update_layout(
            title="Training loss", height=380, xaxis={"title": "tokens"}, yaxis={"title": "loss"}
        )
        sections.append(Section("Training loss", [fig]))

    exam_rows = [
        [r.name, e.name, e.prompt, e.target, e.rank, e.prob, verdict(e.passed, e.error)]
        for r in runs
        for e in r.prompt_exams.results
    ]
    if exam_rows:
        header = ["run", "single-prompt exam", "prompt", "target", "rank", "p(target)", "result"]
        sections.append(Section("Single-prompt exam results", [table(header, exam_rows, raw=(6,))]))
    return sections


def depth_section(
    depths: Sequence[DepthMeasurement],
    *,
    curves: Mapping[str, Sequence[dict[str, Any]]],
    t: Thresholds = THRESHOLDS,
) -> Section:
    """The depths side by side: a table of what each measured, the period exams of all on one
    plot, and each depth's loss and score curves (``curves``: run name -> metrics.jsonl rows)."""

    rows: list[list[object]] = [
        ["layers", *[d.n_layers for d in depths]],
        [
            "induction heads per layer",
            *[" ".join(f"L{i}:{c}" for i, c in enumerate(d.heads_per_layer())) for d in depths],
        ],
        ["induction heads", *[list(d.induction_heads) for d in depths]],
        *([m.label, *[m.show(m.read(d)) for d in depths]] for m in MEASURES if m.study_table),
        *text_rows(depths, curves),
    ]
    rate = {
        (d.name, e.key): f"{e.pass_rate:.0%} [{e.interval.low:.0%}, {e.interval.high:.0%}]"
        for d in depths
        for e in d.period_exams
    }
    by_period = [
        [e.period, e.kind, *[rate.get((d.name, e.key), "-") for d in depths]]
        for e in depths[0].period_exams
    ]
    names = [d.name for d in depths]
    figs = [
        plots.loss_curve(curves[d.name], x="step", title=f"{d.name}: loss and head scores")
        for d in depths
        if curves.get(d.name)
    ]
    return Section(
        "Depths side by side",
        [
            table(["", *names], rows),
            period_exam_plot(
                {d.name: d.period_exams for d in depths},
                lower_bound=t.exam_lower_bound,
                title="Period exams: pass rate by period (Wilson 95% intervals)",
            ),
            table(["period", "tokens", *names], by_period),
            *figs,
        ],
        intro="Each depth trained on the same data stream and seed. Time to induction: the first "
        f"scoring (every few dozen steps) where a layer≥1 head's induction score passes "
        f"{t.induction:g} (any head for 1 layer). The route: which input of each induction head "
        "carries its induction, by path patching (below).",
    )


def text_rows(
    depths: Sequence[DepthMeasurement], curves: Mapping[str, Sequence[dict[str, Any]]]
) -> list[list[Any]]:
    """The text measures each depth logged last (metrics.jsonl; '-' for runs logged before
    them), so the 2+-layer models read against the 1-layer model's."""

    def last(d: DepthMeasurement, key: str, ci: str) -> str:
        r = next((r for r in reversed(curves.get(d.name) or ()) if key in r), None)
        return "-" if r is None else f"{r[key]:+.3f} [{r[ci][0]:+.3f}, {r[ci][1]:+.3f}]"

    return [
        ["in-context score on text, nats (late − early loss)"]
        + [last(d, "icl_score", "icl_ci") for d in depths],
        ["repeated-passage drop on text, nats"]
        + [last(d, "passage_drop", "passage_ci") for d in depths],
    ]


def render_comparison(
    runs: Sequence[RunSummary],
    *,
    title: str = "Induction heads: study",
    subtitle: str = "",
    finding: Sequence[str] | None = None,
    extra: Sequence[Section] = (),
) -> str:
    """A study index page comparing runs side by side (``href`` links each run's report.html,
    relative to the page). ``finding`` (sentences) replaces the automatic one-line-per-run
    description."""
    if not runs:
        raise UserError("nothing to compare: give at least one run summary.")
    return render_report(
        [*comparison_sections(runs, finding=finding), *extra], title=title, subtitle=subtitle
    )
