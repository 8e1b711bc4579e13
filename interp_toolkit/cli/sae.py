"""``sae``: parses its options, calls :func:`interp_toolkit.commands.units.sae` (train an SAE at
a hook, evaluate it with SAELens's metrics, write its pages) and prints what
:mod:`interp_toolkit.reports.terminal_units` renders of it."""

from __future__ import annotations

from pathlib import Path

import typer

from interp_toolkit.cli.app import (
    app,
    check_not_an_input,
    device_option,
    dtype_option,
    emit,
    json_option,
    out_option,
    outputs,
    seed_option,
    target_argument,
)
from interp_toolkit.cli.boundary import stdout_claimed
from interp_toolkit.saes.config import ARCH_NAMES


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
