"""``heads``, ``exam``, ``copying`` and ``circuit``: each parses its options, calls one function
of :mod:`interp_toolkit.commands.analysis` and prints what :mod:`interp_toolkit.reports.terminal`
renders of the result (torch is imported inside the commands so ``--help`` stays fast)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.causal.options import CircuitOptions
from interp_toolkit.cli.app import (
    app,
    csv_option,
    device_option,
    dtype_option,
    emit,
    json_option,
    out_option,
    outputs,
    save,
    takes,
    target_argument,
)
from interp_toolkit.errors import UserError
from interp_toolkit.exams.options import PeriodExamOptions
from interp_toolkit.heads.options import DiscoveryOptions


@app.command("heads")
@takes(DiscoveryOptions)  # built once: bad values are one-line errors before any work
def heads(
    *,
    target: str = target_argument(),
    json_out: Path | None = json_option(
        "Write the report as JSON here (per head: scores, tau, p_value; - for standard output)."
    ),
    csv_out: Path | None = csv_option("Write one row per head as CSV here."),
    options: DiscoveryOptions,
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Print each score with its p-value and the comparison that decided it (wide); the "
        "default table has one line per head and fits the terminal. --json holds everything.",
    ),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Score every head (previous-token, duplicate-token, induction...) and test each score's
    specificity against the head itself (its attention at nearby keys, a no-repeat control);
    roles need a significant test and the effect-size floor."""
    outputs((json_out, "--json", "out.json"), (csv_out, "--csv", "out.json"))
    from interp_toolkit.cli.boundary import stdout_claimed
    from interp_toolkit.commands.analysis import heads as read_heads
    from interp_toolkit.reports.terminal import heads_csv, heads_view

    found = read_heads(target, options, device, dtype)
    report = found.result.report
    emit(found.to_dict(), heads_view(found.target, report, found.notes, wide), json_out)
    if stdout_claimed():  # the table (and its warnings) is not printed: warn on stderr
        for warning in report.test.warnings:
            typer.echo(f"warning: {warning}.", err=True)
    save(csv_out, heads_csv(report))


@app.command("exam")
@takes(PeriodExamOptions)
def exam(
    *,
    target: str = target_argument(),
    prompt: str | None = typer.Option(
        None, "--prompt", "-p", help="Prompt (default: built-in exams)."
    ),
    target_text: str | None = typer.Option(
        None, "--target", "-t", help="Expected next token, e.g. ' F' (one token)."
    ),
    top_k: int = typer.Option(10, "--top-k", help="How many next tokens to list."),
    no_bos: bool = typer.Option(False, "--no-bos", help="Do not put BOS before the prompt."),
    periods: bool = typer.Option(
        False,
        "--periods",
        help="Two-repeat exams at every period 2..longest that fits and every token kind, at "
        "random offsets: pass rate with its Wilson 95% interval, the pass rule, median rank, and "
        "chance measured on an untrained model of the same architecture.",
    ),
    options: PeriodExamOptions,
    json_out: Path | None = json_option(),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """The target's rank and probability after a prompt, and the top-k next tokens; with
    --periods, the pass rate of two-repeat exams at every period."""
    if periods and (prompt is not None or target_text is not None):
        raise UserError("--periods makes its own prompts: leave out --prompt and --target.")
    outputs((json_out, "--json", "out.json"))
    from interp_toolkit.commands import analysis
    from interp_toolkit.reports.terminal import exams_view, period_exams_view

    how = {"prepend_bos": not no_bos, "device": device, "dtype": dtype}
    if periods:
        found = analysis.period_exams(target, options, **how)
        emit(found.to_dict(), period_exams_view(found.target, found.rows, found.verdict), json_out)
    else:
        sat = analysis.exams(target, prompt, target_text, top_k=top_k, **how)
        emit(sat.to_dict(), exams_view(sat.target, sat.results), json_out)


@app.command("copying")
def copying(
    target: str = target_argument(),
    head: str = typer.Option(..., "--head", help="Head as L.H, e.g. 1.4."),
    token: list[str] | None = typer.Option(
        None,
        "--token",
        help="Show what this token boosts (repeatable; default: the first four letters that are "
        "single tokens here, ' A'..' D' or 'A'..'D').",
    ),
    top_k: int = typer.Option(10, "--top-k", help="Boosted tokens to list per source token."),
    json_out: Path | None = json_option(),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """A head's OV copying score, top-1/top-5 copy accuracy and top boosted tokens (factored
    circuits over the whole vocabulary). Formerly ``circuits`` (still accepted)."""
    outputs((json_out, "--json", "out.json"))
    from interp_toolkit.commands.analysis import copying as read_copying
    from interp_toolkit.reports.terminal import copying_view

    found = read_copying(target, head, token, top_k=top_k, device=device, dtype=dtype)
    emit(found.to_dict(), copying_view(found.target, found.result, found.notes), json_out)


#: The command's earlier name, one letter from ``circuit`` (edge attribution): hidden, still accepted.
app.command("circuits", hidden=True)(copying)


@app.command("circuit")
@takes(CircuitOptions)
def circuit(
    *,
    target: str = target_argument(),
    options: CircuitOptions,
    json_out: Path | None = json_option(
        "Write ranked edges, the curve and the circuit as JSON (- for stdout)."
    ),
    out: Path | None = out_option("Draw the circuit into this HTML."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Rank every edge by attribution (EAP / EAP-IG), measure the faithfulness of the top-k
    edges along a curve, and report the smallest circuit that recovers 80% of the task."""
    outputs((json_out, "--json", "circuit.json"), (out, "--out", "circuit.html"))
    from interp_toolkit.commands.analysis import circuit as find_circuit
    from interp_toolkit.reports.terminal_units import circuit_view

    found = find_circuit(target, options, page=out is not None, device=device, dtype=dtype)
    emit(found.to_dict(), circuit_view(found.target, found.result, found.notes), json_out)
    save(out, found.page)
