"""``neurons``, ``probe``, ``sae`` and ``stages`` (what a model holds inside): each parses its
options, calls one function of :mod:`interp_toolkit.commands` and prints what
:mod:`interp_toolkit.reports.terminal_units` renders of the result."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    app,
    check_not_an_input,
    csv_option,
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
from interp_toolkit.cli.boundary import stdout_claimed
from interp_toolkit.saes.config import ARCH_NAMES


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


@app.command("probe")
def probe_cmd(
    target: str = target_argument(),
    feature: str = typer.Option(
        ..., "--feature", help="token | prev_token | prev2_token | position | in_repeat"
    ),
    data: str | None = typer.Option(
        None,
        "--data",
        help="text: held-out windows of the training corpus (default; stdlib for GPT-2) | "
        "repeats: random tokens with one repeated segment (in_repeat's data)",
    ),
    ablate: list[str] | None = typer.Option(
        None, "--ablate", help="Mean-ablate this head (L.H, repeatable) while reading the stream."
    ),
    n_seqs: int | None = n_seqs_option("Rows to probe (default: 8,192 positions in all)."),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Tokens per row (default: the context, at most 128)."
    ),
    seed: int = seed_option("Seed of the row split, control labels and data."),
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

    found = probe(
        target,
        feature,
        data=data,
        ablate=ablate,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        page=out is not None,
        device=device,
        dtype=dtype,
    )
    emit(found.data, probe_view(found.data), json_out)
    save(csv_out, probe_csv(found.data))
    save(out, found.page)


@app.command("sae")
def sae_cmd(
    target: str = target_argument(),
    hook: str = typer.Option(
        ...,
        "--hook",
        help="blocks.L.attn.hook_z (all heads), blocks.L.hook_resid_pre / hook_resid_post, or "
        "blocks.L.mlp.hook_post (MLP runs).",
    ),
    arch: str = typer.Option(
        "topk", "--arch", help=f"{' | '.join(ARCH_NAMES)} (relu: ReLU + L1; saes/architectures.py)."
    ),
    expansion: int = typer.Option(8, "--expansion", help="Latents per input dimension."),
    k: int = typer.Option(32, "--k", help="Active latents per token (the top-k kinds)."),
    tokens: int = typer.Option(400_000, "--tokens", help="Training activations in all."),
    out: Path | None = out_option("The SAE folder (default for a run: RUN/saes/HOOK-ARCH-xE-kK)."),
    json_out: Path | None = json_option("Write the metrics as JSON here."),
    seed: int = seed_option("Seed of the init and the data order."),
    resume: bool = typer.Option(False, "--resume", help="Continue the SAE in --out."),
    show: int = typer.Option(24, "--show", help="Latents drawn on features.html."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Train an SAE on a model's activations; print L0, variance explained, CE loss recovered and
    dead latents; write cfg.json + sae_weights.safetensors (SAELens's layout) and the pages."""
    if out is not None:  # never into the run's own files, but its saes/ (RUN@STEP: RUN's)
        from interp_toolkit.runs.folder import RunPaths
        from interp_toolkit.runs.spec import run_folder

        owns = (RunPaths(Path(run_folder(target))).saes,)
        check_not_an_input(out, "--out", "sae-folder", owns=owns)
    outputs((json_out, "--json", "sae.json"))
    from interp_toolkit.commands.units import sae
    from interp_toolkit.reports.terminal_units import sae_view

    found = sae(
        target,
        hook,
        out=out,
        arch=arch,
        expansion=expansion,
        k=k,
        tokens=tokens,
        seed=seed,
        resume=resume,
        show=show,
        progress=not quiet,
        device=device,
        dtype=dtype,
    )
    emit(found.data, sae_view(found.data), json_out)
    typer.echo(
        f"wrote {found.folder} (cfg.json, sae_weights.safetensors, index.html)",
        err=stdout_claimed(),
    )


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
