"""MLP neurons: what makes each fire, which tokens it writes towards, and how each statistic of
them compares with two baselines.

For the neurons of layer ``L`` (activation ``blocks.L.mlp.hook_post``, after the nonlinearity):

- **Top contexts** (:func:`top_activations`): each neuron's ``k`` largest activations over every
  position of the given rows (held-out text by default), a streaming top-k over chunks of rows
  (:class:`~.units.StreamingTopK`): never all activations at once.
- **Promoted tokens** (the "value" side, Geva et al. 2021): the largest entries of
  ``W_out[n] @ W_U`` on the weights with LayerNorm folded (:func:`~.circuits.circuit_model`).
- **Statistics** (:class:`NeuronStats`), each measured three ways: on the model, on its
  **untrained twin** (the same config and seed before training: the same architecture, init and
  windows), and under the **shuffled-activation control** (each neuron's activations permuted
  over the positions: its top values on random positions, :func:`~.units.random_top`):

  - ``monosemantic``: the rule of :mod:`~.units` (one concept at >= 80% of the top-k positions,
    beating its base rate and at least 10 times as common there), the same rule SAE latents are
    read by;
  - ``token_groups``: the old polysemanticity count (the number of unrelated token groups among
    the top-k tokens, tokens "related" when their centred embeddings' cosine is at least the 99th
    percentile over random pairs). **Withdrawn as a measure of polysemanticity**: the untrained
    twin scores higher than trained models, and the cut-off is what random embeddings give (see
    docs/dictionaries.md); kept only so the comparison can be re-run;
  - ``top_token_share``: the share of the top-k positions holding the most common token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.models.activations import run_hooks
from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.runtime.seeds import derive, rng
from interp_toolkit.stats.thresholds import MIN_SHARE, SIM_QUANTILE
from interp_toolkit.units.reading import (
    Concept,
    ContextFacts,
    RuleCount,
    StreamingTopK,
    TopActivations,
    random_top,
    rule_text,
    unit_concepts,
)
from interp_toolkit.weights.circuits import circuit_model

CHUNK_BYTES = 128 * 2**20
#: The three readings of every statistic.
BASELINES = ("model", "untrained", "shuffled")
#: The words a neuron report carries beside its numbers (``neurons``' JSON ``definition``).
DEFINITION = {
    "monosemantic": rule_text("unit"),
    "readings": "model: the model; untrained: its untrained twin (same config and seed, before "
    "training) on the same rows; shuffled: each neuron's activations permuted over the positions "
    "(its top values on random positions)",
    "token_groups": "withdrawn polysemanticity count: unrelated token groups among the top-k "
    "tokens (related: centred-embedding cosine >= sim_threshold, the 99th percentile over random "
    "pairs); the untrained twin scores higher than trained models",
    "promoted": "top entries of W_out[n] @ W_U, LayerNorm folded (final LN scale ignored)",
}


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


def top_activations(
    model: TransformerBridge, tokens: Int[torch.Tensor, "n pos"], layers: Sequence[int], k: int
) -> dict[int, TopActivations]:
    """Streaming top-``k`` of every neuron of ``layers`` over all positions of ``tokens`` (one
    pass, rows in chunks of ~128 MiB of activations; the pass stops after the last layer)."""
    check_layers(model, layers)
    n, seq = tokens.shape
    d_mlp = int(model.cfg.d_mlp)
    k = min(k, n * seq)
    tops = {la: StreamingTopK(d_mlp, k, seq) for la in layers}
    rows = max(1, CHUNK_BYTES // (4 * seq * d_mlp * len(layers)))
    for lo in range(0, n, rows):

        def take(i: int, act: torch.Tensor, lo: int = lo) -> None:
            tops[layers[i]].update(act.reshape(-1, d_mlp), lo * seq)

        run_hooks(model, tokens[lo : lo + rows], [hook_post(la) for la in layers], take)
    return {la: tops[la].result() for la in layers}


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
        m, step = min(m, w_u.shape[1]), max(1, 2**25 // w_u.shape[1])
        tops = [(w_out[lo : lo + step] @ w_u).topk(m) for lo in range(0, w_out.shape[0], step)]
    return torch.cat([t.indices for t in tops]), torch.cat([t.values for t in tops])


def similarity_threshold(
    w_e: Float[torch.Tensor, "vocab d"],
    *,
    quantile: float = SIM_QUANTILE,
    n_pairs: int = 20_000,
    seed: int = 0,
) -> float:
    """The ``quantile`` of the cosine similarity of centred embeddings over ``n_pairs`` random
    pairs of distinct token ids (seeded): the old "related tokens" cut-off."""
    unit = _unit_rows(w_e)
    gen = rng(seed, "similar_pairs")
    a = torch.randint(0, len(unit), (n_pairs,), generator=gen)
    b = (a + torch.randint(1, len(unit), (n_pairs,), generator=gen)) % len(unit)
    return float(torch.quantile((unit[a] * unit[b]).sum(-1), quantile))


def _unit_rows(w_e: torch.Tensor) -> torch.Tensor:
    centred = w_e.detach().double().cpu()
    centred = centred - centred.mean(0)
    return centred / centred.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def token_groups(
    tokens: Int[torch.Tensor, "neuron k"],
    weights: Float[torch.Tensor, "neuron k"],
    w_e: Float[torch.Tensor, "vocab d"],
    threshold: float,
    *,
    min_share: float = MIN_SHARE,
) -> tuple[Int[torch.Tensor, " neuron"], Float[torch.Tensor, " neuron"]]:
    """(groups, entropy in bits) per neuron: the withdrawn polysemanticity count (module
    docstring). Each top position weighs its activation (clipped at 0); token types are grouped
    by single linkage (related: cosine >= ``threshold``); groups holding >= ``min_share`` of the
    weight count; 0 = dead."""
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


@dataclass(frozen=True, kw_only=True)
class TokenGroups:
    """The withdrawn polysemanticity count over a layer's live neurons (module docstring)."""

    withdrawn: bool = True
    mean: float
    two_or_more: int
    sim_threshold: float


