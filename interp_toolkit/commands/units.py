"""``probe``, ``neurons`` and ``sae``: what a model's layers hold, each as the JSON its command
writes and the page or folder it asked for."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.probing.options import ProbeOptions
from interp_toolkit.probing.probes import ProbeResult
from interp_toolkit.runs import targets
from interp_toolkit.saes.evaluate import SAEEvals
from interp_toolkit.saes.options import SAEOptions
from interp_toolkit.saes.train import TrainedSAE
from interp_toolkit.units.neurons import DEFINITION, LayerNeurons, LayerSummary, NeuronRecord
from interp_toolkit.units.options import NeuronOptions
from interp_toolkit.units.reading import RuleCount


@dataclass(frozen=True)
class Probed(Jsonable):
    """``probe``'s result: the probe at every boundary (its JSON written into the record) and
    its page when asked for."""

    target: str
    result: ProbeResult = field(metadata=json_field(inline=True))
    page: str | None = field(default=None, metadata=json_field(skip=True))


@dataclass(frozen=True)
class Windows(Jsonable):
    """The rows a layer's neurons were read on: text windows of ``corpus``."""

    corpus: str
    rows: int
    seq_len: int


@dataclass(frozen=True)
class Neurons(Jsonable):
    """``neurons``' result: the layer's statistics three ways, the definitions, every neuron's
    record, the ones the table shows and the layer's finding in words; ``layer`` and ``labels``
    (its token ids' labels) for the table; the page when asked for."""

    target: str
    data: Windows
    summary: LayerSummary
    definition: dict[str, object]
    neurons: list[NeuronRecord]
    shown: list[int]
    finding: str
    layer: LayerNeurons = field(metadata=json_field(skip=True))
    labels: dict[int, str] = field(metadata=json_field(skip=True))
    page: str | None = field(default=None, metadata=json_field(skip=True))


@dataclass(frozen=True)
class SAEFolder(Jsonable):
    """``sae``'s result: the SAE trained at ``hook``, where it lives, how training went, its
    metrics and its latents' rule counts (and the shuffled control's)."""

    target: str
    hook: str
    folder: Path
    setting: str
    training: TrainedSAE
    evals: SAEEvals
    monosemantic: RuleCount
    monosemantic_shuffled: RuleCount


def probe(
    target: str,
    options: ProbeOptions,
    *,
    page: bool = False,
    device: str = "auto",
    dtype: str = "fp32",
) -> Probed:
    """A linear probe of ``options.feature`` at every layer boundary, with its control task,
    selectivity and an untrained twin (``data``: text or repeats; ``ablate``: heads
    mean-ablated)."""
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.probing.data import corpus_of
    from interp_toolkit.probing.probes import probe as run_probe

    heads = [HeadId.parse(h) for h in options.ablate or []]
    tgt = targets.load_target(target, device, for_weights=False, dtype=dtype)
    corpus, val_fraction = corpus_of(tgt.source)
    result = run_probe(
        tgt.model,
        tgt.codec,
        options.feature,
        data=options.data,
        corpus=corpus,
        val_fraction=val_fraction,
        n_seqs=options.n_seqs,
        seq_len=options.seq_len,
        seed=options.seed,
        ablate=heads,
        model_cfg=tgt.model_cfg,
    )
    html = None
    if page:
        from interp_toolkit.views.page import render_report
        from interp_toolkit.views.probes import probe_section

        html = render_report([probe_section([result])], title=f"Probe: {tgt.name}")
    return Probed(tgt.name, result, html)


