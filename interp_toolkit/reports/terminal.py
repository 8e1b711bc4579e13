"""What the terminal shows of a result: the command line's tables, lines and CSVs, rendered from
the typed result (the analysis's dataclass), never printed here.

A renderer returns a list of rich renderables (a ``Table``, a ``str`` with rich markup, or a
``Text`` shown as it is); the CLI prints each, a line unwrapped (``soft_wrap``), in order. The
heads, the exams and a head's copying read their dataclasses (:class:`~.heads.discovery.
HeadReport`, :class:`~.exams.single.ExamResult`, :class:`~.weights.circuits.HeadCircuit`); a
circuit, a probe, neurons, an SAE and stages are :mod:`.terminal_units`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table

from interp_toolkit.heads.registry import SCORE_KINDS, SCORES

if TYPE_CHECKING:  # torch, which these modules import, is not needed to draw a table
    from interp_toolkit.exams.periods import PeriodExam
    from interp_toolkit.exams.single import ExamResult
    from interp_toolkit.exams.verdict import ExamVerdict
    from interp_toolkit.heads.discovery import HeadReport
    from interp_toolkit.weights.circuits import HeadCircuit

#: What a renderer returns: rich Tables, markup strings and Texts, printed in order.
Shown = list[Any]
#: The period exams' first columns (``exam --periods``'s table and the run report's).
PERIOD_COLUMNS = ("period", "tokens", "offsets", "prompts", "pass rate [Wilson 95%]", "passes")


def fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def heads_csv(report: HeadReport) -> str:
    """The ``heads`` table as CSV: one row per head; per score its value, ``tau_``, ``p_value_``,
    ``decided_by_``, ``significant_`` and ``passes_`` (the JSON's per-head fields, flattened)."""
    fields = ("tau", "p_value", "decided_by", "significant", "passes")
    rows = []
    for h in report.head_entries():
        row: dict[str, Any] = {"head": h.head, "layer": h.layer, "index": h.index, "role": h.role}
        for k in SCORE_KINDS:
            row[k] = h.scores[k]
            row.update({f"{f}_{k}": getattr(h, f)[k] for f in fields})
        rows.append(row)
    return csv_text(rows)


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as CSV, the first row's keys the header."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def heads_view(target: str, report: HeadReport, notes: Sequence[str], wide: bool = False) -> Shown:
    """One line per head: its role and every score, bold where it passes (significant and past
    its floor); the roles' deciding tests below. Fits the terminal's width (rich shrinks and
    folds the columns); ``wide`` adds every p-value and deciding comparison (``--json`` holds
    everything)."""
    probe, floors = report.batch, report.floors
    shown: Shown = []
    if wide:
        table = Table(
            title=f"{target}: period {probe.period}, {probe.n_seqs} seqs; each score's specificity "
            "test (p, and the comparison that decided it, below the score)"
        )
        table.add_column("head")
        for s in SCORES:
            table.add_column(f"{s.label}\n(floor {floors[s.name]:g})", justify="right")
        table.add_column("role")
    else:
        shown.append(
            f"{target}: period {probe.period}, {probe.n_seqs} seqs; bold = the score "
            "passes its specificity test and reaches its floor (in brackets)"
        )
        table = Table(pad_edge=False, collapse_padding=True)
        table.add_column("head", no_wrap=True)
        table.add_column("role", overflow="fold")
        for s in SCORES:
            table.add_column(f"{s.label} ({floors[s.name]:g})", justify="right", overflow="fold")
    reasons: list[str] = []  # the roles' deciding tests, under the narrow table
    for e in report.head_entries():
        cells = []
        for k in SCORE_KINDS:
            text = f"{e.scores[k]:.3f}" + (
                f"\np {e.p_value[k]:.2g} {e.decided_by[k]}" if wide else ""
            )
            cells.append(f"[bold]{text}[/bold]" if e.passes[k] else text)
        style, why = "green" if e.role != "none" else None, e.role_reason
        if wide:
            shown_role = e.role if why is None else f"{e.role}\n({why.score}, p {why.p_value:.2g})"
            table.add_row(str(e.head), *cells, shown_role, style=style)
            continue
        table.add_row(str(e.head), e.role, *cells, style=style)
        if why is not None:
            reasons.append(f"{e.head} {e.role}: {why.score} p {why.p_value:.2g} ({why.decided_by})")
    # what the test was and how to read it, its warnings and the architecture's notes
    significance = "BH at FDR" if report.fdr else "p <="
    n_heads = report.scores.n_layers * report.scores.n_heads
    expected = report.test.expected_false_positives.per_score
    second = report.test.untrained
    also = (
        f" Second test (decides nothing): vs {second.n_models} untrained models x "
        f"{second.rows} rows, in the JSON."
        if second
        else ""
    )
    tests = report.tests
    return [
        *shown,
        table,
        *reasons,
        f"bold = significant ({significance} {report.alpha:g}) and >= the score's effect-size "
        f"floor. By chance {expected:.2g} of {n_heads} heads reach p <= {report.alpha:g} per "
        f"score; the smallest attainable p is {tests.smallest_p:.2g} ({tests.n_draws} "
        f"sign-flip draws, {tests.n_tests} tests). Rule: {report.rule()}.{also}",
        *(f"[bold red]warning:[/] {warning}." for warning in report.test.warnings),
        *(f"note: {note}." for note in notes),
    ]


def exams_view(target: str, results: Sequence[ExamResult]) -> Shown:
    """One table per exam: the target's rank and probability, and the top next tokens."""
    shown: Shown = []
    for r in results:
        table = Table(
            title=(
                f"{target} exam {r.name}: {r.prompt!r} -> {r.target!r}: "
                f"rank {r.rank}, p = {r.prob:.3f} ({'PASS' if r.passed else 'fail'})"
            )
        )
        table.add_column("#", justify="right")
        table.add_column("token")
        table.add_column("prob", justify="right")
        ids = r.top_ids or [None] * len(r.top)
        for i, ((token, prob), token_id) in enumerate(zip(r.top, ids, strict=True)):
            style = "bold green" if token_id == r.target_id else None
            table.add_row(str(i), repr(token), f"{prob:.4f}", style=style)
        shown.append(table)
    return shown


def copying_view(target: str, c: HeadCircuit, notes: Sequence[str]) -> Shown:
    """A head's copying score, copy accuracy (over every id, and the trained ids when fewer),
    positional previous-token score, and the tokens each source token boosts."""
    summary = Table(title=f"{target} head {c.head}")
    summary.add_column("copying score", justify="right")
    summary.add_column("top-1 / top-5 copy acc\n(all ids)", justify="right")
    trained = c.trained_rows is not None and c.trained_rows < c.n_rows
    if trained:
        summary.add_column("top-1 / top-5 copy acc\n(trained ids)", justify="right")
    summary.add_column("pos-QK prev-token", justify="right")
    summary.add_row(
        "empty" if c.copying_note else fmt(c.copying_score),
        f"{fmt(c.top1_accuracy)} / {fmt(c.top5_accuracy)}",
        *([f"{fmt(c.trained_top1)} / {fmt(c.trained_top5)}"] if trained else []),
        fmt(c.pos_prev_token),
    )
    shown: Shown = [summary]
    if c.copying_note:  # an empty OV circuit: say so instead of a score
        shown.append(f"copying score: {c.copying_note}")
    over = (
        "copy accuracy: the share of source tokens whose own logit is the head's top (top-5) "
        f"boost, over all {c.n_rows} ids of the vocabulary"
    )
    if c.trained_ids:
        over += (
            f"; and over the {c.trained_rows} the model was trained on: {c.trained_ids}"
            if trained
            else f" ({c.trained_ids}: those the model was trained on)"
        )
    shown += [over + ".", *(f"note: {note}." for note in notes)]
    for b in c.boosted:
        table = Table(title=f"attending to {b['token']!r} boosts")
        table.add_column("token")
        table.add_column("logit", justify="right")
        for t in b["top"]:
            table.add_row(repr(t["token"]), f"{t['logit']:.3f}")
        shown.append(table)
    return shown


def period_exams_view(target: str, rows: Sequence[PeriodExam], verdict: ExamVerdict) -> Shown:
    """``exam --periods``: each period's pass rate with its interval, whether it passes the rule,
    and each chance model's rate (with the p-value of passing more often)."""
    from interp_toolkit.exams.verdict import chance_rule, pass_rule, passes_rule
    from interp_toolkit.stats.thresholds import THRESHOLDS

    refs = list(dict.fromkeys(c.model for r in rows for c in r.chance))
    table = Table(
        title=f"{target}: two-repeat exams by period ({verdict.n_passing} of "
        f"{verdict.n_exams} pass; {pass_rule(THRESHOLDS)})"
    )
    for col in (*PERIOD_COLUMNS, "median rank", *(f"chance: {ref} (p)" for ref in refs)):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r.period),
            r.kind,
            f"{r.offsets[0]}..{r.offsets[1]} of {r.positions}",
            str(r.n_prompts),
            f"{r.pass_rate:.1%} [{r.interval.low:.1%}, {r.interval.high:.1%}]",
            "yes" if passes_rule(r, THRESHOLDS) else "no",
            f"{r.median_rank:g}",
            *[chance_cell(r, m) for m in refs],
        )
    return [table, chance_rule(len(rows), THRESHOLDS)]


