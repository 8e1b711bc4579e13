"""``stages``: parses its options, calls :func:`interp_toolkit.commands.runs.stages` (the LLC at
every kept checkpoint of a run and the stages it marks) and prints what
:mod:`interp_toolkit.reports.terminal_units` renders of it."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import app, device_option, emit, json_option, outputs, save, seed_option

_CAL = "Default: the one calibrated for the run's preset (docs/stages.md, 'Settings')."


@app.command("stages")
def stages(
    run: Path = typer.Argument(..., help="A run folder with kept checkpoints (RUN/snapshots/)."),
    json_out: Path | None = json_option(
        "Write the curve, settings, diagnostics and stages as JSON here."
    ),
    html_out: Path | None = typer.Option(
        None, "--html", help="Write the figure (LLC, loss, head scores, boundaries) as HTML here."
    ),
    step_size: float | None = typer.Option(None, "--step-size", help=f"SGLD step size ε. {_CAL}"),
    gamma: float | None = typer.Option(None, "--gamma", help=f"Localisation strength γ. {_CAL}"),
    nbeta: float | None = typer.Option(None, "--nbeta", help=f"Inverse temperature nβ. {_CAL}"),
    chains: int | None = typer.Option(
        None, "--chains", help=f"SGLD chains per checkpoint (2 or more). {_CAL}"
    ),
    draws: int | None = typer.Option(
        None, "--draws", help=f"Draws per chain, after the burn-in. {_CAL}"
    ),
    burn_in: int | None = typer.Option(None, "--burn-in", help=f"Burn-in steps per chain. {_CAL}"),
    n_batches: int = typer.Option(
        4, "--batches", help="Training batches the LLC reads (the run's first steps')."
    ),
    rows: int = typer.Option(16, "--rows", help="Rows of each batch (spread over the batch)."),
    max_step: int | None = typer.Option(
        None, "--max-step", help="Only the kept checkpoints up to this step."
    ),
    seed: int = seed_option("Seed of the SGLD noise."),
    reuse: bool = typer.Option(
        False,
        "--reuse",
        help="Read the LLC kept in RUN/stages.json and apply the rule again "
        "(no SGLD: the stages, routes and rule settings are redone).",
    ),
    bandwidth: float = typer.Option(
        0.25, "--bandwidth", help="The rule's smoothing width, in natural-log steps."
    ),
    min_swing: float = typer.Option(
        0.1, "--min-swing", help="The rule's floor: a boundary's swings, as a share of the range."
    ),
    device: str = device_option(),
) -> None:
    """Estimate the local learning coefficient (SGLD) at every kept checkpoint and print the
    stages: boundaries where the smoothed LLC curve turns, each stage described from the run's
    logged loss, held-out loss and head scores and by the route by path at its end; kept in
    RUN/stages.json, which `report RUN` and `reproduce` draw (docs/stages.md)."""
    outputs((json_out, "--json", "out.json"), (html_out, "--html", "stages.html"))
    from interp_toolkit.commands.runs import stages as find_stages
    from interp_toolkit.reports.terminal_units import stages_view

    sgld = {"step_size": step_size, "gamma": gamma, "nbeta": nbeta}
    sgld |= {"chains": chains, "draws": draws, "burn_in": burn_in}
    found = find_stages(
        run,
        sgld,
        n_batches=n_batches,
        rows=rows,
        max_step=max_step,
        seed=seed,
        reuse=reuse,
        bandwidth=bandwidth,
        min_swing=min_swing,
        page=html_out is not None,
        device=device,
    )
    if found.damage:  # the stages' descriptions read it
        typer.echo(f"warning: {found.damage}", err=True)
    emit(found.data, stages_view(found.data), json_out)
    save(html_out, found.page)