@dataclass(frozen=True)
class StatsSummary:
    """One reading of a layer's neurons: the rule's count; over the live neurons, the mean
    withdrawn group count, entropy (bits) and top-token share."""

    rule: RuleCount = field(metadata=json_field(inline=True))
    token_groups: TokenGroups
    entropy_bits_mean: float
    top_token_share_mean: float


@dataclass(frozen=True)
class LayerSummary(Jsonable):
    """A layer's statistics, each reading's (:data:`BASELINES`; ``k``: where the study gives it)."""

    layer: int
    neurons: int
    readings: dict[str, StatsSummary] = field(metadata=json_field(inline=True))
    k: int | None = field(default=None, metadata=json_field(omit_none=True))


@dataclass
class NeuronStats:
    """Every statistic of one layer's neurons, read one way (model, untrained twin, shuffled)."""

    top: TopActivations
    top_tokens: Int[torch.Tensor, "neuron k"]
    concepts: list[Concept]
    groups: Int[torch.Tensor, " neuron"]
    entropy: Float[torch.Tensor, " neuron"]
    sim_threshold: float

    @property
    def rule(self) -> RuleCount:
        return RuleCount.of(self.concepts)

    def summary(self) -> StatsSummary:
        live = self.groups > 0
        k = max(1, int(self.top.values.shape[1]))
        top_share = torch.tensor(
            [float(torch.unique(t, return_counts=True)[1].max()) / k for t in self.top_tokens]
        )
        mean = lambda x: round(float(x[live].double().mean()), 4) if live.any() else 0.0  # noqa: E731
        groups = TokenGroups(
            mean=mean(self.groups),
            two_or_more=int((self.groups >= 2).sum()),
            sim_threshold=round(self.sim_threshold, 4),
        )
        return StatsSummary(self.rule, groups, mean(self.entropy), mean(top_share))


def neuron_stats(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    layers: Sequence[int],
    k: int,
    *,
    seed: int = 0,
    shuffled: bool = False,
) -> dict[int, NeuronStats]:
    """The statistics of ``layers`` on ``tokens``; ``shuffled``: under the control."""
    tops = top_activations(model, tokens, layers, k)
    facts = ContextFacts.of(tokens)
    w_e = model.W_E.detach()
    threshold = similarity_threshold(w_e, seed=seed)
    out = {}
    for i, la in enumerate(layers):
        top = tops[la]
        if shuffled:
            top = random_top(top, *tokens.shape, seed=derive(seed, "shuffled_layer", i))
        toks = tokens[top.rows, top.positions]
        groups, entropy = token_groups(toks, top.values, w_e, threshold)
        out[la] = NeuronStats(top, toks, unit_concepts(facts, top), groups, entropy, threshold)
    return out


