"""Run folders: what training writes and everything else reads. :class:`RunPaths` names every file.

::

    RUN/
      config.json          format version, model config, training and data settings (JSON-safe)
      model.safetensors    weights (no pickle); written when training ends
      vocab.json           the codec (compact vocabulary or full GPT-2)
      metrics.jsonl        one line per logged step (see interp_toolkit.training.metrics)
      checkpoints/         latest resumable state: step_N.safetensors, step_N.optimizer.pt and
                           state.json (written last: it names the step N whose files are whole)
      .lock                held while a training writes the folder (interp_toolkit.files.io.folder_lock)
      snapshots/           step_N.safetensors, for training-dynamics analysis
      samples.json heads.json exam.json circuits.json report.html   analysis outputs
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import (
    LOCK_NAME,
    check_readable,
    file_digest,
    path_kind,
    read_json,
    write_bytes,
    write_json,
)
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.runs import records
from interp_toolkit.runs.hub import read_json_or_none
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.text.codecs import Codec, load_codec, save_codec

FORMAT_VERSION = 1
_SNAPSHOT = re.compile(r"step_(\d+)\.safetensors$")


@dataclass(frozen=True)
class RunPaths:
    """The files of the run folder ``root``: the one place their names are written."""

    root: Path

    config = property(lambda self: self.root / "config.json")
    weights = property(lambda self: self.root / "model.safetensors")
    vocab = property(lambda self: self.root / "vocab.json")
    metrics = property(lambda self: self.root / "metrics.jsonl")
    checkpoints = property(lambda self: self.root / "checkpoints")
    checkpoint_state = property(lambda self: self.checkpoints / "state.json")  # written last
    lock = property(lambda self: self.root / LOCK_NAME)
    snapshots = property(lambda self: self.root / "snapshots")
    saes = property(lambda self: self.root / "saes")  # one folder per SAE (saes/pipeline.py names)
    samples = property(lambda self: self.root / "samples.json")
    heads = property(lambda self: self.root / "heads.json")
    exam = property(lambda self: self.root / "exam.json")
    circuits = property(lambda self: self.root / "circuits.json")
    report = property(lambda self: self.root / "report.html")
    stages = property(lambda self: self.root / "stages.json")  # `stages RUN`: the LLC's stages

    def checkpoint_weights(self, step: int) -> Path:
        return self.checkpoints / f"step_{step}.safetensors"

    def checkpoint_optimizer(self, step: int) -> Path:
        return self.checkpoints / f"step_{step}.optimizer.pt"

    def snapshot(self, step: int) -> Path:
        return self.snapshots / f"step_{step}.safetensors"

    def known(self) -> tuple[Path, ...]:
        """Every file or folder a run folder may hold (what ``train --restart`` may remove)."""
        names = ("config", "weights", "vocab", "metrics", "checkpoints", "snapshots", "samples")
        names += ("heads", "exam", "circuits", "report", "stages", "lock", "saes")
        return tuple(getattr(self, n) for n in names)

    def snapshot_steps(self) -> list[int]:
        """The steps of the kept weights; an entry named like one that is not (``step_03``, a
        folder, a dangling link) is a UserError naming it for what it is."""
        if not self.snapshots.is_dir():
            return []
        steps = []
        for p in sorted(self.snapshots.iterdir()):
            if not (m := _SNAPSHOT.search(p.name)):
                continue
            step = int(m.group(1))
            kind = path_kind(p)
            if p != self.snapshot(step) or kind != "a file":
                what = f"a name training never writes ({self.snapshot(step).name} is)"
                raise UserError(
                    f"{p} is {what if kind == 'a file' else kind}, not a kept snapshot: "
                    "rename or remove it."
                )
            steps.append(step)
        return sorted(steps)


@dataclass
class Run:
    """A trained (or training) model with its vocabulary and settings."""

    path: Path
    model: TransformerBridge
    codec: Codec
    model_cfg: ModelConfig | None  # None: not one of ours (a Hugging Face model in a report)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.path)

    def metrics(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)


def save_weights(model: TransformerBridge, path: Path) -> None:
    """The weights as CPU tensors in safetensors (loadable on any device), written atomically (bytes
    first, so a full disk is an OSError)."""
    from safetensors.torch import save

    state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
    write_bytes(path, save(state))


def read_weights(path: Path, fix: str = "restore it, or retrain the run.") -> dict[str, Any]:
    """The tensors of a safetensors file; an unreadable or damaged file, or one holding a NaN or
    an infinity, is a UserError."""
    from safetensors.torch import load_file

    check_readable(path)
    try:
        state = load_file(str(path))
    except Exception as exc:  # safetensors raises several types for corrupt headers/data
        raise UserError(f"weights file {path} is damaged ({type(exc).__name__}): {fix}") from None
    validate.finite_weights(state.items(), f"weights file {path}", fix)  # never analyse NaNs
    return state


def apply_weights(model: TransformerBridge, state: dict[str, Any], path: Path) -> None:
    """Load ``state`` (read from ``path``) into ``model``, strictly."""
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError(
            f"weights file {path} does not match its config.json ({first}): retrain the run."
        ) from None


def init_run(
    path: str | Path,
    codec: Codec,
    model_cfg: ModelConfig,
    settings: dict[str, Any] | None = None,
    corpus: str | None = None,
) -> RunPaths:
    """Start a run folder: vocab.json and config.json (each atomically); weights come later.
    ``corpus``: the digest of the corpus's tokens it trains on (recorded, with vocab.json's)."""
    paths = RunPaths(Path(path))
    paths.root.mkdir(parents=True, exist_ok=True)
    save_codec(codec, paths.vocab)
    digests = {"vocab": file_digest(paths.vocab), "corpus": corpus}
    write_config(paths, model_cfg, settings or {}, {k: v for k, v in digests.items() if v})
    return paths


def write_config(
    paths: RunPaths,
    model_cfg: ModelConfig,
    settings: dict[str, Any],
    digests: dict[str, str] | None = None,
) -> None:
    """config.json: the format version, the model config, the training settings, the digests of
    the files that make the run (``digests``; else those already recorded: vocab.json, the
    corpus's tokens, model.safetensors once written) and the machine that trains it
    (:func:`~interp_toolkit.runtime.machine.machine_record`)."""
    from interp_toolkit.runtime.machine import machine_record

    write_json(
        paths.config,
        {
            "format_version": FORMAT_VERSION,
            "model": model_cfg.to_dict(),
            "settings": settings,
            "digests": recorded_digests(paths) if digests is None else digests,
            "machine": machine_record().to_dict(),
        },
    )


def recorded_digests(paths: RunPaths) -> dict[str, str]:
    """The digests a run's config.json records ({} for a run from before them)."""
    data = read_json_or_none(paths.config)
    digests = data.get("digests") if isinstance(data, dict) else None
    if not isinstance(digests, dict):
        return {}
    return {k: v for k, v in digests.items() if isinstance(v, str)}


def record_weights(paths: RunPaths) -> None:
    """Record the digest of the run's model.safetensors, just written, in its config.json."""
    data = read_json(paths.config, "run config", "retrain the run.")
    data["digests"] = {**(data.get("digests") or {}), "weights": file_digest(paths.weights)}
    write_json(paths.config, data)


def check_digest(paths: RunPaths, name: str, file: Path, fix: str) -> None:
    """``file`` must be the one config.json recorded as ``name`` (when it recorded one): another
    run's vocab.json or weights copied in is one line, not an answer read with them."""
    recorded = recorded_digests(paths).get(name)
    if recorded and file_digest(file) != recorded:
        raise UserError(
            f"{file} is not the file {paths.root} was trained with (its digest differs from the "
            f"{name} digest config.json records): it was replaced or copied from another run; "
            f"{fix}"
        )


def save_run(
    path: str | Path,
    model: TransformerBridge,
    codec: Codec,
    model_cfg: ModelConfig,
    settings: dict[str, Any] | None = None,
) -> Path:
    """Write config.json, vocab.json and model.safetensors (each atomically)."""
    paths = init_run(path, codec, model_cfg, settings)
    save_weights(model, paths.weights)
    record_weights(paths)
    return paths.root


def read_config(path: str | Path) -> dict[str, Any]:
    paths = RunPaths(Path(path))
    train = f"`interp-toolkit train --out {path}`"
    if paths.root.exists() and not paths.root.is_dir():
        raise UserError(
            f"{path} is a file, not a run folder: give a run folder (train one with {train})."
        )
    if not paths.root.is_dir():
        raise UserError(f"run folder {path} does not exist: train one with {train}.")
    if not paths.config.is_file():
        raise UserError(
            f"{path} is not a run folder (no {paths.config.name}): train one with {train}."
        )
    fix = f"restore it, or train the run again with `interp-toolkit train --restart --out {path}`."
    data = read_json(paths.config, "run config", fix)
    version = data.get("format_version") if isinstance(data, dict) else None
    if isinstance(version, (str, bool)):
        raise UserError(
            f'run config {paths.config} is damaged ("format_version" is {version!r}, not the '
            f"number {FORMAT_VERSION}): {fix}"
        )
    if version != FORMAT_VERSION:
        raise UserError(
            f"{path} was written by another version of interp-toolkit (format {version!r}, "
            f"this one reads {FORMAT_VERSION}): retrain it with this version."
        )
    if not isinstance(data.get("model"), dict) or not isinstance(data.get("settings", {}), dict):
        raise UserError(f'run config {paths.config} is damaged (no "model" section): {fix}')
    return data


def load_run(
    path: str | Path, device: str | torch.device = "auto", weights: str | Path | None = None
) -> Run:
    """Load a run folder onto ``device`` (``auto``: a GPU when present); ``weights`` overrides the
    weights file (e.g. a training snapshot)."""
    paths = RunPaths(Path(path))
    data = read_config(paths.root)
    model_cfg = model_config(data, paths.config)
    weights_path = Path(weights) if weights is not None else paths.weights
    resume = f"finish training with `interp-toolkit train --resume --out {path}`."
    if not weights_path.exists() and not weights_path.is_symlink():
        raise UserError(f"{path} has no trained model ({weights_path.name} missing): {resume}")
    check_readable(weights_path, f"remove it, then {resume}")
    codec = read_codec(paths)
    if codec.d_vocab != model_cfg.d_vocab:
        raise UserError(
            f"{path}: vocab.json has {codec.d_vocab} tokens but the model expects "
            f"{model_cfg.d_vocab}: retrain the run."
        )
    model = build_model(model_cfg, device=resolve_device(device), codec=codec)
    fix = "restore it, or retrain the run."
    if weights is None and paths.checkpoint_state.is_file():
        fix = f"rewrite it from the run's last checkpoint with `interp-toolkit train --resume --out {path}`."
    state = read_weights(weights_path, fix)
    if weights is None:
        check_digest(paths, "weights", weights_path, fix)  # whole, but the run's own?
    apply_weights(model, state, weights_path)
    return Run(paths.root, model.eval(), codec, model_cfg, data.get("settings", {}))


def model_config(data: dict[str, Any], where: Path) -> ModelConfig:
    """The model config of a run's config.json (``data``, read from ``where``)."""
    fix = "restore it, or train the run again."
    try:
        cfg = ModelConfig.from_dict(data["model"])
    except TypeError as exc:
        raise UserError(f"run config {where} is damaged ({exc}): {fix}") from None
    try:
        cfg.validate()  # a field of the wrong type or range (e.g. "embed_init_std": "x")
    except UserError as exc:
        field = str(exc).split(": ")[0].rstrip(".")  # e.g. "embed_init_std='x' cannot work"
        raise UserError(f'run config {where} is damaged ("model": {field}): {fix}') from None
    return cfg


def read_codec(paths: RunPaths) -> Codec:
    """The run's vocabulary (vocab.json); a missing or damaged file is a UserError."""
    fix = f"restore it, or train the run again with `interp-toolkit train --restart --out {paths.root}`."
    if not paths.vocab.exists() and not paths.vocab.is_symlink():
        raise UserError(f"{paths.root} has no {paths.vocab.name}: {fix}")
    codec = load_codec(check_readable(paths.vocab, fix), fix)
    check_digest(paths, "vocab", paths.vocab, fix)  # whole, but the run's own?
    return codec


# ----------------------------------------------------------------- the run's own files, checked


def _facts(root: Path) -> records.RunFacts | None:
    return records.facts_of(read_config(root) if RunPaths(root).config.is_file() else None)


def stamp(run: str | Path) -> dict[str, str]:
    """``{"run_digest": ...}`` for a file ``run`` writes for itself ({} before identities)."""
    facts = _facts(Path(run))
    return {"run_digest": facts.identity} if facts and facts.identity else {}


def metrics_lines(run: str | Path) -> records.MetricsLines:
    """RUN/metrics.jsonl's lines, checked (:func:`~.records.check_metrics`)."""
    file = RunPaths(Path(run)).metrics
    if not file.exists() and not file.is_symlink():
        return records.MetricsLines([], [], 0, None)
    check_readable(file, "remove it: training writes metrics.jsonl itself.")
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    return records.check_metrics(lines, _facts(Path(run)), file)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The whole records of RUN/metrics.jsonl (damaged lines skipped: an unfinished last line
    after a kill; :func:`metrics_damage` names them)."""
    return metrics_lines(path).rows


def metrics_damage(path: str | Path) -> str | None:
    """A sentence naming the lines of RUN/metrics.jsonl that are not whole records, or saying
    the file is missing; None when every line is whole."""
    file = RunPaths(Path(path)).metrics
    if not file.exists():
        return f"{file} is missing: no logged loss or head score is shown."
    return records.damage_sentence(file, metrics_lines(path))


def read_stages(run: str | Path) -> dict[str, Any]:
    """RUN/stages.json, checked (:func:`~.records.check_stages`)."""
    paths = RunPaths(Path(run))
    fix = f"run `interp-toolkit stages {paths.root}` again (without --reuse)."
    if not paths.stages.exists() and not paths.stages.is_symlink():
        raise UserError(f"{paths.root} keeps no stages.json: {fix}")
    data = read_json(check_readable(paths.stages, fix), "a run's stages", fix)
    facts = _facts(paths.root)
    return records.check_stages(data, facts, paths.snapshot_steps(), paths.stages, fix)


def save_samples(run: str | Path, samples: list[dict[str, str]]) -> None:
    """RUN/samples.json: the samples, stamped with the run they belong to."""
    write_json(RunPaths(Path(run)).samples, {**stamp(run), "samples": samples})


def read_samples(path: str | Path) -> list[dict[str, str]]:
    """RUN/samples.json's samples, checked (:func:`~.records.check_samples`); [] when absent."""
    paths = RunPaths(Path(path))
    if not paths.samples.exists() and not paths.samples.is_symlink():
        return []
    fix = "remove it; `interp-toolkit reproduce` writes a run's samples again."
    data = read_json(check_readable(paths.samples, fix), "a run's samples", fix)
    return records.check_samples(data, _facts(paths.root), paths.samples, fix)
