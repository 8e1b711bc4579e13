"""``view`` and ``report``: each parses its options and calls one function of
:mod:`interp_toolkit.commands.runs` (torch is imported lazily)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    app,
    device_option,
    dtype_option,
    out_option,
    outputs,
    save,
    target_argument,
    wrote,
)


@app.command("view")
def view(
    target: str = target_argument(),
    prompt: str = typer.Option(..., "--prompt", "-p", help="Text to run the model on."),
    out: Path = out_option("HTML file to write (standalone, works offline).", ...),
    layer: int | None = typer.Option(
        None, "--layer", "-l", help="Only this layer (default: every layer)."
    ),
    head: list[int] | None = typer.Option(None, "--head", help="Only these heads (repeatable)."),
    no_bos: bool = typer.Option(False, "--no-bos", help="Do not put BOS before the prompt."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Write the attention patterns of a model on a prompt as an offline circuitsvis page."""
    outputs((out, "--out", "view.html"))
    from interp_toolkit.commands.runs import attention

    page, notice = attention(
        target,
        prompt,
        layer=layer,
        heads=head or None,
        prepend_bos=not no_bos,
        device=device,
        dtype=dtype,
    )
    if notice is not None:
        typer.echo(f"note: {notice}", err=True)
    save(out, page)


@app.command("report")
def report(
    run: Path = typer.Argument(
        ...,
        help="A run folder (from `interp-toolkit train`), or a Hugging Face model (a hub id or a "
        "save_pretrained folder: give --out).",
    ),
    out: Path | None = out_option("HTML file (default RUN/report.html)."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Write RUN/report.html: config, loss, samples, exams, head table, plots and attention views
    (a Hugging Face model: the same without training curves and samples, into --out).
    A damaged metrics.jsonl (a line cut off by a kill) is named on standard error."""
    from interp_toolkit.cli.app import check_out_file
    from interp_toolkit.commands.runs import report as write_report
    from interp_toolkit.runs.folder import RunPaths, read_config
    from interp_toolkit.runs.hub import is_hf_spec

    hf = is_hf_spec(run)
    check_out_file(out, "--out", "report.html", owns=() if hf else (RunPaths(run).report,))
    if not hf:
        read_config(run)  # fail fast on a folder that is not a run
    outputs()
    path, damage = write_report(run, out, device=device, dtype=dtype)
    if damage:  # said once the report stands (an error is one line)
        typer.echo(f"warning: {damage}", err=True)
    wrote(path)
