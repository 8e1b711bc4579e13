"""The study page: runs side by side (from their :class:`RunSummary`), the causal check and the
composition scores. Every sentence is built from the summaries' measurements."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go
import torch

from interp_toolkit.analysis.ablation import CausalRow
from interp_toolkit.analysis.heads import SCORE
from interp_toolkit.analysis.run_analysis import RunSummary, TopHead
from interp_toolkit.errors import UserError
from interp_toolkit.views import plots
from interp_toolkit.views.page import Row, Section, cell, render_report, table, text, verdict


def _layers(n: int) -> str:
    return f"{n} layer{'s' if n != 1 else ''}"


def describe_run(summary: RunSummary) -> str:
    """One sentence: 'L layers: passes/fails the exam (k/n); induction head … / no induction head.'"""
    exam = summary.exam
    s = (
        f"{_layers(summary.n_layers)} ({summary.name}): "
        f"{'passes' if exam.passed else 'fails'} the exam ({exam.n_passed}/{exam.n_total})"
    )
    ind = summary.heads["induction"]
    if ind:
        s += f"; induction head {', '.join(ind)}"
        if summary.partner:
            s += f" with previous-token partner {summary.partner}"
    else:
        top = summary.top_induction
        floor = summary.floors[top.kind]
        s += (
            f"; no induction head (best {top.head}: {SCORE[top.kind].title} {top.score:.2f}, "
            f"τ {top.tau:.2g}, p {top.p_value:.2g}; a head needs {summary.test} against its "
            f"own null and ≥ the effect-size floor {floor:.2f})"
        )
    return s + "."


def _side_by_side(runs: Sequence[RunSummary]) -> Section:
    def link(r: RunSummary) -> str:
        return f'<a href="{html.escape(r.href)}">{html.escape(r.name)}</a>'

    def heads(r: RunSummary, role: str) -> str:
        return html.escape(", ".join(r.heads[role]) or "none")

    def best(t: TopHead) -> str:
        return f"{t.head}: {t.score:.3f} (τ {t.tau:.2g}, p {t.p_value:.2g})"

    rows = [
        ["run (report)", *[link(r) for r in runs]],
        ["layers", *[str(r.n_layers) for r in runs]],
        ["final loss", *[cell(r.final_loss) for r in runs]],
        [
            "exam",
            *[f"{verdict(r.exam.passed)} ({r.exam.n_passed}/{r.exam.n_total})" for r in runs],
        ],
        ["induction heads", *[heads(r, "induction") for r in runs]],
        ["previous-token heads", *[heads(r, "previous-token") for r in runs]],
        ["previous-token partner", *[html.escape(r.partner or "—") for r in runs]],
        ["best induction score", *[html.escape(best(r.top_induction)) for r in runs]],
        ["best previous-token score", *[html.escape(best(r.top_previous_token)) for r in runs]],
        ["role needs", *[html.escape(f"{r.test}, ≥ effect-size floor") for r in runs]],
    ]
    return Section(
        "Side by side",
        [table(["", *[r.name for r in runs]], rows, raw=tuple(range(1, len(runs) + 1)))],
    )


def comparison_sections(runs: Sequence[RunSummary], *, finding: str | None = None) -> list[Section]:
    lines = [finding] if finding else [describe_run(r) for r in runs]
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
        caps = [f"{r.name} ({_layers(r.n_layers)})" for r in shown]
        sections.append(Section(f"{SCORE[kind].title.capitalize()}s", [Row(figs, caps)]))

    if any(r.loss_curve for r in runs):
        fig = go.Figure()
        for r in runs:
            fig.add_trace(
                go.Scatter(
                    x=[p[0] for p in r.loss_curve],
                    y=[p[1] for p in r.loss_curve],
                    mode="lines",
                    name=r.name,
                )
            )
        fig.update_layout(
            title="Training loss", height=380, xaxis={"title": "tokens"}, yaxis={"title": "loss"}
        )
        sections.append(Section("Training loss", [fig]))

    exam_rows = [
        [r.name, e.name, e.prompt, e.target, e.rank, e.prob, verdict(e.passed, e.error)]
        for r in runs
        for e in r.exam.results
    ]
    if exam_rows:
        header = ["run", "exam", "prompt", "target", "rank", "p(target)", "result"]
        sections.append(Section("Exam results", [table(header, exam_rows, raw=(6,))]))
    return sections


def causal_section(causal: Sequence[CausalRow]) -> Section:
    return Section(
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
                        c.run,
                        c.induction_head,
                        c.ablated,
                        ", ".join(c.ablated_heads),
                        c.induction_before,
                        c.induction_after,
                    ]
                    for c in causal
                ],
            ),
        ],
    )


def composition_section(rows: Sequence[Sequence[object]]) -> Section:
    """``rows``: run, kind, from, to, score, random baseline."""
    return Section(
        "Composition scores",
        [
            "<p>Largest ‖W_A W_B‖_F / (‖W_A‖_F ‖W_B‖_F) from an earlier head's OV into a later head's "
            "Q, K or V side, next to the mean for random matrices of the same shapes. Induction runs on "
            "K-composition.</p>",
            table(["run", "kind", "from", "to", "score", "random baseline"], rows),
        ],
    )


def render_comparison(
    runs: Sequence[RunSummary],
    *,
    title: str = "Induction heads: study",
    subtitle: str = "",
    finding: str | None = None,
    extra: Sequence[Section] = (),
) -> str:
    """A study index page comparing runs side by side (``href`` links each run's report.html,
    relative to the page). ``finding`` replaces the automatic one-line-per-run description."""
    if not runs:
        raise UserError("nothing to compare: give at least one run summary.")
    return render_report(
        [*comparison_sections(runs, finding=finding), *extra], title=title, subtitle=subtitle
    )