def untrained_twin(model: TransformerBridge, model_cfg: ModelConfig | None) -> TransformerBridge:
    """The model before training: a toy model rebuilt from its config and seed; another model
    (GPT-2) redrawn with its library's init (:mod:`~.untrained`, first seed)."""
    device = next(model.parameters()).device
    if model_cfg is not None:
        return build_model(model_cfg, device=device).eval()
    from interp_toolkit.heads.untrained import untrained_models

    maker = untrained_models(model, n_models=1)
    if maker is None:
        raise UserError("this model cannot be rebuilt untrained: no baseline can be drawn.")
    return maker.make(maker.seeds[0])


@dataclass
class LayerNeurons:
    """Every neuron of one layer: the statistics three ways, and promoted tokens."""

    layer: int
    stats: dict[str, NeuronStats]  # BASELINES -> stats ("untrained" absent when not measured)
    promoted: Int[torch.Tensor, "neuron m"]
    promoted_logits: Float[torch.Tensor, "neuron m"]

    @property
    def model(self) -> NeuronStats:
        return self.stats["model"]

    @property
    def top(self) -> TopActivations:
        return self.model.top

    @property
    def top_tokens(self) -> Int[torch.Tensor, "neuron k"]:
        return self.model.top_tokens

    @property
    def n_neurons(self) -> int:
        return len(self.model.concepts)

    @property
    def k(self) -> int:
        return int(self.top.values.shape[1])

    def summary(self) -> LayerSummary:
        """Each statistic three ways (model, untrained twin, shuffled control)."""
        readings = {name: s.summary() for name, s in self.stats.items()}
        return LayerSummary(self.layer, self.n_neurons, readings)

    def records(self, label: Mapping[int, str]) -> list[NeuronRecord]:
        """Every neuron's record, its tokens as ``label`` names them."""
        t, out = self.top, []
        for n, c in enumerate(self.model.concepts):
            cols = (t.rows[n], t.positions[n], t.values[n], self.top_tokens[n])
            top = zip(*(x.tolist() for x in cols), strict=True)
            promoted = zip(self.promoted[n].tolist(), self.promoted_logits[n].tolist(), strict=True)
            value = label[c.value] if c.kind in ("token", "previous") and c.value >= 0 else c.value
            contexts = [
                {"row": r, "pos": p, "activation": v, "token": label[i]} for r, p, v, i in top
            ]
            boosts = [{"token": label[i], "logit": v} for i, v in promoted]
            out.append(NeuronRecord(n, float(t.values[n, 0]), c, value, contexts, boosts))
        return out


@dataclass(frozen=True)
class NeuronRecord(Jsonable):
    """One neuron as ``neurons`` writes it: its top activation, its concept (``value``: a token
    concept's token label, written over the concept's id in its place), its top contexts (row,
    position, activation, token) and promoted tokens (token, logit per unit activation)."""

    neuron: int
    max_activation: float = field(metadata=json_field(digits=4))
    concept: Concept = field(metadata=json_field(inline=True))
    value: str | int
    top: list[dict[str, object]] = field(metadata=json_field(digits=4))
    promoted: list[dict[str, object]] = field(metadata=json_field(digits=4))


def analyse_neurons(
    model: TransformerBridge,
    tokens: Int[torch.Tensor, "n pos"],
    layers: Sequence[int],
    *,
    k: int = 20,
    m: int = 10,
    seed: int = 0,
    untrained: TransformerBridge | None = None,
) -> list[LayerNeurons]:
    """Top-``k`` contexts, promoted tokens and every statistic of every neuron of ``layers``, on
    the model, on ``untrained`` (its twin, when given) and under the shuffled control."""
    reads = {
        "model": neuron_stats(model, tokens, layers, k, seed=seed),
        "shuffled": neuron_stats(model, tokens, layers, k, seed=seed, shuffled=True),
    }
    if untrained is not None:
        reads["untrained"] = neuron_stats(untrained, tokens, layers, k, seed=seed)
    out = []
    for la in layers:
        promoted, logits = promoted_tokens(model, la, m)
        stats = {name: reads[name][la] for name in BASELINES if name in reads}
        out.append(LayerNeurons(la, stats, promoted, logits))
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
