"""Small transformers built with TransformerLens 4.x (``TransformerBridge.boot_native``).

One config dataclass (:class:`ModelConfig`) describes the architecture; :func:`build_model` turns
it into a ``TransformerBridge``. By default: attention only, no LayerNorm, learned absolute
positions (or rotary, or shortformer: learned positions that enter only queries and keys), exactly
what the post trains. With ``mlp=True`` each block also has
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
from torch.nn.modules import module as torch_module
from transformer_lens import TransformerBridge, TransformerBridgeConfig

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.tl_tokenizer import attach_tokenizer

Positional = Literal["standard", "rotary", "shortformer"]
POSITIONALS = ("standard", "rotary", "shortformer")
Normalization = Literal["LN"]
ACT_FNS = ("gelu", "relu")


@dataclass(frozen=True)
class ModelConfig(Jsonable):
    """Architecture of a transformer: attention-only by default, or with an MLP and LayerNorm in
    every block (``mlp``; the name was ``AttnOnlyConfig`` before the MLP fields came, and stays
    importable under it).

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
            if not validate.is_whole(value) or value < 1:
                raise UserError(f"{name}={value!r} cannot work: it must be a positive integer.")
        validate.number(self.embed_init_std, "embed_init_std", above=0, optional=True)
        validate.seed(self.seed)
        validate.flag(self.mlp, "mlp")
        if self.n_ctx < 4:
            raise UserError(f"n_ctx={self.n_ctx} cannot work: use a context of at least 4 tokens.")
        if self.n_heads * self.d_head != self.d_model:
            raise UserError(
                f"d_model={self.d_model} cannot work with {self.n_heads} heads of {self.d_head}: "
                f"make d_model = n_heads * d_head ({self.n_heads * self.d_head})."
            )
        if not isinstance(self.positional, str) or self.positional not in POSITIONALS:
            raise UserError(
                f"positional={self.positional!r} is not supported: use "
                f"{', '.join(map(repr, POSITIONALS))}."
            )
        if self.positional == "rotary" and self.d_head % 2:
            raise UserError(f"rotary positions need an even d_head, got {self.d_head}.")
        if self.d_mlp is not None and (not validate.is_whole(self.d_mlp) or self.d_mlp < 1):
            raise UserError(f"d_mlp={self.d_mlp!r} cannot work: it must be a positive integer.")
        if not isinstance(self.act_fn, str) or self.act_fn not in ACT_FNS:
            raise UserError(f"act_fn={self.act_fn!r} is not supported: use {' or '.join(ACT_FNS)}.")
        if self.normalization not in (None, "LN"):
            raise UserError(
                f"normalization={self.normalization!r} is not supported: use 'LN' or none."
            )

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)


def tl_config(cfg: ModelConfig) -> TransformerBridgeConfig:
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
        # shortformer: TL's learned positions, re-routed by install_shortformer
        positional_embedding_type="rotary" if cfg.positional == "rotary" else "standard",
        seed=cfg.seed,
        init_mode="gpt2",
        default_prepend_bos=False,
    )


def build_model(
    cfg: ModelConfig, device: str | torch.device = "cpu", codec: Codec | None = None
) -> TransformerBridge:
    """A freshly initialised ``TransformerBridge`` (eval mode, deterministic in ``cfg.seed``).

    With ``codec`` the model carries its tokenizer (:func:`~interp_toolkit.text.tl_tokenizer.attach_tokenizer`:
    ``to_tokens``, ``generate``, ``detect_head``... work); without one it takes token ids only.
    """
    cfg.validate()
    model = TransformerBridge.boot_native(tl_config(cfg), device=device, dtype=torch.float32)
    _draw_embeddings(model, cfg)
    if cfg.positional == "shortformer":
        install_shortformer(model)
    if codec is not None:
        attach_tokenizer(model, codec)
    return model.eval()


def reinitialise(model: TransformerBridge, cfg: ModelConfig) -> TransformerBridge:
    """Draw every weight of ``model`` (built by :func:`build_model` with ``cfg``'s architecture)
    again, in place, exactly as ``build_model(cfg)`` draws them for ``cfg.seed``: a fresh model
    without booting a new bridge (what the untrained null models of analysis/ reuse)."""
    from transformer_lens.model_bridge.sources.native import initialize_native_model

    initialize_native_model(model.original_model, model.cfg, seed=cfg.seed)
    _draw_embeddings(model, cfg)
    return model


def _draw_embeddings(model: TransformerBridge, cfg: ModelConfig) -> None:
    if cfg.embed_init_std is None:
        return
    gen = rng(cfg.seed, "embedding_init")
    params = [model.embed.original_component.weight]  # token and learned positional embeddings
    if hasattr(model, "pos_embed"):
        params.append(model.pos_embed.original_component.weight)
    with torch.no_grad():
        for param in params:
            param.copy_(torch.randn(param.shape, generator=gen) * cfg.embed_init_std)


