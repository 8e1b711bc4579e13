"""``view`` and ``report``: a thin shell over :mod:`interp_toolkit.views` (torch is imported lazily)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.errors import UserError


def _check_out_file(out: Path) -> Path:
    from interp_toolkit.io import check_writable_dir

    if out.is_dir():
        raise UserError(f"--out {out} is a folder: give a file name such as {out / 'view.html'}.")
    check_writable_dir(out.parent, "output folder")
    return out


def view(
    target: str = typer.Argument(
        ..., help="A run folder, or a GPT-2 model (gpt2, gpt2-medium… or an HF folder)."
    ),
    prompt: str = typer.Option(..., "--prompt", "-p", help="Text to run the model on."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="HTML file to write (standalone, works offline)."
    ),
    layer: int | None = typer.Option(
        None, "--layer", "-l", help="Only this layer (default: every layer)."
    ),
    head: list[int] | None = typer.Option(None, "--head", help="Only these heads (repeatable)."),
    no_bos: bool = typer.Option(False, "--no-bos", help="Do not put BOS before the prompt."),
) -> None:
    """Write the attention patterns of a model on a prompt as an offline circuitsvis page."""
    _check_out_file(out)
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))
    from interp_toolkit.targets import load_target
    from interp_toolkit.views.attention import prompt_tokens, save_attention_view

    tgt = load_target(target, for_weights=False)
    tokens = prompt_tokens(tgt.codec, prompt, n_ctx=tgt.n_ctx, prepend_bos=not no_bos)
    save_attention_view(
        tgt.model,
        tokens,
        out,
        codec=tgt.codec,
        layer=layer,
        heads=head or None,
        title=f"Attention: {tgt.name}",
    )
    typer.echo(f"wrote {out}")


def report(
    run: Path = typer.Argument(..., help="A run folder (from `interp-toolkit train`)."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="HTML file (default RUN/report.html)."
    ),
) -> None:
    """Write RUN/report.html: config, loss, samples, exam, head table, plots and attention views."""
    from interp_toolkit.runs import read_config

    read_config(run)  # fail fast on a folder that is not a run
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))
    from interp_toolkit.views.report import build_run_report

    path = build_run_report(run, out)
    typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("view")(view)
    app.command("report")(report)
