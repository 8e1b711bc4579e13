"""MLP neurons: what makes each fire, which tokens it writes towards, and how polysemantic it is.

For the neurons of layer ``L`` (activation ``blocks.L.mlp.hook_post``, after the nonlinearity):

- **Top contexts** (:func:`top_activations`): each neuron's ``k`` largest activations over every
  position of the given rows (held-out text by default), found by a streaming top-k over chunks of
  rows: only ``[neuron, k]`` values and indices are kept, never all activations.
- **Promoted tokens** (the "value" side, Geva et al. 2021): the largest entries of
  ``W_out[n] @ W_U`` on the weights with LayerNorm folded (:func:`~.circuits.circuit_model`: the
  final LN's weight folded into ``W_U``, writing weights centred; the final LN's per-position
  scale is ignored, as usual).
- **Polysemanticity** (:func:`polysemanticity`): the number of *unrelated token groups* among the
  tokens at the neuron's top-k positions. Each top position's weight is its activation (clipped
  at 0); token types are grouped by single linkage, two types being *related* when the cosine
  similarity of their centred embeddings (``W_E`` rows minus the mean row) is at least
  ``sim_threshold``: the 99th percentile of that similarity over 20,000 random pairs of distinct
  token ids of the same model (so "related" means more alike than 99% of random pairs). The
  measure is the number of groups that carry at least ``min_share`` (10%) of the top-k weight.
  A neuron that fires on one token, or on one group of related tokens, scores 1; on two unrelated
  groups, 2. ``entropy`` (bits) of the weight over token types is reported beside it: it counts a
  group of related tokens as many, so it is not the measure. A neuron whose top activations are
  all <= 0 scores 0 (dead). The measure reads the token at the top position only, not its context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.analysis.activations import run_hooks
from interp_toolkit.analysis.circuits import circuit_model
from interp_toolkit.errors import UserError

CHUNK_BYTES = 128 * 2**20
SIM_QUANTILE = 0.99
MIN_SHARE = 0.1


def hook_post(layer: int) -> str:
    return f"blocks.{layer}.mlp.hook_post"


def check_layers(model: TransformerBridge, layers: Sequence[int]) -> None:
    if bool(getattr(model.cfg, "attn_only", False)):
        raise UserError(
            "this model is attention-only: it has no MLP neurons (train one with --mlp)."
        )
    n = int(model.cfg.n_layers)
    bad = [la for la in layers if not 0 <= la < n]
    if bad or not layers:
        raise UserError(f"layer {bad[0] if bad else '?'} does not exist: use 0..{n - 1}.")


@dataclass
class TopActivations:
    """Each neuron's ``k`` largest activations (descending) and where: ``rows``, ``positions``."""

    values: Float[torch.Tensor, "neuron k"]
    rows: Int[torch.Tensor, "neuron k"]
    positions: Int[torch.Tensor, "neuron k"]


