"""``train`` and ``sample``: a thin shell over :mod:`interp_toolkit.training` and sampling."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer

from interp_toolkit.cli.app import app, check_device, device_option
from interp_toolkit.errors import UserError


@app.command("train")
def train_cmd(
    out: Path = typer.Option(
        ..., "--out", help="Run folder to create (or continue with --resume)."
    ),
    layers: int | None = typer.Option(
        None,
        "--layers",
        help="Number of layers, any whole number from 1 (default 2; the study trains 1, 2, 3, 8).",
    ),
    preset: str | None = typer.Option(
        None,
        "--preset",
        help="cpu (minutes on a laptop CPU; the default), text (plain text, no synthetic "
        "windows; see docs/recipes.md) or post (the post's recipe; GPU; earlier named seed).",
    ),
    steps: int | None = typer.Option(
        None,
        "--steps",
        help="Train exactly this many optimizer steps (default: the preset's budget, stopping "
        "once induction has formed; see --all-steps).",
    ),
    all_steps: bool = typer.Option(
        False,
        "--all-steps",
        help="Train the preset's whole budget. Without it (and without --steps) a 2+-layer "
        "model stops as a study's does: once its induction score has stayed above the floor "
        "for the preset's after-induction steps (the first line printed says how many).",
    ),
    corpus: str | None = typer.Option(
        None,
        "--corpus",
        help="stdlib | text file or folder | .parquet/.jsonl/save_to_disk PATH[#COLUMN] | "
        "hf:NAME[:SPLIT] (default: stdlib).",
    ),
    seed: int | None = typer.Option(None, "--seed", help="Seed for init and data order."),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Override the context length."),
    d_model: int | None = typer.Option(
        None, "--d-model", help="Override d_model (n_heads * d_head)."
    ),
    vocab_size: int | None = typer.Option(
        None, "--vocab-size", help="Override the compact vocabulary size."
    ),
    repeat_fraction: float | None = typer.Option(
        None,
        "--repeat-fraction",
        help="Share of every batch made of repeated-span windows, 0..1 (0 = plain text; "
        "default: the preset's).",
    ),
    mlp: bool = typer.Option(
        False, "--mlp", help="Add an MLP (4 x d_model GELU neurons) and LayerNorm to every block."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the run in --out from its last checkpoint, as it was configured "
        "(--steps may change its length; other options must match it).",
    ),
    restart: bool = typer.Option(
        False, "--restart", help="Discard the run in --out (says what goes) and train it anew."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
    device: str = device_option(),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="fp32 (default), tf32 (TF32 matmuls; CUDA only, ignored on CPUs) or bf16 (bf16 "
        "autocast on GPUs and CPUs, float32 weights and loss; + TF32 on CUDA); config.json "
        "records what applied.",
    ),
) -> None:
    """Train a transformer (attention-only, or with --mlp) into a run folder.

    On N processes or GPUs: torchrun --nproc_per_node N -m interp_toolkit train ... (the global
    batch is the preset's; see the README)."""
    from interp_toolkit.training import train_model
    from interp_toolkit.training.distributed import cluster_from_env
    from interp_toolkit.training.presets import (
        get_preset,
        recorded_preset,
        until_induction,
        with_overrides,
    )
    from interp_toolkit.training.steplog import planned_steps

    if steps is not None and all_steps:
        raise UserError(
            "--steps and --all-steps both say how long to train: give one (--all-steps: the "
            "preset's whole budget)."
        )
    if repeat_fraction is not None and not 0.0 <= repeat_fraction <= 1.0:
        raise UserError(
            f"--repeat-fraction {repeat_fraction} is not a share: give a number from 0 (plain "
            "text) to 1 (only repeated-span windows)."
        )
    if resume:  # what the run was trained with: options given must match it (train_model checks)
        p = recorded_preset(out)
        if mlp and not p.model.mlp:
            raise UserError(f"{out} was trained without --mlp: resume it without, or --restart.")
        if preset is not None:
            p = get_preset(preset, p.model.n_layers, mlp=mlp or p.model.mlp)
    else:
        p = get_preset(
            "cpu" if preset is None else preset, 2 if layers is None else layers, mlp=mlp
        )
    changes: dict[str, object] = {
        "n_layers": layers,
        "steps": steps,
        "corpus": corpus,
        "n_ctx": n_ctx,
        "vocab_size": vocab_size,
        "repeat_fraction": repeat_fraction,
        "precision": precision,
    }
    if seed is not None:
        changes["seed"] = seed
    changes["d_model"] = d_model  # d_head (and d_mlp) follow in with_overrides, as in the API
    p = with_overrides(p, **changes)
    if not resume and steps is None and not all_steps:
        p = until_induction(p)
    if not quiet and cluster_from_env().is_main and not resume:
        typer.echo(
            f"training: {p.model.n_layers} layer(s), {planned_steps(p.train)}, preset {p.name}",
            err=True,
        )
    result = train_model(
        out,
        p.model,
        p.data,
        p.train,
        resume=resume,
        restart=restart,
        preset=p.name,
        progress=not quiet,
        device=device,
    )
    if not cluster_from_env().is_main:
        return
    from interp_toolkit.heads.registry import SCORE

    last = result.metrics[-1] if result.metrics else {}
    floor = SCORE["induction"].floor
    typer.echo(
        f"trained {out} to step {result.steps_done} in {result.elapsed_s:.0f}s: "
        f"loss {last.get('loss', float('nan')):.3f}; first layer>=1 induction head > {floor:g} at "
        "step "
        f"{result.first_induction_step if result.first_induction_step is not None else 'never'}"
    )
    from interp_toolkit.training.presets import induction_outcome

    outcome = induction_outcome(p, result.metrics, result.steps_done)
    if outcome is not None:
        typer.echo(f"note: {outcome}")


@app.command("sample")
def sample_cmd(
    run: Path = typer.Argument(..., help="Run folder."),
    prompt: str = typer.Option(
        "", "--prompt", help="Text to continue (empty: start from <|endoftext|>)."
    ),
    tokens: int = typer.Option(
        40,
        "--tokens",
        help="How many tokens to generate (printed as they come; Ctrl-C stops, keeping the text).",
    ),
    temperature: float = typer.Option(1.0, "--temperature", help="0 = greedy."),
    top_k: int | None = typer.Option(
        None, "--top-k", help="Sample only among the k most likely tokens."
    ),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    device: str = device_option(),
) -> None:
    """Generate text from a trained run, printed as it comes (a progress bar on standard error
    when standard output is not a terminal)."""
    import sys

    check_device(device)
    from interp_toolkit.errors import Interrupted
    from interp_toolkit.models.sampling import decode_stream, sample_ids
    from interp_toolkit.runs.folder import load_run
    from interp_toolkit.runtime.progress import progress_bar

    r = load_run(run, device=device)
    ids = sample_ids(
        r.model, r.codec, prompt, n_tokens=tokens, temperature=temperature, top_k=top_k, seed=seed
    )
    from interp_toolkit.stats.thresholds import UNKNOWN_NOTICE_SHARE
    from interp_toolkit.text.codecs import describe_vocab, unknown_share

    if prompt and (share := unknown_share(r.codec, r.codec.encode(prompt))) > UNKNOWN_NOTICE_SHARE:
        print(
            f"warning: {share:.0%} of the prompt's tokens are <unk> to this model (it knows "
            f"{describe_vocab(r.codec)}): it continues from <unk>, not from those words.",
            file=sys.stderr,
            flush=True,
        )
    bar = progress_bar(
        total=tokens,
        unit="tok",
        desc="sampling",
        enabled=not sys.stdout.isatty(),
        leave=False,
        delay=1.0,
    )

    def counted() -> Iterator[int]:
        for i in ids:
            bar.update()
            yield i

    sys.stdout.write(prompt)
    try:
        for piece in decode_stream(r.codec, counted()):
            sys.stdout.write(piece)
            sys.stdout.flush()
    except KeyboardInterrupt:
        raise Interrupted(
            f"stopped after {bar.n} of {tokens} tokens (the text so far is above)."
        ) from None
    finally:
        bar.close()
        sys.stdout.write("\n")
        sys.stdout.flush()
