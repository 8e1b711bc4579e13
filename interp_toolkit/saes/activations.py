"""Activations for an SAE, streamed from the model through hooks a block at a time (never the
whole set in memory).

- :class:`TokenSource`: the rows an SAE reads, as a function of a block index. A toy run's are
  its own training mix (:class:`~interp_toolkit.text.stream.TrainStream` over its corpus's training
  split, the same share of repeated-span windows, seeded by the SAE's seed); a GPT-2's are
  plain-text windows of the embedded corpus (``stdlib``). The held-out rows (evaluation, top
  contexts) come the same way from the corpus's *held-out* split, with another seed.
- :func:`block_activations`: one block's activations at a hook, ``[rows * pos, d_in]``; the
  forward pass stops after the hook's layer. ``blocks.L.attn.hook_z`` is ``[b, pos, head,
  d_head]`` and is read with all heads concatenated (``d_in = n_heads * d_head``, the
  attention-SAE setting of Kissane et al. 2024; SAELens's ``reshape_activations="hook_z"``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.heads.repeats import default_token_range
from interp_toolkit.models.activations import MAX_SEQ, run_hooks
from interp_toolkit.runs.folder import Run
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.stream import TrainStream, setting_name, tokenize_corpus, windows

#: Bytes of activations one forward chunk may hold.
CHUNK_BYTES = 64 * 2**20
_HOOK = re.compile(r"^blocks\.(\d+)\.(attn\.hook_z|hook_resid_pre|hook_resid_post|mlp\.hook_post)$")


def check_hook(model: TransformerBridge, hook: str) -> None:
    """One line for a hook an SAE cannot read on this model."""
    m = _HOOK.match(hook)
    n = int(model.cfg.n_layers)
    if not m:
        raise UserError(
            f"--hook {hook!r} is not offered: use blocks.L.attn.hook_z, blocks.L.hook_resid_pre, "
            f"blocks.L.hook_resid_post or blocks.L.mlp.hook_post (L in 0..{n - 1})."
        )
    if not 0 <= int(m.group(1)) < n:
        raise UserError(f"--hook {hook}: layer {m.group(1)} does not exist, use 0..{n - 1}.")
    if m.group(2) == "mlp.hook_post" and bool(getattr(model.cfg, "attn_only", False)):
        raise UserError(
            f"--hook {hook}: this model is attention-only, it has no MLP (train one with --mlp)."
        )


def hook_width(model: TransformerBridge, hook: str) -> int:
    """``d_in`` of an SAE at ``hook``."""
    cfg = model.cfg
    if hook.endswith("attn.hook_z"):
        return int(cfg.n_heads) * int(cfg.d_head)
    if hook.endswith("mlp.hook_post"):
        return int(cfg.d_mlp)
    return int(cfg.d_model)


@dataclass
class TokenSource:
    """The rows an SAE trains on (``train.batch(block)``) and the held-out rows."""

    train: TrainStream
    heldout: TrainStream
    corpus: str
    setting: str  # "natural text" | "curriculum" (data.setting_name)
    seq_len: int

    def heldout_rows(self, n: int) -> Int[Tensor, "n pos"]:
        """The first ``n`` held-out rows (a fixed, seeded draw)."""
        return torch.stack([self.heldout.sample(i) for i in range(n)])

    def heldout_families(self, n: int) -> dict[str, Bool[Tensor, " n"]]:
        """Which of the first ``n`` held-out rows are text windows (``"text"``) and which are
        synthetic repeated-span windows (``"synthetic"``): in every batch of the stream the first
        ``n_repeat`` rows are synthetic (:class:`~interp_toolkit.text.stream.TrainStream`).
        Families with no row are left out."""
        rows = torch.arange(n) % self.heldout.batch_size
        synthetic = rows < self.heldout.n_repeat
        families = {"text": ~synthetic, "synthetic": synthetic}
        return {k: v for k, v in families.items() if bool(v.any())}


def token_source(
    codec: Codec, n_ctx: int, source: object, *, rows_per_block: int, seed: int = 0
) -> TokenSource:
    """Where an SAE's tokens come from (module docstring): ``source`` is the target's
    :class:`~interp_toolkit.runs.folder.Run` (its data settings), or anything else (GPT-2: stdlib)."""
    data = source.settings.get("data", {}) if isinstance(source, Run) else {}
    corpus = str(data.get("corpus", "stdlib"))
    repeat = float(data.get("repeat_fraction", 0.0))
    seq = min(int(n_ctx), MAX_SEQ)
    split = tokenize_corpus(
        corpus,
        float(data.get("val_fraction", 0.02)),
        data.get("max_tokens"),
        progress=False,
        store=codec.store,
    )
    train_w, val_w = windows(split.train_ids, codec, seq), windows(split.val_ids, codec, seq)
    if len(val_w) == 0 or (len(train_w) == 0 and repeat < 1.0):
        raise UserError(
            f"corpus {corpus!r} is too short for an SAE: it needs training and held-out windows "
            f"of {seq} tokens; use a larger corpus."
        )
    low, high = default_token_range(codec)
    span_min = int(data.get("span_min", 2))
    span_max = min(int(data.get("span_max") or seq // 2), seq // 2)

    def stream(win: object, s: int) -> TrainStream:
        return TrainStream(
            win,
            batch_size=rows_per_block,
            repeat_fraction=repeat,
            low=low,
            high=min(high, int(codec.d_vocab)),
            span_min=min(span_min, span_max),
            span_max=span_max,
            seed=s,
        )

    return TokenSource(
        train=stream(train_w, seed),
        heldout=stream(val_w, 10_007 + seed),
        corpus=corpus,
        setting=setting_name(repeat),
        seq_len=seq,
    )


def read_hook(
    model: TransformerBridge, tokens: Int[Tensor, "b pos"], hook: str
) -> Float[Tensor, "m d_in"]:
    """The activations of ``tokens`` at ``hook``, flattened to ``[b * pos, d_in]`` (heads
    concatenated for ``hook_z``; one forward pass, stopped there)."""
    got: list[Tensor] = []
    run_hooks(model, tokens, [hook], lambda _, a: got.append(a))
    return got[0].reshape(got[0].shape[0] * got[0].shape[1], -1)


def stream_activations(
    model: TransformerBridge, tokens: Int[Tensor, "n pos"], hook: str
) -> Iterator[tuple[int, Float[Tensor, "m d_in"]]]:
    """``(first row, activations)`` of ``tokens`` at ``hook`` chunk by chunk (row-major: row
    ``r``, position ``p`` is entry ``(r - first) * pos + p``)."""
    rows = max(1, CHUNK_BYTES // (4 * int(tokens.shape[1]) * hook_width(model, hook)))
    for lo in range(0, len(tokens), rows):
        yield lo, read_hook(model, tokens[lo : lo + rows], hook)


def block_activations(
    model: TransformerBridge, source: TokenSource, hook: str, block: int
) -> Float[Tensor, "n d_in"]:
    """All activations of training block ``block`` (its rows, every position)."""
    return torch.cat([a for _, a in stream_activations(model, source.train.batch(block), hook)])
