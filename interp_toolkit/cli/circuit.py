"""``circuit``: parses its options, calls :func:`interp_toolkit.commands.analysis.circuit` and
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
    out_option,
    outputs,
    save,
    seed_option,
    target_argument,
)

TASK_NAMES = ("induction", "previous-token", "ioi", "docstring")  # commands.analysis.TASK_NAMES


@app.command("circuit")
def circuit(
    target: str = target_argument(),
    task: str = typer.Option(
        "induction", "--task", help=f"The behaviour to explain: {', '.join(TASK_NAMES)}."
    ),
    edges: int | None = typer.Option(
        None,
        "--edges",
        help="Take the top K edges as the circuit (default: the smallest set recovering 80%, pruned).",
    ),
    ig_steps: int = typer.Option(
        5, "--ig-steps", help="Integrated-gradient steps (EAP-IG); 1 is plain EAP."
    ),
    n_prompts: int = typer.Option(
        64,  # causal.ROUTE_PROMPTS (a literal: --help imports no torch; tests/unit/test_owners.py)
        "--n-prompts",
        help="Clean/corrupt prompt pairs (64: the study's circuit).",
    ),
    per_position: bool = typer.Option(
        False, "--per-position", help="Rank (edge, position) pairs instead of edges."
    ),
    seed: int = seed_option(
        "Seed of the prompts and intervals: the study's seed S gives its circuit (the "
        "induction task's prompts are drawn as the study draws them)."
    ),
    json_out: Path | None = json_option(
        "Write ranked edges, the curve and the circuit as JSON (- for stdout)."
    ),
    out: Path | None = out_option("Draw the circuit into this HTML."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Rank every edge by attribution (EAP / EAP-IG), measure the faithfulness of the top-k
    edges along a curve, and report the smallest circuit that recovers 80% of the task."""
    outputs((json_out, "--json", "circuit.json"), (out, "--out", "circuit.html"))
    from interp_toolkit.commands.analysis import circuit as find_circuit
    from interp_toolkit.reports.terminal_units import circuit_view

    found = find_circuit(
        target,
        task,
        edges=edges,
        ig_steps=ig_steps,
        n_prompts=n_prompts,
        per_position=per_position,
        seed=seed,
        page=out is not None,
        device=device,
        dtype=dtype,
    )
    data = found.to_dict()
    emit(data, circuit_view(data), json_out)
    save(out, found.page)
