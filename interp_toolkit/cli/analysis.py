"""``heads``, ``exam`` and ``circuits``: a thin shell over :mod:`interp_toolkit.analysis`.

torch and TransformerLens are imported inside the commands so ``--help`` stays fast. Output files
are checked before any work starts and written atomically afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_out_file,
    device_option,
    emit,
    setup_torch,
)
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def heads_csv(report_dict: dict[str, Any]) -> str:
    """The ``heads`` table as CSV (one row per head; the same field names as the JSON)."""
    import csv
    import io

    from interp_toolkit.analysis.heads import SCORE_KINDS

    buf = io.StringIO()
    cols = ["head", "layer", "index", *SCORE_KINDS, *[f"tau_{k}" for k in SCORE_KINDS], "role"]
    writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    writer.writeheader()
    for h in report_dict["heads"]:
        row = {c: h[c] for c in ("head", "layer", "index", *SCORE_KINDS, "role")}
        row.update({f"tau_{k}": report_dict["taus"][k] for k in SCORE_KINDS})
        writer.writerow(row)
    return buf.getvalue()


@app.command("heads")
def heads(
    target: str = typer.Argument(..., help=TARGET_HELP),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON here."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write one row per head as CSV here."),
    null: str = typer.Option(
        "shuffled", "--null", help="Null model for tau: shuffled (no repeats) or fresh_init."
    ),
    n_seqs: int = typer.Option(64, "--n-seqs", help="Repeated-token sequences to score on."),
    period: int | None = typer.Option(
        None, "--period", help="Repeat period (default: fits the context, at most 50)."
    ),
    n_null: int | None = typer.Option(
        None,
        "--n-null",
        help="Null batches (shuffled) or models (fresh_init); default 4, or 2 for GPT-2 (CPU time).",
    ),
    quantile: float = typer.Option(0.95, "--quantile", help="tau = this quantile of the null."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random tokens."),
    device: str = device_option(),
) -> None:
    """Score every head (previous-token, duplicate-token, induction) against a null-model tau."""
    from interp_toolkit.analysis.nulls import check_null

    check_device(device)
    check_null(null)
    check_out_file(json_out, "--json")
    check_out_file(csv_out, "--csv")
    setup_torch()
    from interp_toolkit.analysis.scores import discover_heads
    from interp_toolkit.io import write_text
    from interp_toolkit.targets import load_target

    tgt = load_target(target, device, for_weights=False)
    if n_null is None:
        n_null = 2 if tgt.kind == "gpt2" else 4
    report = discover_heads(
        tgt.model,
        tgt.codec,
        n_seqs=n_seqs,
        period=period,
        seed=seed,
        null=null,
        n_null=n_null,
        quantile=quantile,
        model_cfg=tgt.model_cfg,
    )
    data = {"target": tgt.name, **report.to_dict()}
    emit(data, _print_heads, json_out)
    if csv_out:
        write_text(csv_out, heads_csv(data))
        typer.echo(f"wrote {csv_out}")


def _print_heads(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from interp_toolkit.analysis.heads import SCORE_KINDS

    probe, taus = data["probe"], data["taus"]
    title = (
        f"{data['target']}: period {probe['period']}, {probe['n_seqs']} seqs, "
        f"null {data['null']['model']} x{data['null']['n_samples']}, tau = q{data['null']['quantile']}"
    )
    table = Table(title=title)
    table.add_column("head")
    for k in SCORE_KINDS:
        table.add_column(f"{k}\n(tau {taus[k]:.3f})", justify="right")
    table.add_column("role")
    for h in data["heads"]:
        cells = []
        for k in SCORE_KINDS:
            text = f"{h[k]:.3f}"
            cells.append(f"[bold]{text}[/bold]" if h["above_tau"][k] else text)
        style = "green" if h["role"] != "none" else None
        table.add_row(h["head"], *cells, h["role"], style=style)
    console = Console()
    console.print(table)
    console.print(
        f"floors {data['floors']}; bold = above tau and floor. Rule: {data['rule']}.",
        soft_wrap=True,
    )


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
    json_out: Path | None = typer.Option(None, "--json", help="Write the results as JSON here."),
    device: str = device_option(),
) -> None:
    """The target's rank and probability after a prompt, and the top-k next tokens."""
    check_device(device)
    if (prompt is None) != (target_text is None):
        raise UserError("give --prompt and --target together (or neither, for the built-in exams).")
    if top_k < 1:
        raise UserError(f"--top-k {top_k} cannot work: use 1 or more.")
    check_out_file(json_out, "--json")
    setup_torch()
    from interp_toolkit.analysis.exam import BUILTIN_EXAMS, Exam, run_exam
    from interp_toolkit.targets import load_target

    exams = BUILTIN_EXAMS if prompt is None else (Exam("custom", prompt, target_text or ""),)
    tgt = load_target(target, device, for_weights=False)
    results = [
        run_exam(tgt.model, tgt.codec, e.prompt, e.target, top_k, not no_bos, name=e.name)
        for e in exams
    ]
    data = {"target": tgt.name, "prepend_bos": not no_bos, "exams": [r.to_dict() for r in results]}
    emit(data, _print_exams, json_out)


