"""``neurons``, ``probe``, ``sae`` and ``stages`` (what a model holds inside): each parses its
options, calls one function of :mod:`interp_toolkit.commands` and prints what
:mod:`interp_toolkit.reports.terminal_units` renders of the result."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    app,
    csv_option,
    device_option,
    dtype_option,
    emit,
    json_option,
    out_option,
    outputs,
    save,
    takes,
    target_argument,
)
from interp_toolkit.cli.boundary import stdout_claimed
from interp_toolkit.cli.given import current
from interp_toolkit.development.options import StagesOptions
from interp_toolkit.probing.options import ProbeOptions
from interp_toolkit.saes.options import SAEOptions
from interp_toolkit.units.options import NeuronOptions


@app.command("neurons")
@takes(NeuronOptions)
def neurons_cmd(
    *,
    target: str = target_argument(),
    options: NeuronOptions,
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

    found = neurons(target, options, page=out is not None, device=device, dtype=dtype)
    shown = neurons_view(found.target, found.layer, found.labels, found.shown, found.finding)
    emit(found.to_dict(), shown, json_out)
    save(out, found.page)


@app.command("probe")
@takes(ProbeOptions)
def probe_cmd(
    *,
    target: str = target_argument(),
    options: ProbeOptions,
    json_out: Path | None = json_option("Write the results as JSON here."),
    csv_out: Path | None = csv_option("Write one row per boundary here."),
    out: Path | None = out_option("Write the accuracy-by-layer plot and table as an HTML page."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Probe a feature at every layer boundary: balanced accuracy, the control task on the
    feature's own input, selectivity and an untrained model of the same architecture, each with
    its 95% interval."""
    outputs(
        (json_out, "--json", "probe.json"),
        (csv_out, "--csv", "probe.csv"),
        (out, "--out", "probe.html"),
    )
    from interp_toolkit.commands.units import probe
    from interp_toolkit.reports.terminal_units import probe_csv, probe_view

    found = probe(target, options, page=out is not None, device=device, dtype=dtype)
    emit(found.to_dict(), probe_view(found.target, found.result), json_out)
    save(csv_out, probe_csv(found.result))
    save(out, found.page)


@app.command("sae")
@takes(SAEOptions)
def sae_cmd(
    *,
    target: str = target_argument(),
    options: SAEOptions,
    out: Path | None = out_option("The SAE folder (default for a run: RUN/saes/HOOK-ARCH-xE-kK)."),
    json_out: Path | None = json_option("Write the metrics as JSON here."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Train an SAE on a model's activations; print L0, variance explained, CE loss recovered and
    dead latents; write cfg.json + sae_weights.safetensors (SAELens's layout) and the pages."""
    if out is not None:  # never into the run's own files, but its saes/ (RUN@STEP: RUN's)
        from interp_toolkit.files.paths import inside_inputs
        from interp_toolkit.runs.folder import RunPaths
        from interp_toolkit.runs.spec import run_folder

        owns = (RunPaths(Path(run_folder(target))).saes,)
        inside_inputs(out, "--out", current().reads, owns, "sae-folder")
    outputs((json_out, "--json", "sae.json"))
    from interp_toolkit.commands.units import sae
    from interp_toolkit.reports.terminal_units import sae_view

    found = sae(target, options, out=out, device=device, dtype=dtype)
    rules = found.monosemantic, found.monosemantic_shuffled
    shown = sae_view(found.target, found.hook, found.setting, found.evals, *rules)
    emit(found.to_dict(), shown, json_out)
    typer.echo(
        f"wrote {found.folder} (cfg.json, sae_weights.safetensors, index.html)",
        err=stdout_claimed(),
    )


@app.command("stages")
@takes(StagesOptions)
def stages(
    *,
    run: Path = typer.Argument(..., help="A run folder with kept checkpoints (RUN/snapshots/)."),
    json_out: Path | None = json_option(
        "Write the curve, settings, diagnostics and stages as JSON here."
    ),
    html_out: Path | None = typer.Option(
        None, "--html", help="Write the figure (LLC, loss, head scores, boundaries) as HTML here."
    ),
    options: StagesOptions,
    device: str = device_option(),
) -> None:
    """Estimate the local learning coefficient (SGLD) at every kept checkpoint and print the
    stages: boundaries where the smoothed LLC curve turns, each stage described from the run's
    logged loss, held-out loss and head scores and by the route by path at its end; kept in
    RUN/stages.json, which `report RUN` and `reproduce` draw (docs/stages.md)."""
    outputs((json_out, "--json", "out.json"), (html_out, "--html", "stages.html"))
    from interp_toolkit.commands.runs import stages as find_stages
    from interp_toolkit.reports.terminal_units import stages_view

    found = find_stages(run, options, page=html_out is not None, device=device)
    if found.damage:  # the stages' descriptions read it
        typer.echo(f"warning: {found.damage}", err=True)
    emit(found.stages.to_dict(), stages_view(found.stages), json_out)
    save(html_out, found.page)
