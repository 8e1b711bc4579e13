"""What every target kind loads: a model and the codec that turns text into its token ids."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from transformer_lens import TransformerBridge

from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import Run
from interp_toolkit.text.codecs import Codec


@dataclass
class Target:
    """A model to analyse. ``source``: the :class:`~interp_toolkit.runs.folder.Run` of a toy model; the
    folder (or hub id) a GPT-2 came from."""

    name: str
    kind: str
    model: TransformerBridge
    codec: Codec
    source: Run | Path | str | None = None

    @property
    def n_ctx(self) -> int:
        return int(self.model.cfg.n_ctx)

    @property
    def model_cfg(self) -> ModelConfig | None:
        """The toy model's config (what the untrained null models rebuild); None for other kinds."""
        return self.source.model_cfg if isinstance(self.source, Run) else None