def chance_cell(e: PeriodExam, model: str, p: str = "") -> str:
    """``model``'s pass rate on ``e``'s prompts, with the p-value of ``e``'s passing more often
    ('-' when it did not sit them)."""
    c = next((c for c in e.chance if c.model == model), None)
    return "-" if c is None else f"{c.pass_rate:.1%} ({p}{c.p_value:.2g})"


def training_line(p: Any) -> str:
    """What ``train`` is about to do (a :class:`~interp_toolkit.training.presets.Preset`)."""
    from interp_toolkit.training.steplog import planned_steps

    return f"training: {p.model.n_layers} layer(s), {planned_steps(p.train)}, preset {p.name}"


def trained_lines(out: Any, p: Any, result: Any) -> list[str]:
    """What a training did (``result``: its ``TrainResult``): the step it reached, its loss, when
    induction formed, and a note when a run that waited for induction ended without it."""
    from interp_toolkit.heads.registry import SCORE
    from interp_toolkit.training.presets import induction_outcome

    last = result.metrics[-1] if result.metrics else {}
    first = result.first_induction_step
    lines = [
        f"trained {out} to step {result.steps_done} in {result.elapsed_s:.0f}s: "
        f"loss {last.get('loss', float('nan')):.3f}; first layer>=1 induction head > "
        f"{SCORE['induction'].floor:g} at step {first if first is not None else 'never'}"
    ]
    outcome = induction_outcome(p, result.metrics, result.steps_done)
    return lines + ([f"note: {outcome}"] if outcome is not None else [])
