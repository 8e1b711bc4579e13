"""``probe``: linear probes on the residual stream at every layer boundary (a thin shell over
:mod:`interp_toolkit.probing.probes`)."""

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

#: The table's columns: (header, value key, interval key or None).
PROBE_COLUMNS = (
    ("boundary", "boundary", None),
    ("balanced acc", "balanced", "balanced_ci"),
    ("control", "control", "control_ci"),
    ("selectivity", "selectivity", "selectivity_ci"),
    ("untrained", "untrained", "untrained_ci"),
    ("chance", "chance", None),
    ("decodable", "decodable", None),
    ("beyond untrained", "beyond_untrained", None),
)


def probe_csv(data: dict[str, Any]) -> str:
    """One row per boundary, the same field names as the JSON rows (an interval ``x_ci`` as
    ``x_lo`` and ``x_hi``)."""
    import csv
    import io

    def flat(row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in row.items():
            if key.endswith("_ci"):
                lo, hi = value if value is not None else (None, None)
                out[f"{key[:-3]}_lo"], out[f"{key[:-3]}_hi"] = lo, hi
            else:
                out[key] = value
        return out

    rows = [flat(r) for r in data["rows"]]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["feature", *rows[0]], lineterminator="\n")
    writer.writeheader()
    for row in rows:
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
    dtype: str = dtype_option(),
) -> None:
    """Probe a feature at every layer boundary: balanced accuracy, the control task on the
    feature's own input, selectivity and an untrained model of the same architecture, each with
    its 95% interval."""
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.probing.probes import DATA_KINDS, check_feature

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
    check_dtype(dtype)
    setup_torch()
    from interp_toolkit.files.io import write_text
    from interp_toolkit.probing.data import corpus_of
    from interp_toolkit.probing.probes import probe
    from interp_toolkit.runs.targets import load_target

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
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
        model_cfg=tgt.model_cfg,
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


def _cell(row: dict[str, Any], key: str, ci_key: str | None) -> str:
    value = row[key]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if not isinstance(value, float):
        return str(value)
    ci = row.get(ci_key) if ci_key else None
    return f"{value:.3f}" + (f"\n[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _print_probe(data: dict[str, Any]) -> None:
    from rich.table import Table

    info = data["data"]
    ablated = f"; ablated {', '.join(data['ablated'])}" if data["ablated"] else ""
    table = Table(
        title=f"{data['target']}: {data['feature']} ({info['source']}, {info['n_rows']} rows x "
        f"{info['seq_len']}{ablated}); balanced accuracy on held-out rows, 95% intervals"
    )
    for header, *_ in PROBE_COLUMNS:
        table.add_column(header, justify="left" if header == "boundary" else "right")
    for row in data["rows"]:
        table.add_row(*(_cell(row, key, ci) for _, key, ci in PROBE_COLUMNS))
    out = console()
    out.print(table)
    untrained = (
        f"Untrained: {data['untrained']} (seed {info['untrained_seed']})."
        if info.get("untrained_seed") is not None
        else "Untrained: not measured (this model cannot be rebuilt)."
    )
    out.print(
        f"{data['feature']}: {data['definition']}; its input: {data['input']}. Probe: "
        f"{data['probe']}. Control: {data['control']}. Selectivity: {data['selectivity']}. "
        f"{untrained} Decodable: {data['decodable']}. Held-out rows: {info['test_fraction']:.0%}.",
        soft_wrap=True,
    )
