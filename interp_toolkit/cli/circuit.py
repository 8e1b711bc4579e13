"""``circuit``: discover the circuit a model uses for a task (a thin shell over
:mod:`interp_toolkit.causal`; torch is imported inside the command)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_dtype,
    check_out_file,
    console,
    device_option,
    dtype_option,
    emit,
    setup_torch,
    wrote,
)
from interp_toolkit.errors import UserError

TASK_NAMES = ("induction", "previous-token", "ioi", "docstring")


@app.command("circuit")
def circuit(
    target: str = typer.Argument(..., help=TARGET_HELP),
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
    seed: int = typer.Option(
        0,
        "--seed",
        help="Seed of the prompts and intervals: the study's seed S gives its circuit (the "
        "induction task's prompts are drawn as the study draws them).",
    ),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write ranked edges, the curve and the circuit as JSON (- for stdout)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Draw the circuit into this HTML."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Rank every edge by attribution (EAP / EAP-IG), measure the faithfulness of the top-k
    edges along a curve, and report the smallest circuit that recovers 80% of the task."""
    check_device(device)
    check_dtype(dtype)
    if task not in TASK_NAMES:
        raise UserError(f"--task {task!r} is unknown: use one of {', '.join(TASK_NAMES)}.")
    if ig_steps < 1:
        raise UserError(f"--ig-steps {ig_steps} cannot work: use 1 (EAP) or more (EAP-IG).")
    if edges is not None and edges < 1:
        raise UserError(f"--edges {edges} cannot work: use 1 or more.")
    if n_prompts < 2:
        raise UserError(f"--n-prompts {n_prompts} cannot give an interval: use 2 or more.")
    check_out_file(json_out, "--json", "circuit.json")
    check_out_file(out, "--out", "circuit.html")
    setup_torch()
    from interp_toolkit.causal.circuit import discover_circuit
    from interp_toolkit.causal.tasks import make_task
    from interp_toolkit.models.architecture import architecture_of
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.runtime.progress import status

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    from interp_toolkit.runtime.seeds import derive

    # the study's induction task draws its prompts with derive(seed, "study_task"): the same here
    prompts = derive(seed, "study_task") if task == "induction" else seed
    made = make_task(task, tgt.model, tgt.codec, n_prompts=n_prompts, seed=prompts)
    with status("circuit", "scoring edges") as shown:
        found = discover_circuit(
            tgt.model,
            made,
            ig_steps=ig_steps,
            per_position=per_position,
            seed=seed,
            fixed_k=edges,
            progress=shown.update,
        )
    n_listed = 2000 if per_position else None
    data = {"target": tgt.name, **found.to_dict(n_ranked=n_listed)}
    arch = architecture_of(tgt.model)
    data["architecture"] = arch.describe()
    data["notes"] = arch.notes("circuit")
    cfg = tgt.model.cfg
    if out is not None:
        from interp_toolkit.files.io import write_text
        from interp_toolkit.reports.circuit_report import circuit_page

        page = circuit_page(
            found, target=tgt.name, n_layers=int(cfg.n_layers), n_heads=int(cfg.n_heads)
        )
        write_text(out, page)
    emit(data, _print_circuit, json_out)
    if out is not None:
        wrote(out)


def _print_circuit(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    c = data["circuit"]
    gap = data["gap"]
    head = (
        f"{data['target']}, task {data['task']} ({data['n_prompts']} pairs): clean "
        f"{data['clean_metric']:.3f}, corrupt {data['corrupt_metric']:.3f}, gap {gap['value']:.3f} "
        f"[{gap['low']:.3f}, {gap['high']:.3f}]; {data['method']}, {data['total_edges']} edges"
    )
    out.print(head, soft_wrap=True)
    for note in data.get("notes", []):
        out.print(f"note: {note}.", soft_wrap=True)
    if not c["edges"]:
        out.print(f"no circuit: {c['reason']}", soft_wrap=True)
        return
    table = Table(
        title=f"circuit: {len(c['edges'])} edges recover {c['faithfulness']:.1%} of the gap "
        f"(top {c['top_k']}{', pruned' if c['pruned'] else ''})"
    )
    for col in ("source", "target", "input", "score"):
        table.add_column(col, justify="right" if col == "score" else "left")
    for e in c["edges"]:
        table.add_row(e["source"], e["target"], e["input"], f"{e['score']:.4g}")
    out.print(table)
    held = c.get("heldout_faithfulness")
    if held is not None:
        out.print(
            f"held out: on {c['heldout_prompts']} prompts of the task drawn again (seed "
            f"{c['heldout_seed']}) the circuit recovers {held['value']:.1%} [{held['low']:.1%}, "
            f"{held['high']:.1%}] of the gap ({c['heldout_interval']})",
            soft_wrap=True,
        )
    curve = ", ".join(f"{p['edges']}: {p['faithfulness']:.2f}" for p in data["curve"])
    out.print(f"faithfulness of the top-k edges: {curve}", soft_wrap=True)
