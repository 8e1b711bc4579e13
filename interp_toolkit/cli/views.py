"""``view`` and ``report``: a thin shell over :mod:`interp_toolkit.reports` (torch is imported lazily)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_dtype,
    check_out_file,
    device_option,
    dtype_option,
    setup_torch,
    wrote,
)
from interp_toolkit.errors import UserError


@app.command("view")
def view(
    target: str = typer.Argument(..., help=TARGET_HELP),
    prompt: str = typer.Option(..., "--prompt", "-p", help="Text to run the model on."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="HTML file to write (standalone, works offline)."
    ),
    layer: int | None = typer.Option(
        None, "--layer", "-l", help="Only this layer (default: every layer)."
    ),
    head: list[int] | None = typer.Option(None, "--head", help="Only these heads (repeatable)."),
    no_bos: bool = typer.Option(False, "--no-bos", help="Do not put BOS before the prompt."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Write the attention patterns of a model on a prompt as an offline circuitsvis page."""
    check_device(device)
    check_dtype(dtype)
    check_out_file(out, "--out", "view.html")
    setup_torch()
    from interp_toolkit.files.io import write_text
    from interp_toolkit.reports.attention import attention_page, attention_view
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.stats.thresholds import UNKNOWN_NOTICE_SHARE
    from interp_toolkit.text.codecs import unknown_notice

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    notice = unknown_notice(tgt.codec, tgt.codec.encode(prompt), UNKNOWN_NOTICE_SHARE)
    if notice is not None:
        typer.echo(f"note: {notice}", err=True)
    views = attention_view(
        tgt.model, prompt, codec=tgt.codec, layer=layer, heads=head or None, prepend_bos=not no_bos
    )
    page = attention_page(views, title=f"Attention: {tgt.name}", intro=f"Prompt: {prompt!r}")
    write_text(out, page)
    wrote(out)


@app.command("report")
def report(
    run: Path = typer.Argument(
        ...,
        help="A run folder (from `interp-toolkit train`), or a Hugging Face model (a hub id or a "
        "save_pretrained folder: give --out).",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="HTML file (default RUN/report.html)."
    ),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Write RUN/report.html: config, loss, samples, exams, head table, plots and attention views
    (a Hugging Face model: the same without training curves and samples, into --out).
    A damaged metrics.jsonl (a line cut off by a kill) is named on standard error."""
    from interp_toolkit.runs.hub import is_hf_spec

    check_device(device)
    check_dtype(dtype)
    if is_hf_spec(run):
        if out is None:
            raise UserError(
                "a report of a Hugging Face model needs a file to go to: give --out report.html."
            )
        check_out_file(out, "--out", "report.html")
        setup_torch()
        from interp_toolkit.reports.run_report import build_target_report
        from interp_toolkit.runs.targets import load_target

        target = load_target(str(run), device, for_weights=False, dtype=dtype)
        wrote(build_target_report(target, out))
        return
    from interp_toolkit.runs.folder import RunPaths, metrics_damage, read_config

    check_out_file(out, "--out", "report.html", owns=(RunPaths(run).report,))
    read_config(run)  # fail fast on a folder that is not a run
    setup_torch()
    from interp_toolkit.reports.run_report import build_run_report

    path = build_run_report(run, out, device=device)
    if damage := metrics_damage(run):  # said once the report stands (an error is one line)
        typer.echo(f"warning: {damage}", err=True)
    wrote(path)