def neurons(
    target: str,
    options: NeuronOptions,
    *,
    page: bool = False,
    device: str = "auto",
    dtype: str = "fp32",
) -> Neurons:
    """Every neuron of an MLP layer: top contexts, promoted tokens and concepts, each beside the
    untrained twin's and a shuffled control's; the table shows the neurons chosen or the
    ``show`` highest-firing."""
    from interp_toolkit.probing.data import corpus_of, neuron_windows
    from interp_toolkit.reports.layer_findings import neuron_sentence
    from interp_toolkit.reports.neurons import neuron_labels, neuron_page, shown_neurons
    from interp_toolkit.units.neurons import analyse_neurons, check_layers, untrained_twin

    layer, seed, chosen = options.layer, options.seed, options.neuron
    tgt = targets.load_target(target, device, dtype=dtype)
    check_layers(tgt.model, [layer])
    d_mlp = int(tgt.model.cfg.d_mlp)
    if bad := [n for n in chosen or [] if not 0 <= n < d_mlp]:
        raise UserError(f"--neuron {bad[0]} does not exist: layer {layer} has 0..{d_mlp - 1}.")
    corpus, _ = corpus_of(tgt.source)
    tokens = neuron_windows(tgt.codec, tgt.n_ctx, tgt.source, seed=seed, n_seqs=options.n_seqs)
    twin = untrained_twin(tgt.model, tgt.model_cfg)
    (info,) = analyse_neurons(tgt.model, tokens, [layer], k=options.top, seed=seed, untrained=twin)
    picks = shown_neurons(info, chosen, options.show)
    labels = neuron_labels(tgt.codec, info)
    html = None
    if page:
        title = f"Neurons: {tgt.name}"
        html = neuron_page(
            tgt.model, tgt.codec, tokens, info, picks, labels, title=title, name=tgt.name
        )
    windows, definition = Windows(corpus, *tokens.shape), {**DEFINITION, "k": info.k}
    finding, records = neuron_sentence(tgt.name, info), info.records(labels)
    return Neurons(
        tgt.name, windows, info.summary(), definition, records, picks, finding, info, labels, html
    )


def sae(
    target: str,
    options: SAEOptions,
    *,
    out: Path | None = None,
    device: str = "auto",
    dtype: str = "fp32",
) -> SAEFolder:
    """Train an SAE at ``options.hook`` into ``out`` (a run's own ``saes/`` folder by default),
    evaluate it with SAELens's metrics and write its pages; ``folder``: where it lives."""
    from interp_toolkit.reports.features import write_pages
    from interp_toolkit.runs.hub import is_hf_spec
    from interp_toolkit.runs.spec import split_step
    from interp_toolkit.saes.config import check_shape, hook_layer
    from interp_toolkit.saes.pipeline import default_folder, run_sae

    # blocks.01. is blocks.1.
    hook = ".".join(["blocks", str(hook_layer(options.hook)), *options.hook.split(".")[2:]])
    o = replace(options, hook=hook)
    if out is None and is_hf_spec(target):
        raise UserError(
            "an SAE of a Hugging Face model needs a folder to live in: give --out FOLDER."
        )
    if out is not None:
        from interp_toolkit.files.io import check_writable_dir

        if out.exists() and not out.is_dir():
            raise UserError(f"--out {out} is a file: give a folder for the SAE.")
        check_writable_dir(out if out.is_dir() else out.parent, "--out folder")
    check_shape(o.arch, o.k, o.expansion)  # the registry's checks (saes/architectures.py)
    tgt = targets.load_target(target, device, for_weights=False, dtype=dtype)
    at = split_step(target)  # RUN@STEP: the SAE of that checkpoint gets its own folder
    step = int(at[1]) if at is not None else None
    folder = out or default_folder(tgt.source, hook, o.arch, o.expansion, o.k, step)
    try:
        result = run_sae(tgt.model, tgt.codec, tgt.source, folder, o, model_name=tgt.name)
        title = f"SAE: {tgt.name} {hook}"
        report = write_pages(result, tgt.model, tgt.codec, show=options.show, title=title)
    except KeyboardInterrupt as exc:
        raise stopped_sae(exc, Path(folder)) from None
    return SAEFolder(
        tgt.name,
        hook,
        Path(result.paths.root),
        result.source.setting,
        result.trained,
        report.evals,
        report.monosemantic,
        report.monosemantic_shuffled,
    )


def stopped_sae(exc: KeyboardInterrupt, folder: Path) -> KeyboardInterrupt:
    """An interrupt of ``sae`` with what was kept in ``folder`` and how to go on (the training
    loop names its own checkpoint)."""
    from interp_toolkit.errors import Interrupted, signal_of
    from interp_toolkit.saes.config import SAEPaths

    if str(exc):
        return exc
    by, paths = signal_of(exc), SAEPaths(folder)
    if paths.cfg.is_file():
        said = (
            f"stopped by {by} after training: the SAE is saved in {folder} (cfg.json, "
            "sae_weights.safetensors); its evaluation and pages were not finished: run the same "
            "command with --resume to write them."
        )
    elif paths.state.is_file():
        said = (
            f"stopped by {by}: the SAE's last checkpoint is in {paths.checkpoints}; continue "
            "with the same command and --resume."
        )
    else:
        said = (
            f"stopped by {by} before the SAE's first step: nothing new was saved in {folder}; run "
            "the same command again."
        )
    return Interrupted(said, getattr(exc, "signum", 2))
