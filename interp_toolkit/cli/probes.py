"""``probe``: parses its options, calls :func:`interp_toolkit.commands.units.probe` and prints
what :mod:`interp_toolkit.reports.terminal_units` renders of it."""

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
    n_seqs_option,
    out_option,
    outputs,
    save,
    seed_option,
    target_argument,
)


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
