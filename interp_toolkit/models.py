"""Small transformers built with TransformerLens 4.x (``TransformerBridge.boot_native``).

One config dataclass (:class:`AttnOnlyConfig`) describes the architecture; :func:`build_model` turns
it into a ``TransformerBridge``. By default: attention only, no LayerNorm, learned absolute
positions (or rotary), exactly what the seed study trains. With ``mlp=True`` each block also has
an MLP (``d_mlp`` neurons, ``act_fn``), and ``normalization="LN"`` adds TransformerLens's pre-norm
LayerNorms (before attention, before the MLP, and before the unembedding): the "model kind" a
run folder records in config.json (``mlp``, ``normalization``; folders written before these
fields existed load as attention-only, no norm).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch
from transformer_lens import TransformerBridge, TransformerBridgeConfig

from interp_toolkit.errors import UserError
from interp_toolkit.tl_tokenizer import attach_tokenizer
from interp_toolkit.tokenizer import CompactVocab, GPT2Codec

Positional = Literal["standard", "rotary"]
Normalization = Literal["LN"]
ACT_FNS = ("gelu", "relu")


@dataclass(frozen=True)
class AttnOnlyConfig:
    """Architecture of an attention-only transformer.

    ``embed_init_std``: when set, token and positional embeddings are re-drawn N(0, std²) after
    TransformerLens's own init (its default, N(0, 0.8/√d_model), keeps attention near-uniform for
    a long time and delays induction heads; see README "The CPU recipe").

    ``mlp``: add an MLP to every block (``d_mlp`` neurons, default 4 * d_model; ``act_fn`` "gelu"
    (exact, erf) or "relu"). ``normalization``: None (no norm) or "LN" (pre-norm LayerNorm).
    """

    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    n_ctx: int
    d_vocab: int
    positional: Positional = "standard"
    embed_init_std: float | None = 1.0
    seed: int = 0
    mlp: bool = False
    d_mlp: int | None = None
    act_fn: str = "gelu"
    normalization: Normalization | None = None

    @property
    def mlp_width(self) -> int:
        """Neurons per MLP (0 for an attention-only model)."""
        return (self.d_mlp or 4 * self.d_model) if self.mlp else 0

    def validate(self) -> None:
        for name in ("n_layers", "d_model", "n_heads", "d_head", "n_ctx", "d_vocab"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise UserError(f"{name}={value!r} cannot work: it must be a positive integer.")
        if self.n_ctx < 4:
            raise UserError(f"n_ctx={self.n_ctx} cannot work: use a context of at least 4 tokens.")
        if self.n_heads * self.d_head != self.d_model:
            raise UserError(
                f"d_model={self.d_model} cannot work with {self.n_heads} heads of {self.d_head}: "
                f"make d_model = n_heads * d_head ({self.n_heads * self.d_head})."
            )
        if self.positional not in ("standard", "rotary"):
            raise UserError(
                f"positional={self.positional!r} is not supported: use 'standard' or 'rotary'."
            )
        if self.positional == "rotary" and self.d_head % 2:
            raise UserError(f"rotary positions need an even d_head, got {self.d_head}.")
        if self.d_mlp is not None and (not isinstance(self.d_mlp, int) or self.d_mlp < 1):
            raise UserError(f"d_mlp={self.d_mlp!r} cannot work: it must be a positive integer.")
        if self.act_fn not in ACT_FNS:
            raise UserError(f"act_fn={self.act_fn!r} is not supported: use {' or '.join(ACT_FNS)}.")
        if self.normalization not in (None, "LN"):
            raise UserError(
                f"normalization={self.normalization!r} is not supported: use 'LN' or none."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttnOnlyConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def replace(self, **changes: Any) -> AttnOnlyConfig:
        return dataclasses.replace(self, **changes)


def tl_config(cfg: AttnOnlyConfig) -> TransformerBridgeConfig:
    """The ``TransformerBridgeConfig`` for ``cfg``."""
    return TransformerBridgeConfig(
        d_model=cfg.d_model,
        d_head=cfg.d_head,
        n_heads=cfg.n_heads,
        n_layers=cfg.n_layers,
        n_ctx=cfg.n_ctx,
        d_vocab=cfg.d_vocab,
        attn_only=not cfg.mlp,
        d_mlp=cfg.mlp_width or 4 * cfg.d_model,
        act_fn=cfg.act_fn,
        normalization_type=cfg.normalization,
        positional_embedding_type=cfg.positional,
        seed=cfg.seed,
        init_mode="gpt2",
        default_prepend_bos=False,
    )


def build_model(
    cfg: AttnOnlyConfig,
    device: str | torch.device = "cpu",
    codec: CompactVocab | GPT2Codec | None = None,
) -> TransformerBridge:
    """A freshly initialised ``TransformerBridge`` (eval mode, deterministic in ``cfg.seed``).

    With ``codec`` the model carries its tokenizer (:func:`~interp_toolkit.tl_tokenizer.attach_tokenizer`:
    ``to_tokens``, ``generate``, ``detect_head``... work); without one it takes token ids only.
    """
    cfg.validate()
    model = TransformerBridge.boot_native(tl_config(cfg), device=device, dtype=torch.float32)
    _draw_embeddings(model, cfg)
    if codec is not None:
        attach_tokenizer(model, codec)
    return model.eval()


def reinitialise(model: TransformerBridge, cfg: AttnOnlyConfig) -> TransformerBridge:
    """Draw every weight of ``model`` (built by :func:`build_model` with ``cfg``'s architecture)
    again, in place, exactly as ``build_model(cfg)`` draws them for ``cfg.seed``: a fresh model
    without booting a new bridge (what the untrained null models of analysis/ reuse)."""
    from transformer_lens.model_bridge.sources.native import initialize_native_model

    initialize_native_model(model.original_model, model.cfg, seed=cfg.seed)
    _draw_embeddings(model, cfg)
    return model


def _draw_embeddings(model: TransformerBridge, cfg: AttnOnlyConfig) -> None:
    if cfg.embed_init_std is None:
        return
    gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    with torch.no_grad():
        for param in embedding_parameters(model):
            param.copy_(torch.randn(param.shape, generator=gen) * cfg.embed_init_std)


def embedding_parameters(model: TransformerBridge) -> list[torch.nn.Parameter]:
    """Token (and learned positional) embedding weights of a native model, as live parameters."""
    params = [model.embed.original_component.weight]
    if hasattr(model, "pos_embed"):
        params.append(model.pos_embed.original_component.weight)
    return params


def n_params(model: TransformerBridge) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
