"""Latents of an attention SAE that belong to heads with a role (Kissane et al. 2024's
induction and previous-token features), found by rules that a random dictionary fails.

A latent **belongs to** a set of heads when the heads' slices hold more of its unit decoder row
(:func:`~.features.head_shares`, summed) than :data:`MAJORITY` and than a random direction gives
them at the 99th percentile (:func:`head_share_null`: with 3 of 4 equal slices a random direction
already gives them 0.75 on average, so "mostly" has to beat that).

- **Induction latents** (:func:`induction_latents`): belong to the layer's induction heads, their
  top positions hold a repeat concept (``seen`` or ``in_repeat``: :attr:`~interp_toolkit.units.
  reading.Concept.holds`, the monosemanticity rule without its lift, since a repeat concept covers
  most positions of a curriculum row and so cannot be rare), and on rows of repeated random tokens (one repeated segment per row, at a random
  place) have at least :data:`SECOND_COPY` of their top-20 positions in the second copy, beyond
  its share of all positions (binomial p <= 0.01; :func:`second_copy_share`).
- **Previous-token latents** (:func:`previous_token_latents`): belong to the layer's
  previous-token heads and are monosemantic with the concept "the previous token is v".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.probing.data import VariedRepeats
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.saes.features import TOP_K, LatentFeatures, latent_activations
from interp_toolkit.saes.sae import SparseAutoencoder
from interp_toolkit.stats.intervals import binomial_tail
from interp_toolkit.stats.thresholds import MAJORITY, MONO_ALPHA, NULL_QUANTILE, SECOND_COPY


def head_share_null(
    n_heads: int, d_head: int, heads: Sequence[int], *, n: int = 4096, seed: int = 0
) -> float:
    """The 99th percentile of the share ``heads`` hold of a random unit direction in the
    concatenated ``[n_heads * d_head]`` space."""
    gen = rng(seed, "head_share_null")
    w = torch.randn(n, n_heads, d_head, generator=gen).pow(2).sum(-1)
    share = w[:, list(heads)].sum(-1) / w.sum(-1)
    return float(torch.quantile(share, NULL_QUANTILE))


def belongs(feats: LatentFeatures, heads: Sequence[int], d_head: int) -> Tensor:
    """[latent] bool: the heads hold a majority of the decoder row, beyond chance."""
    if feats.head_share is None or not heads:
        return torch.zeros(feats.n_latents, dtype=torch.bool)
    n_heads = feats.head_share.shape[1]
    floor = max(MAJORITY, head_share_null(n_heads, d_head, heads))
    return feats.head_share[:, list(heads)].sum(-1) > floor


def second_copy_share(
    model: TransformerBridge,
    sae: SparseAutoencoder,
    repeats: VariedRepeats,
    latents: Sequence[int],
    k: int = TOP_K,
) -> tuple[Float[Tensor, " latent"], Float[Tensor, " latent"]]:
    """(share of each latent's top-``k`` positions on the repeat rows that lie in the second
    copy, binomial p of that share against the second copy's share of all positions)."""
    if not latents:
        return torch.zeros(0), torch.ones(0)
    acts = latent_activations(model, sae, repeats.tokens)[..., list(latents)]  # [n, pos, l]
    second = repeats.second_copy().reshape(-1)
    top = acts.reshape(-1, len(latents)).topk(k, dim=0)
    live = top.values > 0
    hits = (second[top.indices] & live).sum(0)
    base = float(second.float().mean())
    p = torch.tensor([binomial_tail(int(h), k, base) for h in hits.tolist()])
    return hits.float() / k, p


@dataclass(frozen=True)
class RoleLatents:
    """Latents found for a role, with what decided: the heads, their share floor, and per
    latent its heads' share (and second-copy share for induction)."""

    role: str
    heads: tuple[int, ...]
    floor: float
    latents: tuple[int, ...]
    head_share: tuple[float, ...]
    second_copy: tuple[float, ...] = ()


def induction_latents(
    model: TransformerBridge,
    sae: SparseAutoencoder,
    feats: LatentFeatures,
    heads: Sequence[int],
    repeats: VariedRepeats,
) -> RoleLatents:
    """The induction latents of an attention SAE (module docstring); ``heads``: the layer's
    induction heads (head indices)."""
    d_head = sae.cfg.d_in // feats.head_share.shape[1] if feats.head_share is not None else 1
    mine = belongs(feats, heads, d_head)
    cands = [
        i
        for i in range(feats.n_latents)
        if mine[i] and feats.concepts[i].holds and feats.concepts[i].kind in ("seen", "in_repeat")
    ]
    copy, p = second_copy_share(model, sae, repeats, cands)
    keep = [
        i
        for i, c, q in zip(cands, copy.tolist(), p.tolist(), strict=True)
        if c >= SECOND_COPY and q <= MONO_ALPHA
    ]
    return _found("induction", feats, heads, d_head, keep, copy, cands)


def previous_token_latents(
    sae: SparseAutoencoder, feats: LatentFeatures, heads: Sequence[int]
) -> RoleLatents:
    """The previous-token latents of an attention SAE (module docstring)."""
    d_head = sae.cfg.d_in // feats.head_share.shape[1] if feats.head_share is not None else 1
    mine = belongs(feats, heads, d_head)
    keep = [
        i
        for i in range(feats.n_latents)
        if mine[i] and feats.concepts[i].monosemantic and feats.concepts[i].kind == "previous"
    ]
    return _found("previous-token", feats, heads, d_head, keep)


def _found(
    role: str,
    feats: LatentFeatures,
    heads: Sequence[int],
    d_head: int,
    keep: list[int],
    copy: Tensor | None = None,
    cands: list[int] | None = None,
) -> RoleLatents:
    n_heads = feats.head_share.shape[1] if feats.head_share is not None else 1
    floor = max(MAJORITY, head_share_null(n_heads, d_head, heads)) if heads else 1.0
    shares = (
        tuple(float(feats.head_share[i, list(heads)].sum()) for i in keep)
        if feats.head_share is not None
        else ()
    )
    second = ()
    if copy is not None and cands is not None:
        at = dict(zip(cands, copy.tolist(), strict=True))
        second = tuple(at[i] for i in keep)
    return RoleLatents(role, tuple(heads), floor, tuple(keep), shares, second)
