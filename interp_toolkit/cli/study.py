"""``reproduce`` and ``sweep``: the whole study, or one setting varied, in one command."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import app, device_option, seed_option
from interp_toolkit.errors import UserError


@app.command("reproduce")
def reproduce_cmd(
    out: Path = typer.Option(
        Path("study"), "--out", help="Study folder (new, empty, or an earlier study to reuse)."
    ),
    preset: str = typer.Option(
        "all",
        "--preset",
        help="all (the default: natural text's 1 and 2 layers beside the curriculum's depths, "
        "one page), cpu (the curriculum alone: minutes on a CPU), text (natural text read as "
        "bytes alone), text-bpe, or post (the post's recipe: GPU scale).",
    ),
    layers: str | None = typer.Option(
        None,
        "--layers",
        help="Comma-separated layer counts from 1,2,3,8 (default: each setting's own).",
    ),
    seed: int = seed_option("Seed for init, data and analysis."),
    seeds: int = typer.Option(
        1,
        "--seeds",
        help="Run the whole study at N seeds (--seed, --seed + 1, ...; the others in DIR/seed-S) "
        "and give every headline measure as its median and range over them, each verdict as the "
        "seeds it held in.",
    ),
    steps: int | None = typer.Option(
        None,
        "--steps",
        help="Train every depth exactly this many steps (default: each 2+-layer model until its "
        "induction score has stayed past the floor for its preset's steps after induction, "
        "docs/recipes.md §4; the 1-layer control as long as the longest).",
    ),
    corpus: str | None = typer.Option(None, "--corpus", help="stdlib (default) | PATH | hf:NAME."),
    workers: int = typer.Option(
        2,
        "--workers",
        help="Models trained at once on the CPU, one process (and one thread) each; on a GPU "
        "they train one after another.",
    ),
    mlp: bool = typer.Option(
        False,
        "--mlp",
        help="Also train MLP twins of the 1- and 2-layer models (the GPT-2 block: MLP and "
        "LayerNorm) and compare: induction timing, neurons' polysemanticity, probes.",
    ),
    device: str = device_option(),
) -> None:
    """Train natural text's 1 and 2 layers and the curriculum's 1, 2, 3 and 8 (or one setting,
    --preset) and write the side-by-side study report (DIR/index.html)."""
    from interp_toolkit.runtime.seeds import check_study_seeds
    from interp_toolkit.study.reproduce import StudyConfig, parse_layers, reproduce, summary_lines

    check_study_seeds(seed, seeds)  # the last seed a seed, before any folder
    cfg = StudyConfig(
        out=out,
        preset=None if preset == "all" else preset,
        layers=None if layers is None else parse_layers(layers),
        seed=seed,
        seeds=seeds,
        steps=steps,
        corpus=corpus,
        workers=workers,
        device=device,
        mlp=mlp,
    )
    for line in summary_lines(reproduce(cfg)):
        typer.echo(line)


@app.command("sweep")
def sweep_cmd(
    over: str = typer.Option(
        ..., "--over", help="n_ctx | vocab_size | repeat_fraction | d_model | lr"
    ),
    values: str = typer.Option(..., "--values", help="Comma-separated values, e.g. 16,32,64."),
    out: Path = typer.Option(..., "--out", help="Sweep folder (new, empty, or an earlier sweep)."),
    preset: str = typer.Option("cpu", "--preset"),
    layers: int = typer.Option(2, "--layers"),
    steps: int | None = typer.Option(
        None, "--steps", help="Step budget per value (default: the preset's)."
    ),
    seed: int = typer.Option(0, "--seed"),
    device: str = device_option(),
) -> None:
    """Time induction-head formation across values of one setting (context length, vocabulary size, ...)."""
    from interp_toolkit.study.reproduce import INDEX
    from interp_toolkit.study.sweep import SweepConfig, sweep

    try:
        vals = tuple(float(v) for v in values.split(",") if v.strip())
    except ValueError:
        raise UserError(f"--values {values!r} must be comma-separated numbers.") from None
    cfg = SweepConfig(
        out=out,
        param=over,
        values=vals,
        preset=None if preset == "all" else preset,
        layers=layers,
        steps=steps,
        seed=seed,
        device=device,
    )
    for r in sweep(cfg):
        typer.echo("  ".join(f"{k}={v}" for k, v in r.items()))
    typer.echo(f"report: {out / INDEX}")
