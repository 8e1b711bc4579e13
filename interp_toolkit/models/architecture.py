"""What a model's architecture does that changes what an analysis reads, and the notes saying so.

Every analysis reads hooks and weights TransformerLens names the same way on every architecture
(``hook_pattern``, ``hook_v``, ``W_Q`` ...), but some facts change what a score means:

- grouped- or multi-query attention: several query heads share one key/value head; ``hook_v``,
  ``W_K`` and ``W_V`` have one entry per K/V head, read per query head
  (:func:`~interp_toolkit.models.activations.per_query_head`);
- rotary positions: no ``W_pos``, positions enter only the queries and keys, rotated;
- LayerNorm or RMSNorm (folded into the weights for weight-based reads: RMSNorm is not centred);
- parallel attention and MLP (GPT-J, GPT-NeoX, Phi): the MLP reads the layer input;
- a norm after the attention (Gemma 2): the heads' summed output is rescaled per position before
  the residual add, so a head's write is not additive;
- attention logits soft-capped (Gemma 2), the output logits soft-capped;
- sliding-window attention (Mistral, Gemma 2's local layers): a key further back than the window
  gets no attention;
- tied embeddings (``W_U = W_E^T``).

:func:`architecture_of` reads them from the bridge (and the ``transformers`` config under it);
:meth:`Architecture.notes` gives the sentences a command prints where a score means something
different.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformer_lens import TransformerBridge

from interp_toolkit.files.serialize import Jsonable, json_field

#: What each command says about which architecture facts (the keys of ``Architecture.notes``).
COMMANDS = ("heads", "copying", "circuit")
#: How far inside a sliding window the default probe keeps its furthest key: the induction and
#: duplicate keys (lags period - 1 and period) and the rival keys beside them (a few more).
WINDOW_MARGIN = 4


@dataclass(frozen=True)
class Architecture(Jsonable):
    """The facts of one model's architecture that analyses must know (module docstring)."""

    name: str = field(metadata=json_field(key="architecture"))
    n_heads: int
    n_kv_heads: int
    positional: str  # "learned", "rotary" or "none"
    normalization: str | None  # "LN", "RMS" or None
    parallel: bool = field(metadata=json_field(key="parallel_attn_mlp"))
    post_attention_norm: bool
    tied_embeddings: bool
    attn_soft_cap: float | None
    logit_soft_cap: float | None
    windows: tuple[int | None, ...]  # per layer: keys it attends back at most (None: all)

    @property
    def grouped(self) -> bool:
        return self.n_kv_heads != self.n_heads

    @property
    def smallest_window(self) -> int | None:
        return min((w for w in self.windows if w is not None), default=None)

    def notes(self, command: str, *, period: int | None = None) -> list[str]:
        """Where a score of ``command`` (one of :data:`COMMANDS`) means something different on
        this architecture, one sentence each (none for a plain GPT-2-like model). ``period``: the
        probe's period (``heads``), to say whether a window hides its keys."""
        out: list[str] = []
        if self.grouped:
            share = f"{self.n_heads // self.n_kv_heads} query heads share each of {self.n_kv_heads}"
            read = {
                "heads": "each query head is scored on its own pattern; the value-weighted score "
                "weighs it by its shared value vectors",
                "copying": "each query head's OV and QK circuits use its shared value and key weights",
                "circuit": "edges into K and V are per query head (the model is read with its K/V "
                "heads copied to one per query head, the same outputs)",
            }[command]
            out.append(f"grouped-query attention ({share} key/value heads): {read}")
        windows = [i for i, w in enumerate(self.windows) if w is not None]
        if windows and command in ("heads", "circuit"):
            w, many = self.smallest_window, len(windows) > 1
            assert w is not None
            reach = "keeps its keys inside it"
            if period is not None and period + WINDOW_MARGIN > w:
                reach = "reaches past it there, so induction reads 0"
            hidden = "" if period is None else f"; the probe's period {period} {reach}"
            out.append(
                f"sliding-window attention: layer{'s' if many else ''} "
                f"{', '.join(map(str, windows))} attend{'' if many else 's'} to the last {w} "
                f"tokens only{hidden}"
            )
        if self.positional == "rotary" and command in ("copying", "circuit"):
            out.append(
                "rotary positions: there is no W_pos (no positional QK score), and QK or "
                "composition read off the weights leave out the rotation, so they say what "
                "tokens match, not where"
            )
        if self.post_attention_norm and command in ("copying", "circuit"):
            live = "; edges from heads are its write under the live scale"
            out.append(
                "a norm after the attention (post-attention RMSNorm) rescales the heads' summed "
                "output per position: a head's OV circuit here leaves that scale out"
                + (live if command == "circuit" else "")
            )
        if self.parallel and command == "circuit":
            out.append(
                "parallel attention and MLP: a layer's MLP reads the layer input, so no edge "
                "runs from a layer's heads to its own MLP"
            )
        if self.attn_soft_cap and command in ("heads", "copying"):
            read = {
                "heads": "patterns are read after the cap, as the model computes them",
                "copying": "the QK circuit gives the logits before the cap",
            }[command]
            out.append(f"attention logits are soft-capped ({self.attn_soft_cap:g} tanh): {read}")
        if self.normalization == "RMS" and command == "copying":
            out.append("RMSNorm's scales are folded into the weights (RMSNorm does not centre)")
        if self.logit_soft_cap and command == "copying":
            out.append(
                f"output logits are soft-capped ({self.logit_soft_cap:g} tanh): copy ranks "
                "read the logits before it (a monotone map: ranks are the same)"
            )
        return out


