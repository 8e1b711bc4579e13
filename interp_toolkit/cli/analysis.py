"""``heads``, ``exam`` and ``circuits``: a thin shell over :mod:`interp_toolkit.heads`.

torch and TransformerLens are imported inside the commands so ``--help`` stays fast. Output files
are checked before any work starts and written atomically afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_dtype,
    check_out_file,
    console,
    device_option,
    dtype_option,
    emit,
    setup_torch,
    wrote,
)
from interp_toolkit.errors import UserError
from interp_toolkit.heads.options import DiscoveryOptions

if TYPE_CHECKING:  # numpy, which the codecs import, is not needed for --help
    from interp_toolkit.text.codecs import Codec


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def heads_csv(report_dict: dict[str, Any]) -> str:
    """The ``heads`` table as CSV: one row per head; per score its value, ``tau_``, ``p_value_``,
    ``decided_by_``, ``significant_`` and ``passes_`` (the JSON's per-head fields, flattened)."""
    import csv
    import io

    from interp_toolkit.heads.registry import SCORE_KINDS

    fields = ("tau", "p_value", "decided_by", "significant", "passes")
    buf = io.StringIO()
    cols = ["head", "layer", "index", "role"]
    cols += [c for k in SCORE_KINDS for c in (k, *(f"{f}_{k}" for f in fields))]
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for h in report_dict["heads"]:
        row = {c: h[c] for c in ("head", "layer", "index", "role")}
        for k in SCORE_KINDS:
            row[k] = h["scores"][k]
            row.update({f"{f}_{k}": h[f][k] for f in fields})
        writer.writerow(row)
    return buf.getvalue()


@app.command("heads")
def heads(
    target: str = typer.Argument(..., help=TARGET_HELP),
    json_out: Path | None = typer.Option(
        None,
        "--json",
        help="Write the report as JSON here (per head: scores, tau, p_value; - for standard output).",
    ),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write one row per head as CSV here."),
    alpha: float = typer.Option(
        DiscoveryOptions.alpha,
        "--alpha",
        help="A score is significant when p <= alpha (or BH at FDR alpha).",
    ),
    fdr: bool = typer.Option(
        DiscoveryOptions.fdr,
        "--fdr",
        help="Benjamini-Hochberg over heads x scores (false-discovery rate alpha).",
    ),
    induction_score: str = typer.Option(
        DiscoveryOptions.induction_score,
        "--induction-score",
        help="Which score decides the induction role: vw (the post's value-weighted) or plain.",
    ),
    n_draws: int | None = typer.Option(
        DiscoveryOptions.n_draws,
        "--n-draws",
        help="Sign-flip draws per test (default: enough that BH over every test can reject one).",
    ),
    n_untrained: int | None = typer.Option(
        DiscoveryOptions.n_untrained,
        "--n-untrained",
        help="Also test each score against K untrained models of the same architecture (a "
        "second test, vs_untrained, that decides no role; off by default).",
    ),
    untrained_rows: int | None = typer.Option(
        DiscoveryOptions.untrained_rows,
        "--untrained-rows",
        help="Probe rows the untrained models run on (default all; GPT-2 16).",
    ),
    n_seqs: int = typer.Option(
        DiscoveryOptions.n_seqs, "--n-seqs", help="Repeated-token sequences to score on."
    ),
    period: int | None = typer.Option(
        DiscoveryOptions.period,
        "--period",
        help="Repeat period (default: fits the context, at most 50).",
    ),
    seed: int = typer.Option(DiscoveryOptions.seed, "--seed", help="Seed of the random tokens."),
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
    check_device(device)
    check_dtype(dtype)
    options = DiscoveryOptions(  # built once, here: bad values are one-line errors before any work
        n_seqs=n_seqs,
        period=period,
        seed=seed,
        alpha=alpha,
        fdr=fdr,
        induction_score=induction_score,
        n_draws=n_draws,
        n_untrained=n_untrained,
        untrained_rows=untrained_rows,
    )
    check_out_file(json_out, "--json")
    check_out_file(csv_out, "--csv")
    setup_torch()
    from interp_toolkit.files.io import write_text
    from interp_toolkit.heads.discovery import discover
    from interp_toolkit.models.architecture import architecture_of
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.runtime.progress import status

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    with status("heads", "scoring the probe") as shown:
        found = discover(
            tgt.model, tgt.codec, options, model_cfg=tgt.model_cfg, progress=shown.update
        )
    data = {"target": tgt.name, **found.to_dict()}
    arch = architecture_of(tgt.model)
    data["architecture"] = arch.describe()
    data["notes"] = arch.notes("heads", period=data["probe"]["period"])
    emit(data, _print_heads_wide if wide else _print_heads, json_out)
    from interp_toolkit.cli.boundary import stdout_claimed

    if stdout_claimed():  # the table (and its warnings) is not printed: warn on stderr
        for warning in data["test"]["warnings"]:
            typer.echo(f"warning: {warning}.", err=True)
    if csv_out:
        write_text(csv_out, heads_csv(data))
        wrote(csv_out)


def _print_heads(data: dict[str, Any]) -> None:
    """One line per head: its role and every score, bold where it passes (significant and past
    its floor); the roles' deciding tests below. Fits the terminal's width (rich shrinks and
    folds the columns); ``--wide`` adds every p-value, ``--json`` everything."""
    from rich.table import Table

    from interp_toolkit.heads.registry import SCORES

    probe, floors = data["probe"], data["effect_size_floor"]
    out = console()
    out.print(
        f"{data['target']}: period {probe['period']}, {probe['n_seqs']} seqs; bold = the score "
        "passes its specificity test and reaches its floor (in brackets)",
        soft_wrap=True,
    )
    table = Table(pad_edge=False, collapse_padding=True)
    table.add_column("head", no_wrap=True)
    table.add_column("role", overflow="fold")
    for sc in SCORES:
        table.add_column(f"{sc.label} ({floors[sc.name]:g})", justify="right", overflow="fold")
    for h in data["heads"]:
        cells = [
            f"[bold]{h['scores'][sc.name]:.3f}[/bold]"
            if h["passes"][sc.name]
            else f"{h['scores'][sc.name]:.3f}"
            for sc in SCORES
        ]
        style = "green" if h["role"] != "none" else None
        table.add_row(h["head"], h["role"], *cells, style=style)
    out.print(table)
    for h in data["heads"]:
        why = h["role_reason"]
        if why is not None:
            out.print(
                f"{h['head']} {h['role']}: {why['score']} p {why['p_value']:.2g} "
                f"({h['decided_by'][why['score']]})",
                soft_wrap=True,
            )
    _heads_footer(data)


def _print_heads_wide(data: dict[str, Any]) -> None:
    from rich.table import Table

    from interp_toolkit.heads.registry import SCORES

    probe, floors = data["probe"], data["effect_size_floor"]
    title = (
        f"{data['target']}: period {probe['period']}, {probe['n_seqs']} seqs; each score's "
        f"specificity test (p, and the comparison that decided it, below the score)"
    )
    table = Table(title=title)
    table.add_column("head")
    for s in SCORES:
        table.add_column(f"{s.label}\n(floor {floors[s.name]:g})", justify="right")
    table.add_column("role")
    for h in data["heads"]:
        cells = []
        for s in SCORES:
            k = s.name
            text = f"{h['scores'][k]:.3f}\np {h['p_value'][k]:.2g} {h['decided_by'][k]}"
            cells.append(f"[bold]{text}[/bold]" if h["passes"][k] else text)
        why = h["role_reason"]
        role = (
            h["role"] if why is None else f"{h['role']}\n({why['score']}, p {why['p_value']:.2g})"
        )
        style = "green" if h["role"] != "none" else None
        table.add_row(h["head"], *cells, role, style=style)
    console().print(table)
    _heads_footer(data)


def _heads_footer(data: dict[str, Any]) -> None:
    """What the test was and how to read it, its warnings and the architecture's notes."""
    out, test = console(), data["test"]
    significance = "BH at FDR" if test["correction"].startswith("benjamini") else "p <="
    n_heads = len(data["heads"])
    expected = test["expected_false_positives"]["per_score"]
    second = test.get("untrained")
    also = (
        f" Second test (decides nothing): vs {second['n_models']} untrained models x "
        f"{second['rows']} rows, in the JSON."
        if second
        else ""
    )
    out.print(
        f"bold = significant ({significance} {test['alpha']:g}) and >= the score's effect-size "
        f"floor. By chance {expected:.2g} of {n_heads} heads reach p <= {test['alpha']:g} per "
        f"score; the smallest attainable p is {test['smallest_p']:.2g} ({test['n_draws']} "
        f"sign-flip draws, {test['n_tests']} tests). Rule: {data['rule']}.{also}",
        soft_wrap=True,
    )
    for warning in test["warnings"]:
        out.print(f"[bold red]warning:[/] {warning}.", soft_wrap=True)
    for note in data.get("notes", []):
        out.print(f"note: {note}.", soft_wrap=True)


@app.command("exam")
def exam(
    target: str = typer.Argument(..., help=TARGET_HELP),
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
    n_prompts: int = typer.Option(  # exams/prompts.py N_PROMPTS: its module imports torch
        200, "--n-prompts", help="Prompts per period and token kind (--periods)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the period prompts (--periods)."),
    kinds: str = typer.Option(
        "letters,random", "--kinds", help="Token kinds (--periods): letters, random or both."
    ),
    max_period: int | None = typer.Option(
        None, "--max-period", help="Longest period (--periods; default: the longest that fits)."
    ),
    max_offset: int = typer.Option(  # exams/prompts.py MAX_OFFSET: its module imports torch
        64, "--max-offset", help="Longest random prefix before the pattern (--periods)."
    ),
    chance_run: str | None = typer.Option(
        None,
        "--chance-run",
        help="Another model (e.g. the 1-layer run) to sit the same prompts as a chance level "
        "(--periods).",
    ),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write the results as JSON here (- for standard output)."
    ),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """The target's rank and probability after a prompt, and the top-k next tokens; with
    --periods, the pass rate of two-repeat exams at every period."""
    check_device(device)
    check_dtype(dtype)
    if periods:
        if prompt is not None or target_text is not None:
            raise UserError("--periods makes its own prompts: leave out --prompt and --target.")
        from interp_toolkit.cli.period_exams import PeriodExamArgs, period_exams

        args = PeriodExamArgs(
            n_prompts, seed, not no_bos, kinds, max_period, max_offset, chance_run
        )
        period_exams(target, device, args, json_out, dtype)
        return
    if (prompt is None) != (target_text is None):
        raise UserError("give --prompt and --target together (or neither, for the built-in exams).")
    if top_k < 1:
        raise UserError(f"--top-k {top_k} cannot work: use 1 or more.")
    check_out_file(json_out, "--json")
    setup_torch()
    from interp_toolkit.exams.single import Exam, exams_for, run_exam
    from interp_toolkit.runs.targets import load_target

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    exams = exams_for(tgt.codec) if prompt is None else (Exam("custom", prompt, target_text or ""),)
    results = [
        run_exam(tgt.model, tgt.codec, e.prompt, e.target, top_k, not no_bos, name=e.name)
        for e in exams
    ]
    data = {"target": tgt.name, "prepend_bos": not no_bos, "exams": [r.to_dict() for r in results]}
    emit(data, _print_exams, json_out)


def _print_exams(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    for r in data["exams"]:
        table = Table(
            title=(
                f"{data['target']} exam {r['name']}: {r['prompt']!r} -> {r['target']!r}: "
                f"rank {r['rank']}, p = {r['prob']:.3f} ({'PASS' if r['passed'] else 'fail'})"
            )
        )
        table.add_column("#", justify="right")
        table.add_column("token")
        table.add_column("prob", justify="right")
        for i, t in enumerate(r["top"]):
            style = "bold green" if t["token_id"] == r["target_id"] else None
            table.add_row(str(i), repr(t["token"]), f"{t['prob']:.4f}", style=style)
        out.print(table)


def _default_token_ids(codec: Codec, d_vocab: int) -> list[int]:
    """Source tokens to show boosts for: the first four exam letters the codec keeps as single
    tokens (``' A'``..``' D'`` under BPE, ``'A'``..``'D'`` under bytes: letters, not control bytes)."""
    from interp_toolkit.exams.prompts import letter_pool

    ids = [i for i in letter_pool(codec).ids if i < d_vocab][:4]
    return ids or [i for i in range(min(4, d_vocab)) if i != codec.bos_id][:3]


def _one_token(codec: Codec, text: str, d_vocab: int) -> int:
    """The id of ``--token TEXT``: one known token as given, else as stripped of surrounding space
    (``' A'`` on a byte model is the letter ``'A'``); one line naming a token that works here
    otherwise."""
    for form in dict.fromkeys((text, text.strip())):
        enc = codec.encode(form) if form else []
        if len(enc) == 1 and not codec.contains_unk(enc) and enc[0] < d_vocab:
            return int(enc[0])
    example = codec.str_tokens(_default_token_ids(codec, d_vocab)[:1])
    raise UserError(
        f"--token {text!r} is not one known token of this model's vocabulary: give a single "
        f"token, e.g. {example[0]!r}."
        if example
        else "--token: give a single token."
    )


@app.command("copying")
def copying(
    target: str = typer.Argument(..., help=TARGET_HELP),
    head: str = typer.Option(..., "--head", help="Head as L.H, e.g. 1.4."),
    token: list[str] | None = typer.Option(
        None,
        "--token",
        help="Show what this token boosts (repeatable; default: the first four letters that are "
        "single tokens here, ' A'..' D' or 'A'..'D').",
    ),
    top_k: int = typer.Option(10, "--top-k", help="Boosted tokens to list per source token."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write the results as JSON here (- for standard output)."
    ),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """A head's OV copying score, top-1/top-5 copy accuracy and top boosted tokens (factored
    circuits over the whole vocabulary). Formerly ``circuits`` (still accepted)."""
    from interp_toolkit.heads.registry import HeadId

    check_device(device)
    check_dtype(dtype)

    layer, index = HeadId.parse(head)
    if top_k < 1:
        raise UserError(f"--top-k {top_k} cannot work: use 1 or more.")
    check_out_file(json_out, "--json")
    setup_torch()
    from interp_toolkit.models.architecture import architecture_of
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.weights.circuits import check_head, head_circuit, trained_token_ids

    tgt = load_target(target, device, dtype=dtype)
    check_head(tgt.model, layer, index)
    d_vocab = int(tgt.model.cfg.d_vocab)
    if token:
        ids = [_one_token(tgt.codec, text, d_vocab) for text in token]
    else:
        ids = _default_token_ids(tgt.codec, d_vocab)
    result = head_circuit(
        tgt.model,
        tgt.codec,
        layer,
        index,
        token_ids=ids,
        k=top_k,
        trained=trained_token_ids(tgt),
    )
    arch = architecture_of(tgt.model)
    data = {"target": tgt.name, **result.to_dict(), "architecture": arch.describe()}
    data["notes"] = arch.notes("copying")
    emit(data, _print_circuit, json_out)


#: The command's earlier name, one letter from ``circuit`` (edge attribution): hidden, still accepted.
app.command("circuits", hidden=True)(copying)


def _print_circuit(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    summary = Table(title=f"{data['target']} head {data['head']}")
    summary.add_column("copying score", justify="right")
    summary.add_column("top-1 / top-5 copy acc\n(all ids)", justify="right")
    trained = data.get("trained_rows") is not None and data["trained_rows"] < data["n_rows"]
    if trained:
        summary.add_column("top-1 / top-5 copy acc\n(trained ids)", justify="right")
    summary.add_column("pos-QK prev-token", justify="right")
    summary.add_row(
        "empty" if data["copying_note"] else _fmt(data["copying_score"]),
        f"{_fmt(data['top1_accuracy'])} / {_fmt(data['top5_accuracy'])}",
        *(
            [f"{_fmt(data['trained_top1_accuracy'])} / {_fmt(data['trained_top5_accuracy'])}"]
            if trained
            else []
        ),
        _fmt(data["pos_prev_token"]),
    )
    out.print(summary)
    if data["copying_note"]:  # an empty OV circuit: say so instead of a score
        out.print(f"copying score: {data['copying_note']}", soft_wrap=True)
    over = (
        "copy accuracy: the share of source tokens whose own logit is the head's top (top-5) "
        f"boost, over {data['accuracy_over']}"
    )
    if data.get("trained_ids"):
        over += (
            f"; and over the {data['trained_rows']} the model was trained on: {data['trained_ids']}"
            if trained
            else f" ({data['trained_ids']}: those the model was trained on)"
        )
    out.print(over + ".", soft_wrap=True)
    for note in data.get("notes", []):
        out.print(f"note: {note}.", soft_wrap=True)
    for b in data["boosted"]:
        table = Table(title=f"attending to {b['token']!r} boosts")
        table.add_column("token")
        table.add_column("logit", justify="right")
        for t in b["top"]:
            table.add_row(repr(t["token"]), f"{t['logit']:.3f}")
        out.print(table)
