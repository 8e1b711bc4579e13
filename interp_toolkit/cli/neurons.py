"""``neurons``: parses its options, calls :func:`interp_toolkit.commands.units.neurons` and
prints what :mod:`interp_toolkit.reports.terminal_units` renders of it."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    app,
    device_option,
    dtype_option,
    emit,
    json_option,
    n_seqs_option,
    out_option,
    outputs,
    save,
    seed_option,
    target_argument,
)


@app.command("neurons")
def neurons_cmd(
    target: str = target_argument(),
    layer: int = typer.Option(..., "--layer", "-l", help="The MLP layer to read."),
    top: int = typer.Option(20, "--top", help="Top-activating positions kept per neuron."),
    neuron: list[int] | None = typer.Option(
        None, "--neuron", help="Show this neuron (repeatable; default: the highest-firing)."
    ),
    show: int = typer.Option(16, "--show", help="How many neurons the table and page show."),
    n_seqs: int | None = n_seqs_option("Held-out rows to read (default: 16,384 positions in all)."),
    seed: int = seed_option("Seed of the held-out rows and the threshold."),
    json_out: Path | None = json_option(
        "Write every neuron's contexts and promoted tokens as JSON here."
    ),
    out: Path | None = out_option("Write an offline page: the table and the top contexts."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Top contexts, promoted tokens and concepts of every neuron of an MLP layer, each statistic
    beside the untrained twin's and a shuffled-activation control's."""
    outputs((json_out, "--json", "neurons.json"), (out, "--out", "neurons.html"))
    from interp_toolkit.commands.units import neurons
    from interp_toolkit.reports.terminal_units import neurons_view

    found = neurons(
        target,
        layer,
        top=top,
        chosen=neuron,
        show=show,
        n_seqs=n_seqs,
        seed=seed,
        page=out is not None,
        device=device,
        dtype=dtype,
    )
    emit(found.data, neurons_view(found.data, found.rows), json_out)
    save(out, found.page)
