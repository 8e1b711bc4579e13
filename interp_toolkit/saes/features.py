"""What each latent of an SAE is (data only; pages are :mod:`interp_toolkit.views.features`).

- **Top contexts**: each latent's ``k`` largest activations over held-out rows (a streaming top-k;
  never all activations at once), and its density there.
- **Concept** and **monosemanticity**: the rule of :mod:`interp_toolkit.units.reading`, the same
  one MLP neurons are read by, and the same rule under the shuffled-activation control (each
  latent's top values put on random positions: what the rule finds by chance).
- **Logit effect**: the decoder direction read through the unembedding: ``W_dec[i] @ W_U``
  (residual hooks), ``W_dec[i] @ W_out @ W_U`` (MLP ``hook_post``), ``Σ_h W_dec[i, h] @ W_O[h] @
  W_U`` (``hook_z``), on the weights with LayerNorm folded (the final LN's per-position scale is
  ignored, as for neurons).
- **Head shares** (attention SAEs): the share of the latent's unit decoder row held by each
  head's slice, ``‖W_dec[i, h]‖²`` (they sum to 1): direct feature attribution by head, from the
  weights (Kissane et al. 2024).
- **Description**: one computed line per latent, from its concept and top tokens
  (:func:`describe`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.saes.activations import read_hook, stream_activations
from interp_toolkit.saes.sae import SparseAutoencoder
from interp_toolkit.text.codecs import Codec
from interp_toolkit.text.labels import token_labels
from interp_toolkit.units.reading import (
    MONO_LIFT,
    MONO_SHARE,
    Concept,
    ContextFacts,
    StreamingTopK,
    TopActivations,
    concept_phrase,
    random_top,
    unit_concepts,
)
from interp_toolkit.weights.circuits import circuit_model

#: Top contexts kept per latent; tokens shown per logit list.
TOP_K, LOGITS = 20, 10


def latent_activations(
    model: TransformerBridge, sae: SparseAutoencoder, tokens: Int[Tensor, "n pos"]
) -> Float[Tensor, "n pos latent"]:
    """Every latent's activation at every position of a few rows (for views)."""
    with torch.no_grad():
        f = sae.encode(read_hook(model, tokens, sae.cfg.hook_name).to(sae.W_enc.device)).cpu()
    return f.reshape(*tokens.shape, -1)


def top_latent_activations(
    model: TransformerBridge, sae: SparseAutoencoder, tokens: Int[Tensor, "n pos"], k: int = TOP_K
) -> tuple[TopActivations, Float[Tensor, " latent"]]:
    """Each latent's ``k`` top activations on ``tokens`` and its density (share of positions
    where it fires), one streamed pass."""
    n, seq = tokens.shape
    k = min(k, n * seq)
    top = StreamingTopK(sae.cfg.d_sae, k, seq)
    fired = torch.zeros(sae.cfg.d_sae)
    with torch.no_grad():
        for lo, acts in stream_activations(model, tokens, sae.cfg.hook_name):
            f = sae.encode(acts.to(sae.W_enc.device)).cpu()
            top.update(f, lo * seq)
            fired += (f > 0).sum(0)
    return top.result(), fired / (n * seq)


def decoder_out(model: TransformerBridge, sae: SparseAutoencoder) -> Float[Tensor, "latent d"]:
    """Each latent's unit decoder row as a residual-stream direction (module docstring)."""
    m = circuit_model(model)
    hook, layer = sae.cfg.hook_name, sae.cfg.hook_layer
    with torch.no_grad():
        w = sae.W_dec.detach().float().cpu()
        if hook.endswith("attn.hook_z"):
            w_o = m.blocks[layer].attn.W_O.detach().float().cpu()  # [head, d_head, d_model]
            return torch.einsum("lhe,hed->ld", w.reshape(len(w), *w_o.shape[:2]), w_o)
        if hook.endswith("mlp.hook_post"):
            return w @ m.blocks[layer].mlp.W_out.detach().float().cpu()
        return w