def top_activations(
    model: TransformerBridge, tokens: Int[torch.Tensor, "n pos"], layers: Sequence[int], k: int
) -> dict[int, TopActivations]:
    """Streaming top-``k`` of every neuron of ``layers`` over all positions of ``tokens`` (one
    pass, rows in chunks of ~128 MiB of activations; the pass stops after the last layer)."""
    check_layers(model, layers)
    if k < 1:
        raise UserError(f"--top {k} cannot work: use 1 or more.")
    n, seq = tokens.shape
    d_mlp = int(model.cfg.d_mlp)
    k = min(k, n * seq)
    best_v = {la: torch.full((k, d_mlp), -torch.inf) for la in layers}
    best_i = {la: torch.zeros((k, d_mlp), dtype=torch.long) for la in layers}
    rows = max(1, CHUNK_BYTES // (4 * seq * d_mlp * len(layers)))
    for lo in range(0, n, rows):

        def take(i: int, act: torch.Tensor, lo: int = lo) -> None:
            la = layers[i]
            flat = act.reshape(-1, d_mlp)  # [b * pos, neuron], row-major from row lo
            v, idx = flat.topk(min(k, flat.shape[0]), dim=0)
            allv = torch.cat([best_v[la], v])
            alli = torch.cat([best_i[la], idx + lo * seq])
            top, pick = allv.topk(k, dim=0)
            best_v[la], best_i[la] = top, alli.gather(0, pick)

        run_hooks(model, tokens[lo : lo + rows], [hook_post(la) for la in layers], take)
    return {
        la: TopActivations(best_v[la].T.contiguous(), best_i[la].T // seq, best_i[la].T % seq)
        for la in layers
    }


def promoted_tokens(
    model: TransformerBridge, layer: int, m: int = 10
) -> tuple[Int[torch.Tensor, "neuron m"], Float[torch.Tensor, "neuron m"]]:
    """The ``m`` tokens whose logits each neuron of ``layer`` raises most per unit activation:
    top entries of ``W_out[n] @ W_U`` (LN folded, see module docstring), neurons in chunks."""
    check_layers(model, [layer])
    folded = circuit_model(model)
    with torch.no_grad():
        w_out = folded.blocks[layer].mlp.W_out.detach().float().cpu()  # [neuron, d_model]
        w_u = folded.W_U.detach().float().cpu()  # [d_model, vocab]
        m = min(m, w_u.shape[1])
        ids, vals = [], []
        step = max(1, 2**25 // w_u.shape[1])
        for lo in range(0, w_out.shape[0], step):
            v, i = (w_out[lo : lo + step] @ w_u).topk(m, dim=-1)
            ids.append(i)
            vals.append(v)
    return torch.cat(ids), torch.cat(vals)


def similarity_threshold(
    w_e: Float[torch.Tensor, "vocab d"],
    *,
    quantile: float = SIM_QUANTILE,
    n_pairs: int = 20_000,
    seed: int = 0,
) -> float:
    """The ``quantile`` of the cosine similarity of centred embeddings over ``n_pairs`` random
    pairs of distinct token ids (seeded): how alike two tokens must be to count as related."""
    unit = _unit_rows(w_e)
    gen = torch.Generator().manual_seed(int(seed))
    a = torch.randint(0, len(unit), (n_pairs,), generator=gen)
    b = (a + torch.randint(1, len(unit), (n_pairs,), generator=gen)) % len(unit)
    return float(torch.quantile((unit[a] * unit[b]).sum(-1), quantile))


def _unit_rows(w_e: torch.Tensor) -> torch.Tensor:
    centred = w_e.detach().double().cpu()
    centred = centred - centred.mean(0)
    return centred / centred.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def polysemanticity(
    tokens: Int[torch.Tensor, "neuron k"],
    weights: Float[torch.Tensor, "neuron k"],
    w_e: Float[torch.Tensor, "vocab d"],
    threshold: float,
    *,
    min_share: float = MIN_SHARE,
) -> tuple[Int[torch.Tensor, " neuron"], Float[torch.Tensor, " neuron"]]:
    """(groups, entropy in bits) per neuron, from the token at each of its top positions and the
    activation there (see the module docstring for the definition)."""
    unit = _unit_rows(w_e)
    groups = torch.zeros(len(tokens), dtype=torch.long)
    entropy = torch.zeros(len(tokens), dtype=torch.float64)
    for n in range(len(tokens)):
        w = weights[n].double().clamp_min(0)
        if float(w.sum()) <= 0:
            continue
        types, inv = tokens[n].unique(return_inverse=True)
        share = torch.zeros(len(types), dtype=torch.float64).index_add_(0, inv, w) / w.sum()
        nz = share[share > 0]
        entropy[n] = float((nz * (1 / nz).log2()).sum())
        related = (unit[types] @ unit[types].T) >= threshold
        label = _components(related)
        mass = torch.zeros(len(types), dtype=torch.float64).index_add_(0, label, share)
        groups[n] = int((mass >= min_share - 1e-12).sum())
    return groups, entropy.float()


def _components(adjacent: torch.Tensor) -> torch.Tensor:
    """Connected-component label (the smallest member's index) of each node of a graph."""
    label = torch.arange(len(adjacent))
    while True:
        new = torch.where(adjacent, label[None, :], len(label)).min(1).values.minimum(label)
        if torch.equal(new, label):
            return label
        label = new


@dataclass
class LayerNeurons:
    """Every neuron of one layer: top activations, promoted tokens, polysemanticity."""

    layer: int
    top: TopActivations
    top_tokens: Int[torch.Tensor, "neuron k"]  # the token at each top position
    promoted: Int[torch.Tensor, "neuron m"]
    promoted_logits: Float[torch.Tensor, "neuron m"]
    groups: Int[torch.Tensor, " neuron"]
    entropy: Float[torch.Tensor, " neuron"]
    sim_threshold: float
    min_share: float = MIN_SHARE

    @property
    def n_neurons(self) -> int:
        return int(self.groups.shape[0])

    def summary(self) -> dict[str, float | int]:
        """Counts of neurons by number of groups, and the means (dead neurons excluded)."""
        live = self.groups > 0
        return {
            "layer": self.layer,
            "neurons": self.n_neurons,
            "dead": int((~live).sum()),
            "monosemantic": int((self.groups == 1).sum()),
            "polysemantic": int((self.groups >= 2).sum()),
            "mean_groups": round(float(self.groups[live].double().mean()), 4) if live.any() else 0,
            "mean_entropy_bits": round(float(self.entropy[live].mean()), 4) if live.any() else 0,
        }


def analyse_neurons(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    layers: Sequence[int],
    *,
    k: int = 20,
    m: int = 10,
    seed: int = 0,
) -> list[LayerNeurons]:
    """Top-``k`` contexts on ``tokens``, top-``m`` promoted tokens and polysemanticity of every
    neuron of ``layers`` (one forward pass over ``tokens``)."""
    tops = top_activations(model, tokens, layers, k)
    w_e = model.W_E.detach()
    threshold = similarity_threshold(w_e, seed=seed)
    out = []
    for la in layers:
        top = tops[la]
        toks = tokens[top.rows, top.positions]
        groups, entropy = polysemanticity(toks, top.values, w_e, threshold)
        promoted, logits = promoted_tokens(model, la, m)
        out.append(LayerNeurons(la, top, toks, promoted, logits, groups, entropy, threshold))
    return out


def neuron_activations(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    layer: int,
    neurons: Sequence[int],
) -> Float[torch.Tensor, "n pos neuron"]:
    """Activations of the given neurons of ``layer`` at every position of ``tokens`` (for views)."""
    check_layers(model, [layer])
    out = torch.empty(*tokens.shape, len(neurons))
    idx = torch.tensor(list(neurons), dtype=torch.long)

    def take(_: int, act: torch.Tensor) -> None:
        out.copy_(act[..., idx])

    run_hooks(model, tokens, [hook_post(layer)], take)
    return out
