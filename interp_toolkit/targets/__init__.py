"""Resolve what a CLI argument names: a toy run folder or a GPT-2 model (hub name or HF folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from transformer_lens import TransformerBridge

from interp_toolkit.tokenizer import CompactVocab, GPT2Codec


@dataclass
class Target:
    """A model to analyse, with the codec that turns text into its token ids."""

    name: str
    kind: Literal["toy", "gpt2"]
    model: TransformerBridge
    codec: CompactVocab | GPT2Codec
    source: Any = None  # the Run for toy models

    @property
    def n_ctx(self) -> int:
        return int(self.model.cfg.n_ctx)


def load_target(spec: str | Path, device: str = "cpu", *, for_weights: bool = True) -> Target:
    """``spec`` is a run folder, a GPT-2 hub name (``gpt2``, ``gpt2-medium``…) or a saved HF folder.

    ``for_weights=False`` (commands that only read activations: ``heads``, ``exam``, ``view``) loads
    GPT-2 without TL's compatibility mode: attention patterns and every head score are the same,
    and GPT-2 small peaks at ~0.8 GiB instead of ~2.5 GiB (see docs/gpt2.md).
    """
    from interp_toolkit import gpt2
    from interp_toolkit.runs import load_run

    if gpt2.is_gpt2_spec(spec):
        return gpt2.load_target(spec, device=device, compat=for_weights)
    run = load_run(spec, device=device)
    return Target(name=run.name, kind="toy", model=run.model, codec=run.codec, source=run)
