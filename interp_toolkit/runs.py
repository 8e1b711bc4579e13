"""Run folders: what training writes and everything else reads.

::

    RUN/
      config.json          format version, model config, training and data settings (JSON-safe)
      model.safetensors    weights (no pickle)
      vocab.json           the codec (compact vocabulary or full GPT-2)
      metrics.jsonl        one line per logged step (see interp_toolkit.training)
      checkpoints/         latest resumable state; snapshots/step_N.safetensors for dynamics
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.io import write_json, write_with
from interp_toolkit.models import AttnOnlyConfig, build_model
from interp_toolkit.tokenizer import CompactVocab, GPT2Codec, load_codec, save_codec

FORMAT_VERSION = 1
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
VOCAB = "vocab.json"
METRICS = "metrics.jsonl"


@dataclass
class Run:
    """A trained (or training) model with its vocabulary and settings."""

    path: Path
    model: TransformerBridge
    codec: CompactVocab | GPT2Codec
    model_cfg: AttnOnlyConfig
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    def metrics(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)


def save_weights(model: TransformerBridge, path: Path) -> None:
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    write_with(path, lambda tmp: save_file(state, str(tmp)))


def load_weights(model: TransformerBridge, path: Path) -> None:
    """Load safetensors weights into ``model`` (strict); corrupt files raise UserError."""
    from safetensors.torch import load_file

    try:
        state = load_file(str(path))
    except Exception as exc:  # safetensors raises several types for corrupt headers/data
        raise UserError(
            f"weights file {path} is corrupt ({type(exc).__name__}): retrain the run or restore the file."
        ) from None
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError(
            f"weights file {path} does not match its config.json ({first}): retrain the run."
        ) from None


def save_run(
    path: str | Path,
    model: TransformerBridge,
    codec: CompactVocab | GPT2Codec,
    model_cfg: AttnOnlyConfig,
    settings: dict[str, Any] | None = None,
) -> Path:
    """Write config.json, model.safetensors and vocab.json (each atomically)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_codec(codec, path / VOCAB)
    save_weights(model, path / WEIGHTS)
    write_json(
        path / CONFIG,
        {
            "format_version": FORMAT_VERSION,
            "model": model_cfg.to_dict(),
            "settings": settings or {},
        },
    )
    return path


def read_config(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_dir():
        raise UserError(
            f"run folder {path} does not exist: train one with `interp-toolkit train --out {path}`."
        )
    cfg_path = path / CONFIG
    if not cfg_path.is_file():
        raise UserError(
            f"{path} is not a run folder (no {CONFIG}): train one with `interp-toolkit train --out {path}`."
        )
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        raise UserError(f"{cfg_path} is not valid JSON: retrain the run.") from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != FORMAT_VERSION:
        raise UserError(
            f"{path} was written by another version of interp-toolkit (format {version!r}, "
            f"this one reads {FORMAT_VERSION}): retrain it with this version."
        )
    return data


def load_run(path: str | Path, device: str = "cpu", weights: str | Path | None = None) -> Run:
    """Load a run folder; ``weights`` overrides the weights file (e.g. a training snapshot)."""
    path = Path(path)
    data = read_config(path)
    model_cfg = AttnOnlyConfig.from_dict(data["model"])
    weights_path = Path(weights) if weights is not None else path / WEIGHTS
    if not weights_path.is_file():
        raise UserError(
            f"{path} has no trained model ({weights_path.name} missing): "
            f"finish training with `interp-toolkit train --resume --out {path}`."
        )
    if not (path / VOCAB).is_file():
        raise UserError(f"{path} has no {VOCAB}: retrain the run.")
    codec = load_codec(path / VOCAB)
    if codec.d_vocab != model_cfg.d_vocab:
        raise UserError(
            f"{path}: vocab.json has {codec.d_vocab} tokens but the model expects "
            f"{model_cfg.d_vocab}: retrain the run."
        )
    model = build_model(model_cfg, device=device, codec=codec)
    load_weights(model, weights_path)
    return Run(
        path=path,
        model=model.eval(),
        codec=codec,
        model_cfg=model_cfg,
        settings=data.get("settings", {}),
    )


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The metrics.jsonl lines of a run folder (an unfinished last line is skipped)."""
    file = Path(path) / METRICS
    if not file.is_file():
        return []
    rows = []
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
