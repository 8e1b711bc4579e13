"""``probe``: linear probes on the residual stream at every layer boundary (a thin shell over
:mod:`interp_toolkit.analysis.probes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from interp_toolkit.cli.app import (
    TARGET_HELP,
    app,
    check_device,
    check_out_file,
    console,
    device_option,
    emit,
    setup_torch,
    wrote,
)
from interp_toolkit.errors import UserError

PROBE_COLUMNS = ("boundary", "accuracy", "control", "selectivity", "majority", "n_train", "n_test")


def probe_csv(data: dict[str, Any]) -> str:
    """One row per boundary, the same field names as the JSON rows."""
    import csv
    import io

    buf = io.StringIO()
    fields = list(data["rows"][0])
    writer = csv.DictWriter(buf, fieldnames=["feature", *fields], lineterminator="\n")
    writer.writeheader()
    for row in data["rows"]:
        writer.writerow({"feature": data["feature"], **row})
    return buf.getvalue()


@app.command("probe")
def probe_cmd(
    target: str = typer.Argument(..., help=TARGET_HELP),
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
    n_seqs: int | None = typer.Option(
        None, "--n-seqs", help="Rows to probe (default: 8,192 positions in all)."
    ),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="Tokens per row (default: the context, at most 128)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the row split, control labels and data."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the results as JSON here."),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write one row per boundary here."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write the accuracy-by-layer plot and table as an HTML page."
    ),
    device: str = device_option(),
) -> None:
    """Probe a feature at every layer boundary: accuracy, control accuracy, selectivity."""
    from interp_toolkit.analysis.heads import HeadId
    from interp_toolkit.analysis.probes import DATA_KINDS, check_feature

    check_feature(feature)
    if data is not None and data not in DATA_KINDS:
        raise UserError(f"--data {data!r} is unknown: use {' or '.join(DATA_KINDS)}.")
    heads = [HeadId.parse(h) for h in ablate or []]
    for path, flag, example in (
        (json_out, "--json", "probe.json"),
        (csv_out, "--csv", "probe.csv"),
    ):
        check_out_file(path, flag, example)
    check_out_file(out, "--out", "probe.html")
    check_device(device)
    setup_torch()
    from interp_toolkit.analysis.probe_data import corpus_of
    from interp_toolkit.analysis.probes import probe
    from interp_toolkit.io import write_text
    from interp_toolkit.targets import load_target

    tgt = load_target(target, device, for_weights=False)
    corpus, val_fraction = corpus_of(tgt.source)
    result = probe(
        tgt.model,
        tgt.codec,
        feature,
        data=data,
        corpus=corpus,
        val_fraction=val_fraction,
        n_seqs=n_seqs,
        seq_len=seq_len,
        seed=seed,
        ablate=heads,
    )
    payload = {"target": tgt.name, **result.to_dict()}
    emit(payload, _print_probe, json_out)
    if csv_out:
        write_text(csv_out, probe_csv(payload))
        wrote(csv_out)
    if out:
        from interp_toolkit.views.page import render_report
        from interp_toolkit.views.probes import probe_section

        write_text(out, render_report([probe_section([result])], title=f"Probe: {tgt.name}"))
        wrote(out)


def _print_probe(data: dict[str, Any]) -> None:
    from rich.table import Table

    info = data["data"]
    ablated = f"; ablated {', '.join(data['ablated'])}" if data["ablated"] else ""
    table = Table(
        title=f"{data['target']}: {data['feature']} ({info['source']}, {info['n_rows']} rows x "
        f"{info['seq_len']}{ablated})"
    )
    for col in PROBE_COLUMNS:
        table.add_column(col, justify="left" if col == "boundary" else "right")
    for row in data["rows"]:
        table.add_row(
            *(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c]) for c in PROBE_COLUMNS)
        )
    out = console()
    out.print(table)
    out.print(
        f"{data['feature']}: {data['definition']}. Probe: {data['probe']}. Control: "
        f"{data['control']}. Held-out rows: {info['test_fraction']:.0%}.",
        soft_wrap=True,
    )
