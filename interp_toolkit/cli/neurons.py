"""``neurons``: what each MLP neuron of a layer fires on, what it promotes, and how that compares
with its baselines (a thin shell over :mod:`interp_toolkit.units.neurons` and
:mod:`interp_toolkit.reports.neurons`)."""

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


@app.command("neurons")
def neurons_cmd(
    target: str = typer.Argument(..., help=TARGET_HELP),
    layer: int = typer.Option(..., "--layer", "-l", help="The MLP layer to read."),
    top: int = typer.Option(20, "--top", help="Top-activating positions kept per neuron."),
    neuron: list[int] | None = typer.Option(
        None, "--neuron", help="Show this neuron (repeatable; default: the highest-firing)."
    ),
    show: int = typer.Option(16, "--show", help="How many neurons the table and page show."),
    n_seqs: int | None = typer.Option(
        None, "--n-seqs", help="Held-out rows to read (default: 16,384 positions in all)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out rows and the threshold."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Write every neuron's contexts and promoted tokens as JSON here."
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Write an offline page: the table and the top contexts."
    ),
    device: str = device_option(),
    dtype: str = dtype_option(),
) -> None:
    """Top contexts, promoted tokens and concepts of every neuron of an MLP layer, each statistic
    beside the untrained twin's and a shuffled-activation control's."""
    if top < 1 or show < 1:
        raise UserError("--top and --show must be 1 or more.")
    check_out_file(json_out, "--json", "neurons.json")
    check_out_file(out, "--out", "neurons.html")
    check_device(device)
    check_dtype(dtype)
    setup_torch()
    from interp_toolkit.files.io import write_text
    from interp_toolkit.probing.data import corpus_of, neuron_windows
    from interp_toolkit.reports.layer_findings import neuron_sentence
    from interp_toolkit.reports.neurons import (
        labels_for,
        neuron_page,
        neuron_report,
        shown_neurons,
    )
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.units.neurons import analyse_neurons, check_layers, untrained_twin
    from interp_toolkit.views.neurons import neuron_rows

    tgt = load_target(target, device, dtype=dtype)
    check_layers(tgt.model, [layer])
    d_mlp = int(tgt.model.cfg.d_mlp)
    bad = [n for n in neuron or [] if not 0 <= n < d_mlp]
    if bad:
        raise UserError(f"--neuron {bad[0]} does not exist: layer {layer} has 0..{d_mlp - 1}.")
    corpus, _ = corpus_of(tgt.source)
    tokens = neuron_windows(tgt.codec, tgt.n_ctx, tgt.source, seed=seed, n_seqs=n_seqs)
    seq_len = int(tokens.shape[1])
    twin = untrained_twin(tgt.model, tgt.model_cfg)
    (info,) = analyse_neurons(tgt.model, tokens, [layer], k=top, seed=seed, untrained=twin)
    picks = shown_neurons(info, neuron, show)
    data = {"target": tgt.name, "data": {"corpus": corpus, "rows": len(tokens), "seq_len": seq_len}}
    data |= neuron_report(info, tgt.codec)
    data["shown"] = picks
    data["finding"] = neuron_sentence(tgt.name, info)
    ids = info.top_tokens[picks].reshape(-1).tolist() + info.promoted[picks].reshape(-1).tolist()
    rows = neuron_rows(info, labels_for(tgt.codec, ids), picks)
    emit(data, lambda d: _print_neurons(d, rows), json_out)
    if out:
        title = f"Neurons: {tgt.name}"
        page = neuron_page(tgt.model, tgt.codec, tokens, info, picks, title=title, name=tgt.name)
        write_text(out, page)
        wrote(out)


def _print_neurons(data: dict[str, Any], rows: list[list[object]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from interp_toolkit.views.neurons import NEURON_HEADER

    s, d = data["summary"], data["definition"]
    model = s["model"]
    table = Table(
        title=f"{data['target']} layer {s['layer']}: {s['neurons']} neurons; "
        f"{model['monosemantic']} monosemantic, {model['dead']} dead"
    )
    for col in NEURON_HEADER:
        table.add_column(col)
    for row in rows:
        table.add_row(*(escape(str(c)) for c in row))
    out = console()
    out.print(table)
    out.print(data["finding"], soft_wrap=True, markup=False)
    out.print(
        f"monosemantic: {d['monosemantic']} (k = {d['k']}). promotes: {d['promoted']}.",
        soft_wrap=True,
        markup=False,
    )