def architecture_of(model: TransformerBridge) -> Architecture:
    """The :class:`Architecture` of a bridge (a native toy model or a ``transformers`` model)."""
    cfg = model.cfg
    n_layers, n_heads = int(cfg.n_layers), int(cfg.n_heads)
    hf = getattr(model, "original_model", None)
    hf_cfg = getattr(hf, "config", None)
    n_kv = getattr(cfg, "n_key_value_heads", None) or n_heads
    positional = str(getattr(cfg, "positional_embedding_type", "standard"))
    positional = {"standard": "learned", "rotary": "rotary"}.get(positional, positional)
    norm = getattr(cfg, "normalization_type", None)
    norm = "RMS" if norm and "RMS" in str(norm) else ("LN" if norm else None)
    attn_cap = float(getattr(cfg, "attn_scores_soft_cap", -1.0) or -1.0)
    logit_cap = float(getattr(cfg, "output_logits_soft_cap", -1.0) or -1.0)
    name = type(hf).__name__ if hf_cfg is not None else str(getattr(cfg, "architecture", "native"))
    return Architecture(
        name=name,
        n_heads=n_heads,
        n_kv_heads=int(n_kv),
        positional=positional,
        normalization=norm,
        parallel=bool(getattr(cfg, "parallel_attn_mlp", False)),
        post_attention_norm=_post_attention_norm(model),
        tied_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", False)),
        attn_soft_cap=attn_cap if attn_cap > 0 else None,
        logit_soft_cap=logit_cap if logit_cap > 0 else None,
        windows=_windows(hf_cfg, n_layers),
    )


def _post_attention_norm(model: TransformerBridge) -> bool:
    """Whether a block normalises the attention's output before the residual add (the block's
    ``hook_attn_out`` reads a norm after the attention: TL names it ``ln1_post``)."""
    for block in getattr(model, "blocks", ()):
        aliases = getattr(block, "hook_aliases", None)
        target = aliases.get("hook_attn_out") if isinstance(aliases, dict) else None
        names = [target] if isinstance(target, str) else list(target or [])
        if any(n.split(".", 1)[0] not in ("attn",) for n in names[:1]):
            return True
    return False


def _windows(hf_cfg: Any, n_layers: int) -> tuple[int | None, ...]:
    """Per layer, the sliding window of a ``transformers`` config (None: full attention)."""
    window = getattr(hf_cfg, "sliding_window", None)
    if hf_cfg is None or not window or getattr(hf_cfg, "use_sliding_window", True) is False:
        return (None,) * n_layers
    kinds = getattr(hf_cfg, "layer_types", None)
    if kinds:
        return tuple(int(window) if "sliding" in str(k) else None for k in kinds[:n_layers])
    return (int(window),) * n_layers