def logit_effects(
    model: TransformerBridge, sae: SparseAutoencoder, m: int = LOGITS
) -> tuple[Int[Tensor, "latent m"], Int[Tensor, "latent m"]]:
    """(promoted ids, suppressed ids) of every latent: its ``m`` largest and smallest logits per
    unit activation."""
    w_u = circuit_model(model).W_U.detach().float().cpu()
    out = decoder_out(model, sae)
    m = min(m, w_u.shape[1])
    ups, downs = [], []
    step = max(1, 2**25 // w_u.shape[1])
    for lo in range(0, len(out), step):
        logits = out[lo : lo + step] @ w_u
        ups.append(logits.topk(m, dim=-1).indices)
        downs.append((-logits).topk(m, dim=-1).indices)
    return torch.cat(ups), torch.cat(downs)


def head_shares(sae: SparseAutoencoder, n_heads: int) -> Float[Tensor, "latent head"]:
    """Share of each latent's decoder row held by each head's slice (``hook_z`` SAEs)."""
    w = sae.W_dec.detach().float().cpu()
    sq = w.reshape(len(w), n_heads, -1).pow(2).sum(-1)
    return sq / sq.sum(-1, keepdim=True).clamp_min(1e-12)


def labeller(codec: Codec) -> Callable[[int], str]:
    """A token id -> visible label function (spaces as ·), cached."""
    return functools.cache(lambda t: token_labels(codec, [int(t)])[0])


def top_token_counts(top: TopActivations, tokens: Tensor, latent: int) -> list[tuple[int, int]]:
    """(token id, count) of the tokens at a latent's top positions, most common first."""
    ids = tokens[top.rows[latent], top.positions[latent]].tolist()
    return Counter(int(t) for t in ids).most_common()


def describe(
    concept: Concept, counts: list[tuple[int, int]], label: Callable[[int], str], k: int
) -> str:
    """One line, computed: the concept (when the rule passes) and the top tokens."""
    tops = ", ".join(f"{label(t)}×{c}" if c > 1 else label(t) for t, c in counts[:4])
    if concept.dead:
        return "dead: never fires on the held-out rows"
    share = f"{concept.share:.0%} of its top {k}; {concept.base:.1%} of all tokens"
    what = concept_phrase(concept, label)
    if concept.monosemantic:
        return f"{what} ({share}); top tokens {tops}"
    need = f"needs {MONO_SHARE:.0%}"
    if concept.holds:
        need = f"too common to be specific: needs {MONO_LIFT:g}x its base rate"
    return f"no single concept (best: {what}, {share}; {need}); top tokens {tops}"


@dataclass
class LatentFeatures:
    """Per latent: top contexts, density, concept, logit effect, head shares, description."""

    hook: str
    top: TopActivations
    density: Float[Tensor, " latent"]
    concepts: list[Concept]
    promoted: Int[Tensor, "latent m"]
    suppressed: Int[Tensor, "latent m"]
    head_share: Float[Tensor, "latent head"] | None
    descriptions: list[str]
    top_counts: list[list[tuple[int, int]]]
    #: The rule read at random positions (the shuffled-activation control, :func:`random_top`).
    shuffled: list[Concept]

    @property
    def n_latents(self) -> int:
        return len(self.concepts)

    def latent(self, i: int, label: Callable[[int], str]) -> LatentRecord:
        """Latent ``i``'s line of features.json (tokens labelled by ``label``)."""
        top = zip(self.top.rows[i], self.top.positions[i], self.top.values[i], strict=True)
        shares = self.head_share
        return LatentRecord(
            i,
            round(float(self.density[i]), 6),
            round(float(self.top.values[i, 0]), 4),
            self.descriptions[i],
            self.concepts[i],
            [(label(t), c) for t, c in self.top_counts[i][:8]],
            [label(int(t)) for t in self.promoted[i].tolist()],
            [label(int(t)) for t in self.suppressed[i].tolist()],
            [(int(r), int(p), round(float(v), 4)) for r, p, v in top],
            None if shares is None else [round(float(s), 4) for s in shares[i]],
        )


@dataclass(frozen=True)
class LatentRecord(Jsonable):
    """One latent as features.json holds it (its concept's keys inline; ``top``: row, position,
    activation; ``head_share``: attention SAEs only); :meth:`from_dict` reads one back."""

    latent: int
    density: float
    max_activation: float
    description: str
    concept: Concept = field(metadata=json_field(inline=True))
    top_tokens: list[tuple[str, int]]
    promoted: list[str]
    suppressed: list[str]
    top: list[tuple[int, int, float]]
    head_share: list[float] | None = field(metadata=json_field(omit_none=True))


def latent_features(
    model: TransformerBridge,
    sae: SparseAutoencoder,
    tokens: Int[Tensor, "n pos"],
    label: Callable[[int], str],
    *,
    k: int = TOP_K,
    m: int = LOGITS,
    seed: int = 0,
) -> LatentFeatures:
    """Everything of the module docstring for every latent, on held-out ``tokens`` (``seed``:
    the shuffled control's positions)."""
    top, density = top_latent_activations(model, sae, tokens, k)
    facts = ContextFacts.of(tokens)
    concepts = unit_concepts(facts, top, alive=density > 0)
    n, seq = tokens.shape
    shuffled = unit_concepts(facts, random_top(top, n, seq, seed=seed), alive=density > 0)
    promoted, suppressed = logit_effects(model, sae, m)
    is_z = sae.cfg.hook_name.endswith("attn.hook_z")
    shares = head_shares(sae, int(model.cfg.n_heads)) if is_z else None
    counts = [top_token_counts(top, tokens, i) for i in range(sae.cfg.d_sae)]
    kk = int(top.values.shape[1])
    desc = [describe(c, n, label, kk) for c, n in zip(concepts, counts, strict=True)]
    return LatentFeatures(
        sae.cfg.hook_name,
        top,
        density,
        concepts,
        promoted,
        suppressed,
        shares,
        desc,
        counts,
        shuffled,
    )
