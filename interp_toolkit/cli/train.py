"""``train`` and ``sample``: each parses its options and calls one function (the recipe is
:func:`interp_toolkit.training.presets.recipe`, as the notebook API's ``train`` assembles it)."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import app, device_option, seed_option
from interp_toolkit.errors import UserError


@app.command("train")
def train_cmd(
    out: Path = typer.Option(
        ..., "--out", help="Run folder to create (or continue with --resume)."
    ),
    layers: int | None = typer.Option(
        None,
        "--layers",
        help="Number of layers, any whole number from 1 (default 2; the study trains 1, 2, 3, 8).",
    ),
    preset: str | None = typer.Option(
        None,
        "--preset",
        help="cpu (minutes on a laptop CPU; the default), text (plain text, no synthetic "
        "windows; see docs/recipes.md) or post (the post's recipe; GPU; earlier named seed).",
    ),
    steps: int | None = typer.Option(
        None,
        "--steps",
        help="Train exactly this many optimizer steps (default: the preset's budget, stopping "
        "once induction has formed; see --all-steps).",
    ),
    all_steps: bool = typer.Option(
        False,
        "--all-steps",
        help="Train the preset's whole budget. Without it (and without --steps) a 2+-layer "
        "model stops as a study's does: once its induction score has stayed above the floor "
        "for the preset's after-induction steps (the first line printed says how many).",
    ),
    corpus: str | None = typer.Option(
        None,
        "--corpus",
        help="stdlib | text file or folder | .parquet/.jsonl/save_to_disk PATH[#COLUMN] | "
        "hf:NAME[:SPLIT] (default: stdlib).",
    ),
    seed: int | None = seed_option("Seed for init and data order.", None),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Override the context length."),
    d_model: int | None = typer.Option(
        None, "--d-model", help="Override d_model (n_heads * d_head)."
    ),
    vocab_size: int | None = typer.Option(
        None, "--vocab-size", help="Override the compact vocabulary size."
    ),
    repeat_fraction: float | None = typer.Option(
        None,
        "--repeat-fraction",
        help="Share of every batch made of repeated-span windows, 0..1 (0 = plain text; "
        "default: the preset's).",
    ),
    mlp: bool = typer.Option(
        False, "--mlp", help="Add an MLP (4 x d_model GELU neurons) and LayerNorm to every block."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the run in --out from its last checkpoint, as it was configured "
        "(--steps may change its length; other options must match it).",
    ),
    restart: bool = typer.Option(
        False, "--restart", help="Discard the run in --out (says what goes) and train it anew."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
    device: str = device_option(),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="fp32 (default), tf32 (TF32 matmuls; CUDA only, ignored on CPUs) or bf16 (bf16 "
        "autocast on GPUs and CPUs, float32 weights and loss; + TF32 on CUDA); config.json "
        "records what applied.",
    ),
) -> None:
    """Train a transformer (attention-only, or with --mlp) into a run folder.

    On N processes or GPUs: torchrun --nproc_per_node N -m interp_toolkit train ... (the global
    batch is the preset's; see the README)."""
    from interp_toolkit.reports.terminal import trained_lines, training_line
    from interp_toolkit.training import train_model
    from interp_toolkit.training.distributed import cluster_from_env
    from interp_toolkit.training.presets import recipe

    if repeat_fraction is not None and not 0.0 <= repeat_fraction <= 1.0:
        raise UserError(
            f"--repeat-fraction {repeat_fraction} is not a share: give a number from 0 (plain "
            "text) to 1 (only repeated-span windows)."
        )
    p = recipe(
        preset,
        layers,
        mlp=mlp,
        resumed=out if resume else None,
        all_steps=all_steps,
        steps=steps,
        corpus=corpus,
        n_ctx=n_ctx,
        vocab_size=vocab_size,
        repeat_fraction=repeat_fraction,
        precision=precision,
        seed=seed,
        d_model=d_model,  # d_head (and d_mlp) follow in with_overrides, as in the API
    )
    main = cluster_from_env().is_main
    if not quiet and main and not resume:
        typer.echo(training_line(p), err=True)
    result = train_model(
        out,
        p.model,
        p.data,
        p.train,
        resume=resume,
        restart=restart,
        preset=p.name,
        progress=not quiet,
        device=device,
    )
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
