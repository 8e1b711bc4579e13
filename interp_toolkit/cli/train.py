"""``train`` and ``sample``: each parses its options and calls one function (the recipe is
:func:`interp_toolkit.training.presets.recipe`, as the notebook API's ``train`` assembles it)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import app, device_option, seed_option, takes
from interp_toolkit.training.options import TrainOptions


@app.command("train")
@takes(TrainOptions)
def train_cmd(
    *,
    out: Path = typer.Option(
        ..., "--out", help="Run folder to create (or continue with --resume)."
    ),
    options: TrainOptions,
    device: str = device_option(),
) -> None:
    """Train a transformer (attention-only, or with --mlp) into a run folder.

    On N processes or GPUs: torchrun --nproc_per_node N -m interp_toolkit train ... (the global
    batch is the preset's; see the README)."""
    from interp_toolkit.reports.terminal import trained_lines, training_line
    from interp_toolkit.training.distributed import cluster_from_env

    p = options.recipe(out)
    main = cluster_from_env().is_main
    if not options.quiet and main and not options.resume:
        typer.echo(training_line(p), err=True)
    result = options.train(out, p, device)
    for line in trained_lines(out, p, result) if main else []:
        typer.echo(line)


@app.command("sample")
def sample_cmd(
    run: Path = typer.Argument(..., help="Run folder."),
    prompt: str = typer.Option(
        "", "--prompt", help="Text to continue (empty: start from <|endoftext|>)."
    ),
    tokens: int = typer.Option(
        40,
        "--tokens",
        help="How many tokens to generate (printed as they come; Ctrl-C stops, keeping the text).",
    ),
    temperature: float = typer.Option(1.0, "--temperature", help="0 = greedy."),
    top_k: int | None = typer.Option(
        None, "--top-k", help="Sample only among the k most likely tokens."
    ),
    seed: int = seed_option("Sampling seed."),
    device: str = device_option(),
) -> None:
    """Generate text from a trained run, printed as it comes (a progress bar on standard error
    when standard output is not a terminal)."""
    from interp_toolkit.commands.runs import sample

    sample(
        run, prompt, tokens=tokens, temperature=temperature, top_k=top_k, seed=seed, device=device
    )