def _print_exams(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
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
        console.print(table)


def _default_token_ids(codec: Codec, d_vocab: int) -> list[int]:
    """Source tokens to show boosts for: ' A', ' B', ' C', ' D' where single known tokens."""
    ids = []
    for text in (" A", " B", " C", " D"):
        enc = codec.encode(text)
        if len(enc) == 1 and not codec.contains_unk(enc) and enc[0] < d_vocab:
            ids.append(int(enc[0]))
    return ids or [i for i in range(min(4, d_vocab)) if i != codec.bos_id][:3]


@app.command("circuits")
def circuits(
    target: str = typer.Argument(..., help=TARGET_HELP),
    head: str = typer.Option(..., "--head", help="Head as L.H, e.g. 1.4."),
    token: list[str] | None = typer.Option(
        None, "--token", help="Show what this token boosts (repeatable; default ' A'..' D')."
    ),
    top_k: int = typer.Option(10, "--top-k", help="Boosted tokens to list per source token."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the results as JSON here."),
    device: str = device_option(),
) -> None:
    """A head's OV copying score, top-1/top-5 copy accuracy and top boosted tokens."""
    from interp_toolkit.analysis.heads import HeadId

    check_device(device)

    layer, index = HeadId.parse(head)
    if top_k < 1:
        raise UserError(f"--top-k {top_k} cannot work: use 1 or more.")
    check_out_file(json_out, "--json")
    setup_torch()
    from interp_toolkit.analysis.circuits import check_head, head_circuit
    from interp_toolkit.targets import load_target

    tgt = load_target(target, device)
    check_head(tgt.model, layer, index)
    d_vocab = int(tgt.model.cfg.d_vocab)
    if token:
        ids = []
        for text in token:
            enc = tgt.codec.encode(text)
            if len(enc) != 1 or tgt.codec.contains_unk(enc):
                raise UserError(
                    f"--token {text!r} is not one known token of this model's vocabulary: "
                    "give a single token, e.g. ' A'."
                )
            ids.append(int(enc[0]))
    else:
        ids = _default_token_ids(tgt.codec, d_vocab)
    result = head_circuit(tgt.model, tgt.codec, layer, index, token_ids=ids, k=top_k)
    emit({"target": tgt.name, **result.to_dict()}, _print_circuit, json_out)


def _print_circuit(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    summary = Table(title=f"{data['target']} head {data['head']}")
    summary.add_column("copying score", justify="right")
    summary.add_column("top-1 copy acc", justify="right")
    summary.add_column("top-5 copy acc", justify="right")
    summary.add_column("pos-QK prev-token", justify="right")
    summary.add_row(
        "empty" if data["copying_note"] else _fmt(data["copying_score"]),
        _fmt(data["top1_accuracy"]),
        _fmt(data["top5_accuracy"]),
        _fmt(data["pos_prev_token"]),
    )
    console.print(summary)
    if data["copying_note"]:  # an empty OV circuit: say so instead of a score
        console.print(f"copying score: {data['copying_note']}", soft_wrap=True)
    for b in data["boosted"]:
        table = Table(title=f"attending to {b['token']!r} boosts")
        table.add_column("token")
        table.add_column("logit", justify="right")
        for t in b["top"]:
            table.add_row(repr(t["token"]), f"{t['logit']:.3f}")
        console.print(table)
