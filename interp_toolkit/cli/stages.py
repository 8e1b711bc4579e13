"""``stages``: the LLC at every kept checkpoint of a run and the developmental stages it marks (a
thin shell over :mod:`interp_toolkit.development`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.app import app, check_device, check_out_file, console, device_option, emit
from interp_toolkit.errors import UserError

_CAL = "Default: the one calibrated for the run's preset (docs/stages.md, 'Settings')."


@app.command("stages")
def stages(
    run: Path = typer.Argument(..., help="A run folder with kept checkpoints (RUN/snapshots/)."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write the curve, settings, diagnostics and stages as JSON here."
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
    seed: int = typer.Option(0, "--seed", help="Seed of the SGLD noise."),
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
    from dataclasses import replace

    from interp_toolkit.development.llc import SGLDSettings, calibrated_settings

    check_device(device)
    from interp_toolkit.runs.spec import split_step

    if (at := split_step(run)) is not None:
        raise UserError(
            f"stages reads every kept checkpoint of a run: give the run folder {at[0]}, not "
            f"{run} (--max-step {at[1]} for the checkpoints up to step {at[1]})."
        )
    given = {k: v for k, v in {"step_size": step_size, "gamma": gamma, "nbeta": nbeta,
             "chains": chains, "draws": draws, "burn_in": burn_in}.items() if v is not None}  # fmt: skip
    replace(SGLDSettings(), **given, seed=seed).validate()  # one line before any work
    for name, value, least in (("--batches", n_batches, 1), ("--rows", rows, 1)):
        if value < least:
            raise UserError(f"{name}={value} cannot work: use a whole number, {least} or more.")
    if not bandwidth > 0 or not 0 <= min_swing < 1:
        raise UserError(
            f"--bandwidth {bandwidth} --min-swing {min_swing} cannot work: use a bandwidth "
            "above 0 and a floor from 0 to below 1."
        )
    if reuse and (given or max_step is not None):
        raise UserError(
            "--reuse reads the estimates RUN/stages.json keeps: drop the SGLD and --max-step "
            "flags, or run without --reuse to estimate again."
        )
    check_out_file(json_out, "--json")
    check_out_file(html_out, "--html", "stages.html")
    from interp_toolkit.cli.app import setup_torch, wrote

    setup_torch()
    from interp_toolkit.development.curve import stages as find_stages
    from interp_toolkit.files.io import write_json, write_text
    from interp_toolkit.runs.folder import RunPaths, read_config, stamp
    from interp_toolkit.runtime.progress import status
    from interp_toolkit.training.settings import recorded_preset_name

    preset = recorded_preset_name(read_config(run))  # not a run folder: its one line
    from interp_toolkit.files.io import folder_lock
    from interp_toolkit.runs.folder import metrics_damage

    # the run is held while its stages are read and kept (a training that would rewrite
    # the run, `train --restart`, is refused meanwhile, and the reverse)
    with folder_lock(run, "run folder"):
        rule = {"bandwidth": bandwidth, "min_swing": min_swing}
        if reuse:
            from interp_toolkit.development.curve import LLCCurve
            from interp_toolkit.runs.folder import read_stages

            curve = LLCCurve.from_dict(read_stages(run))
            with status("stages", "the rule on the kept LLC"):
                found = find_stages(run, curve=curve, device=device, **rule)
        else:
            settings, source = calibrated_settings(preset, given)
            kept = RunPaths(run).snapshot_steps()
            steps = [s for s in kept if max_step is None or s <= max_step]
            if max_step is not None and len(kept) >= 3 > len(steps):
                raise UserError(
                    f"--max-step {max_step} leaves {len(steps)} of the {len(kept)} checkpoints {run} "
                    f"kept (steps {', '.join(map(str, kept[:4]))}, ...): stages need 3 or more; "
                    f"use --max-step {kept[2]} or more."
                )
            with status("stages", "estimating the LLC") as shown:
                found = find_stages(
                    run,
                    replace(settings, seed=seed),
                    settings_source=source,
                    n_batches=n_batches,
                    rows=rows,
                    steps=steps,
                    device=device,
                    progress=lambda i, n, step: shown.update(
                        f"checkpoint {i + 1} of {n} (step {step})"
                    ),
                    **rule,
                )
        data = found.to_dict(traces=True)
        write_json(RunPaths(run).stages, {**data, **stamp(run)})  # kept (its report draws them)
    if damage := metrics_damage(run):  # the stages' descriptions read it
        typer.echo(f"warning: {damage}", err=True)
    emit(data, _print_stages, json_out)
    if html_out:
        from interp_toolkit.runs.folder import read_metrics
        from interp_toolkit.views.stages import stages_html

        write_text(html_out, stages_html(found.to_dict(traces=False), read_metrics(run)))
        wrote(html_out)


def _print_stages(data: dict[str, Any]) -> None:
    from rich.table import Table

    out = console()
    s = data["settings"]
    table = Table(
        title=f"{data['run']}: LLC at {len(data['checkpoints'])} kept checkpoints (SGLD ε "
        f"{s['step_size']:g}, γ {s['gamma']:g}, nβ {data['checkpoints'][0]['nbeta']:.3g}, "
        f"{s['chains']} chains x {s['draws']} draws after {s['burn_in']} burn-in)"
    )
    for col in ("step", "LLC", "interval", "init loss", "R-hat", "max |drift|"):
        table.add_column(col, justify="right")
    bounds = {b["step"] for b in data["boundaries"]}
    for c in data["checkpoints"]:
        lo, hi = c["interval"]
        drift = [abs(d) for d in c["diagnostics"]["drift"] if d is not None]
        table.add_row(
            f"{c['step']}{' *' if c['step'] in bounds else ''}",
            _f(c["llc"]) + (" (below 0)" if c.get("below_zero") else ""),
            f"{_f(lo)} - {_f(hi)}",
            _f(c["init_loss"]),
            _f(c["diagnostics"]["r_hat"]),
            _f(max(drift)) if drift else "-",
        )
    out.print(table)
    out.print(f"settings: {data.get('settings_source', 'given')}.", soft_wrap=True)
    out.print(f"batches: {data['batches']['source']}.", soft_wrap=True)
    out.print(f"rule: {data['rule']['boundary']} (* above).", soft_wrap=True)
    if data["rule"].get("not_read_steps"):
        steps = ", ".join(map(str, data["rule"]["not_read_steps"]))
        out.print(
            f"not read (below 0) at steps {steps}: {data['rule']['not_read']}.", soft_wrap=True
        )
    for st in data["stages"]:
        out.print(f"stage {st['stage']} (steps {st['start']}-{st['end']}): {st['summary']}",
                  soft_wrap=True)  # fmt: skip
    pc = data["phase_change"]
    rise = pc.get("steepest_rise")
    if rise:
        out.print(
            f"steepest LLC rise: steps {rise['from']}-{rise['to']} ({rise['llc'][0]:.3g} -> "
            f"{rise['llc'][1]:.3g}).",
            soft_wrap=True,
        )
    if pc["phase_change_step"] is None:
        out.print("no induction phase change logged (no scored step above the floor).")
    elif pc["inside"] is None:
        out.print(f"induction phase change at step {pc['phase_change_step']}; no boundary found.")
    else:
        near = pc["nearest"]
        where = "inside" if pc["inside"] else "outside"
        out.print(
            f"induction phase change at step {pc['phase_change_step']}: {where} a boundary's "
            f"interval (nearest boundary step {near['step']}, interval {near['interval']}); "
            f"{'in' if pc.get('in_steepest_rise') else 'not in'} the steepest LLC rise.",
            soft_wrap=True,
        )


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
