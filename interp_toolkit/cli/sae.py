"""``sae``: train a sparse autoencoder at a hook of a model, evaluate it with SAELens's metrics and
write its feature pages (a thin shell over :mod:`interp_toolkit.saes` and
:mod:`interp_toolkit.reports.features`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_dtype,
    check_not_an_input,
    check_out_file,
    console,
    device_option,
    dtype_option,
    emit,
    setup_torch,
)
from interp_toolkit.cli.boundary import stdout_claimed
from interp_toolkit.errors import UserError
from interp_toolkit.saes.config import ARCH_NAMES


@app.command("sae")
def sae_cmd(
    target: str = typer.Argument(..., help=TARGET_HELP),
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
    out: Path | None = typer.Option(
        None, "--out", "-o", help="The SAE folder (default for a run: RUN/saes/HOOK-ARCH-xE-kK)."
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Write the metrics as JSON here."),
    seed: int = typer.Option(0, "--seed", help="Seed of the init and the data order."),
    resume: bool = typer.Option(False, "--resume", help="Continue the SAE in --out."),
    show: int = typer.Option(24, "--show", help="Latents drawn on features.html."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Train an SAE on a model's activations; print L0, variance explained, CE loss recovered and
    dead latents; write cfg.json + sae_weights.safetensors (SAELens's layout) and the pages."""
    if tokens < 1 or show < 1:
        raise UserError("--tokens and --show must be 1 or more.")
    from interp_toolkit.saes.config import hook_layer

    layer = hook_layer(hook)
    hook = ".".join(["blocks", str(layer), *hook.split(".")[2:]])  # blocks.01. is blocks.1.
    check_out_file(json_out, "--json", "sae.json")
    from interp_toolkit.runs.hub import is_hf_spec

    if out is None and is_hf_spec(target):
        raise UserError(
            "an SAE of a Hugging Face model needs a folder to live in: give --out FOLDER."
        )
    if out is not None:
        from interp_toolkit.files.io import check_writable_dir

        if out.exists() and not out.is_dir():
            raise UserError(f"--out {out} is a file: give a folder for the SAE.")
        from interp_toolkit.runs.folder import RunPaths
        from interp_toolkit.runs.spec import run_folder

        owns = (RunPaths(Path(run_folder(target))).saes,)  # RUN@STEP: RUN's saes/
        check_not_an_input(out, "--out", "sae-folder", owns=owns)
        check_writable_dir(out if out.is_dir() else out.parent, "--out folder")
    check_device(device)
    check_dtype(dtype)
    setup_torch()
    from interp_toolkit.saes.config import check_shape

    check_shape(arch, k, expansion)  # the registry's checks (saes/architectures.py)
    from interp_toolkit.reports.features import write_pages
    from interp_toolkit.runs.spec import split_step
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.saes.pipeline import default_folder, run_sae

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    check_latents(tgt.model, hook, arch, expansion, k)
    at = split_step(target)  # RUN@STEP: the SAE of that checkpoint gets its own folder
    step = int(at[1]) if at is not None else None
    folder = out or default_folder(tgt.source, hook, arch, expansion, k, step)
    try:
        result = run_sae(
            tgt.model,
            tgt.codec,
            tgt.source,
            hook,
            folder,
            model_name=tgt.name,
            arch=arch,
            expansion=expansion,
            k=k,
            tokens=tokens,
            seed=seed,
            resume=resume,
            progress=not quiet,
        )
        title = f"SAE: {tgt.name} {hook}"
        report = write_pages(result, tgt.model, tgt.codec, show=show, title=title)
    except KeyboardInterrupt as exc:
        raise stopped_sae(exc, Path(folder)) from None
    data = {
        "target": tgt.name,
        "hook": hook,
        "folder": str(result.paths.root),
        "setting": result.source.setting,
        "training": {
            "tokens": result.trained.tokens,
            "steps": result.trained.steps,
            "seconds": round(result.trained.elapsed_s, 2),
            "resumed_from": result.trained.resumed_from,
        },
        "evals": report["evals"],
        "monosemantic": report["monosemantic"],
        "monosemantic_shuffled": report["monosemantic_shuffled"],
    }
    emit(data, _print_sae, json_out)
    typer.echo(
        f"wrote {result.paths.root} (cfg.json, sae_weights.safetensors, index.html)",
        err=stdout_claimed(),
    )


def stopped_sae(exc: KeyboardInterrupt, folder: Path) -> KeyboardInterrupt:
    """An interrupt of ``sae`` with what was kept in ``folder`` and how to go on (the training
    loop names its own checkpoint)."""
    from interp_toolkit.errors import Interrupted, signal_of
    from interp_toolkit.saes.config import SAEPaths

    if str(exc):
        return exc
    by, signum = signal_of(exc), getattr(exc, "signum", 2)
    paths = SAEPaths(folder)
    if paths.cfg.is_file():
        return Interrupted(
            f"stopped by {by} after training: the SAE is saved in {folder} (cfg.json, "
            "sae_weights.safetensors); its evaluation and pages were not finished: run the same "
            "command with --resume to write them.",
            signum,
        )
    if paths.state.is_file():
        return Interrupted(
            f"stopped by {by}: the SAE's last checkpoint is in {paths.checkpoints}; continue "
            "with the same command and --resume.",
            signum,
        )
    return Interrupted(
        f"stopped by {by} before the SAE's first step: nothing new was saved in {folder}; run "
        "the same command again.",
        signum,
    )


def check_latents(model: Any, hook: str, arch: str, expansion: int, k: int) -> None:
    """``--k`` active latents of at most the SAE's ``expansion`` x the hook's width."""
    from interp_toolkit.saes.activations import check_hook, hook_width
    from interp_toolkit.saes.architectures import sae_architecture

    check_hook(model, hook)
    latents = expansion * hook_width(model, hook)
    if sae_architecture(arch).uses_k and k > latents:
        raise UserError(
            f"--k {k} cannot work: this SAE has {latents} latents ({expansion} x {hook}'s "
            f"width {latents // expansion}); use --k 1 to {latents}, or a larger --expansion."
        )


def _print_sae(data: dict[str, Any]) -> None:
    from rich.table import Table

    from interp_toolkit.views.features import family_columns

    t = Table(title=f"SAE {data['target']} {data['hook']} ({data['setting']})")
    header, rows = family_columns(data["evals"])
    for name in header:
        t.add_column(name)
    for row in rows:
        t.add_row(*(str(v) for v in row))
    blank = [""] * (len(header) - 2)
    for label, key in (
        ("monosemantic latents", "monosemantic"),
        ("monosemantic, shuffled control", "monosemantic_shuffled"),
    ):
        mono = data.get(key)
        if mono is not None:
            t.add_row(label, f"{mono['monosemantic']} of {mono['units'] - mono['dead']}", *blank)
    console().print(t)