# Shortformer positions (Press et al. 2021; Olsson et al. 2022's small models; TransformerLens's
# HookedTransformer "shortformer"): the learned position embedding is added to the input of every
# layer's query and key projections, and never to the residual stream, so values (and whatever a
# head moves) carry no position. TL 4.3's native model offers only "standard" and "rotary", so a
# shortformer model is TL's standard model with two kinds of permanent torch hooks:
#
# - on ``hook_pos_embed`` (``pos_embed.hook_out``): the residual gets zeros instead of W_pos;
# - on each layer's ``attn.q.hook_out`` and ``attn.k.hook_out`` (``hook_q``/``hook_k``): the
#   projection's output gains ``W_pos[:seq] @ W^T``, which makes it ``W (x + W_pos) + b``.
#
# The q/k hooks sit on the projections' *outputs* because every path TL has fires them: the
# plain forward, the fused-attention training step (training/sdpa.py calls the same projection
# modules), and the per-head fork of ``use_split_qkv_input`` (which skips the projections' input
# hooks). They are raw torch hooks, registered first, so TL's ``reset_hooks`` (even
# ``including_permanent=True``) leaves them, and a user's hook on hook_q/hook_k/hook_pos_embed
# sees the queries, keys and residual input the model really uses. The hooks hold no closure:
# each hook point carries a plain attribute naming its embedding and projection, which
# ``copy.deepcopy`` maps to the copy's own modules. Positions are 0..seq-1 (no position_ids).


@dataclass(frozen=True)
class _QKPositions:
    """What one q/k projection's output hook adds: ``positions.weight[:seq] @ projection.weight^T``."""

    positions: torch.nn.Embedding
    projection: torch.nn.Linear


def _zero_positions(_module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(output)


def _add_positions(module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
    src: _QKPositions = module.__dict__["_shortformer"]
    seq = output.shape[1]
    pos = torch.nn.functional.linear(src.positions.weight[:seq], src.projection.weight)
    return output + pos.reshape((1, seq, *output.shape[2:])).to(output.dtype)


def install_shortformer(model: TransformerBridge) -> None:
    """Make ``model`` (a native bridge with learned positions) a shortformer model, in place (see
    the comment above). Done by :func:`build_model` for ``positional="shortformer"``."""
    if is_shortformer(model):
        return
    pos_point = model.pos_embed.hook_out
    pos_point.__dict__["_shortformer"] = True
    pos_point.register_forward_hook(_zero_positions, prepend=True)
    embedding = model.pos_embed.original_component
    for block in model.blocks:
        for name in ("q", "k"):
            linear = getattr(block.attn, name)
            point = linear.hook_out
            point.__dict__["_shortformer"] = _QKPositions(embedding, linear.original_component)
            point.register_forward_hook(_add_positions, prepend=True)


def qk_positions(q: torch.nn.Module, k: torch.nn.Module) -> torch.nn.Embedding | None:
    """The positions a shortformer adds to the queries and keys, when its hooks are all that
    the query and key projections (TransformerLens ``LinearBridge`` modules) carry: then a
    caller may compute ``(x + positions) @ W`` itself (training's fused attention); else None
    (not a shortformer, or something else hooks a projection: it must run through its hooks)."""
    found = []
    for linear in (q, k):
        out, inp = getattr(linear, "hook_out", None), getattr(linear, "hook_in", None)
        src = out.__dict__.get("_shortformer") if out is not None else None
        if not isinstance(src, _QKPositions) or inp is None:
            return None
        if list(out._forward_hooks.values()) != [_add_positions] or any(
            hooked(m, besides=_add_positions) for m in (out, inp, linear)
        ):
            return None
        found.append(src.positions)
    return found[0] if found[0] is found[1] else None


_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def hooked(module: torch.nn.Module, besides: Any = None) -> bool:
    """Whether a torch hook would see ``module``'s value: one of its own (forward or backward, pre
    or post; ``besides`` excepted), or a global module hook."""
    own = [getattr(module, name) for name in _HOOKS]
    every = [getattr(torch_module, "_global" + name) for name in _HOOKS]
    return any(hook is not besides for hooks in own + every for hook in hooks.values())


def is_shortformer(model: TransformerBridge) -> bool:
    """Whether ``model`` carries shortformer positions (:func:`install_shortformer`)."""
    pos = getattr(model, "pos_embed", None)
    return pos is not None and "_shortformer" in pos.hook_out.__dict__


def positional_kind(model: TransformerBridge) -> str:
    """``model``'s positional scheme: "shortformer", or TL's ``positional_embedding_type``."""
    if is_shortformer(model):
        return "shortformer"
    return str(getattr(model.cfg, "positional_embedding_type", None) or "standard")


#: The earlier name (notebooks and scripts written before MLP models).
AttnOnlyConfig = ModelConfig
