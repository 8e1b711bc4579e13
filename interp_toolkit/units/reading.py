"""Units (MLP neurons or SAE latents) read the same way: their top-activating positions, the
concept those positions share, and one monosemanticity rule for both.

- :class:`StreamingTopK`: each unit's ``k`` largest activations over a stream of chunks
  ``[positions, unit]``; only ``[k, unit]`` values and indices are kept.
- :class:`ContextFacts`: what is true at every position of the rows read: the current token, the
  previous token, whether the current token occurred earlier in the row (``seen``), whether the
  previous and current tokens occurred earlier as a pair (``in_repeat``: inside a repeated span),
  and how often each of these holds over all positions (the base rates).
- :func:`unit_concepts` (**the monosemanticity rule**): the candidate concepts of a unit are
  "the current token is v" (v its most common top token), "the previous token is v", ``seen``
  and ``in_repeat``. A concept's *share* is the fraction of the unit's top-k positions where it
  holds; its *base* is the fraction of all positions. The unit's concept is the candidate with the
  largest share (ties: the rarer). The concept **holds** at the unit's top when that share is at
  least :data:`MONO_SHARE` and a one-sided binomial test of the share against the base rate gives
  p <= :data:`MONO_ALPHA`. The unit is **monosemantic** when its concept holds *and is specific*:
  its share at the top is at least :data:`MONO_LIFT` times its base rate (the *lift*), so the
  concept picks out a small part of the text, at most ``share / MONO_LIFT`` of all positions.
  Without the lift a concept that covers half the rows passes easily: on a curriculum run most
  positions are inside repeated spans, and 20 of 20 top positions there gives p ~ 1e-8, so nearly
  every latent of a layer-1 attention SAE "fires on a token that occurred earlier" (902-988 of
  1,024 under the old rule): that says where the text is, not what the latent is. A unit whose
  top activations are all <= 0 is **dead** and never monosemantic.
- :func:`random_top`: the shuffled-activation control. Shuffling a unit's activations over the
  positions puts its top-k values on ``k`` positions drawn uniformly without replacement; the
  rule read there is what it finds by chance.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.stats.intervals import binomial_tail
from interp_toolkit.stats.thresholds import BEATS_ALPHA, MONO_ALPHA, MONO_LIFT, MONO_SHARE

CONCEPTS = ("token", "previous", "seen", "in_repeat")


@dataclass
class TopActivations:
    """Each unit's ``k`` largest activations (descending) and where: ``rows``, ``positions``."""

    values: Float[Tensor, "unit k"]
    rows: Int[Tensor, "unit k"]
    positions: Int[Tensor, "unit k"]


class StreamingTopK:
    """Top-``k`` of ``n_units`` units over chunks of flat positions (row-major over rows of
    ``seq`` positions)."""

    def __init__(self, n_units: int, k: int, seq: int) -> None:
        self.k, self.seq = k, seq
        self.values = torch.full((k, n_units), -torch.inf)
        self.index = torch.zeros((k, n_units), dtype=torch.long)

    def update(self, acts: Float[Tensor, "m unit"], first: int) -> None:
        """Fold in a chunk whose first row is flat position ``first``."""
        v, i = acts.topk(min(self.k, acts.shape[0]), dim=0)
        allv = torch.cat([self.values, v.float()])
        alli = torch.cat([self.index, i + first])
        top, pick = allv.topk(self.k, dim=0)
        self.values, self.index = top, alli.gather(0, pick)

    def result(self) -> TopActivations:
        idx = self.index.T
        return TopActivations(self.values.T.contiguous(), idx // self.seq, idx % self.seq)


@dataclass
class ContextFacts:
    """Per position of ``tokens [n, pos]``: the facts a concept is made of (module docstring)."""

    tokens: Int[Tensor, "n pos"]
    previous: Int[Tensor, "n pos"]  # -1 at position 0
    seen: Bool[Tensor, "n pos"]
    in_repeat: Bool[Tensor, "n pos"]

    @classmethod
    def of(cls, tokens: Int[Tensor, "n pos"]) -> ContextFacts:
        t = tokens.long()
        prev = torch.cat([torch.full_like(t[:, :1], -1), t[:, :-1]], dim=1)
        same = t[:, :, None] == t[:, None, :]  # [n, q, k]
        earlier = torch.ones(t.shape[1], t.shape[1], dtype=torch.bool).tril(-1)
        seen = (same & earlier).any(-1)
        pair = same & (prev[:, :, None] == prev[:, None, :]) & (prev[:, :, None] >= 0)
        return cls(t, prev, seen, (pair & earlier).any(-1))

    def base(self, concept: str, value: int = 0) -> float:
        grid = getattr(self, "tokens" if concept == "token" else concept)
        return float((grid == value if concept in ("token", "previous") else grid).float().mean())


@dataclass(frozen=True)
class Concept(Jsonable):
    """A unit's best concept: ``kind`` (:data:`CONCEPTS`), ``value`` (a token id for token /
    previous), its share of the top-k, its base rate, the binomial p, and the verdict:
    ``monosemantic``; ``holds`` (the share and the binomial test without the lift: what
    :mod:`interp_toolkit.saes.roles` asks of a repeat concept, which is common by nature)."""

    kind: str = field(metadata=json_field(key="concept"))
    value: int
    share: float = field(metadata=json_field(digits=4))
    base: float = field(metadata=json_field(digits=6))
    p_value: float = field(metadata=json_field(encode=lambda p: float(f"{p:.3g}")))
    monosemantic: bool
    dead: bool = False
    holds: bool = False

    json_extra = {"lift": "capped_lift"}
    json_order = (
        "concept",
        "value",
        "share",
        "base",
        "p_value",
        "lift",
        "holds",
        "monosemantic",
        "dead",
    )

    @property
    def lift(self) -> float:
        """Share at the top over the base rate (inf for a concept absent elsewhere)."""
        return self.share / self.base if self.base > 0 else math.inf

    @property
    def capped_lift(self) -> float:
        return round(min(self.lift, 1e6), 3)


_PATTERN = {
    "seen": "fires on a token that occurred earlier in the context (where an induction head "
    "can copy the token that followed it)",
    "in_repeat": "fires inside a repeated span (the previous and current tokens occurred "
    "earlier, in that order)",
}


def concept_phrase(concept: Concept, label: Callable[[int], str]) -> str:
    """What a concept says, in words: 'fires on X', 'fires after X', or a prefix pattern."""
    if concept.kind == "token":
        return f"fires on {label(concept.value)}"
    if concept.kind == "previous":
        return f"fires after {label(concept.value)}"
    return _PATTERN[concept.kind]


def concept_of(facts: ContextFacts, rows: Tensor, positions: Tensor, alive: bool) -> Concept:
    """The best concept at one unit's top positions and whether it passes the rule."""
    k = len(rows)
    if not alive or k == 0:
        return Concept("token", -1, 0.0, 0.0, 1.0, False, dead=True)
    cands: list[tuple[str, int, int]] = []
    for kind, grid in (("token", facts.tokens), ("previous", facts.previous)):
        value, count = Counter(grid[rows, positions].tolist()).most_common(1)[0]
        if value >= 0:
            cands.append((kind, int(value), int(count)))
    cands += [(kind, 0, int(getattr(facts, kind)[rows, positions].sum())) for kind in CONCEPTS[2:]]
    scored = [(c, facts.base(c[0], c[1])) for c in cands]
    (kind, value, count), base = max(scored, key=lambda cb: (cb[0][2], -cb[1]))
    return judged(kind, value, count / k, base, binomial_tail(count, k, base))


def judged(kind: str, value: int, share: float, base: float, p: float) -> Concept:
    """A live unit's concept with the rule's verdicts (module docstring)."""
    holds = share >= MONO_SHARE - 1e-9 and p <= MONO_ALPHA
    specific = share >= MONO_LIFT * base - 1e-12
    return Concept(kind, value, share, base, p, holds and specific, holds=holds)


def rule_text(units: str = "unit") -> str:
    """The rule in one sentence, for pages and JSON files."""
    return (
        f"one concept (the current token, the previous token, 'occurred earlier in the "
        f"context', 'inside a repeated span') holds at >= {MONO_SHARE:.0%} of the {units}'s "
        f"top-k positions on held-out rows, beats its base rate (one-sided binomial p <= "
        f"{MONO_ALPHA:g}) and is specific: at least {MONO_LIFT:g} times as common there as over "
        f"all positions"
    )


def unit_concepts(
    facts: ContextFacts, top: TopActivations, alive: Bool[Tensor, " unit"] | None = None
) -> list[Concept]:
    """Every unit's concept and verdict (``alive`` defaults to a positive top activation)."""
    live = top.values[:, 0] > 0 if alive is None else alive
    return [
        concept_of(facts, top.rows[u], top.positions[u], bool(live[u]))
        for u in range(len(top.values))
    ]


def random_top(top: TopActivations, n: int, seq: int, seed: int = 0) -> TopActivations:
    """The shuffled-activation control: each unit's top values on ``k`` uniformly drawn distinct
    positions of ``n`` rows of ``seq`` (module docstring)."""
    gen = rng(seed, "shuffled_activations")
    k, units = top.values.shape[1], len(top.values)
    step = max(1, 2**22 // (n * seq))
    idx = torch.cat(
        [
            torch.rand(min(step, units - lo), n * seq, generator=gen).topk(k, dim=-1).indices
            for lo in range(0, units, step)
        ]
    )
    return TopActivations(top.values.clone(), idx // seq, idx % seq)


@dataclass(frozen=True)
class RuleCount(Jsonable):
    """How many units of a set pass the rule, by concept kind."""

    units: int
    dead: int
    monosemantic: int
    by_kind: dict[str, int] = field(metadata=json_field(key="by_concept"))

    json_extra = ("share_of_live",)
    json_order = ("units", "dead", "monosemantic", "share_of_live", "by_concept")

    @classmethod
    def of(cls, concepts: list[Concept]) -> RuleCount:
        mono = [c for c in concepts if c.monosemantic]
        return cls(
            units=len(concepts),
            dead=sum(c.dead for c in concepts),
            monosemantic=len(mono),
            by_kind={k: sum(c.kind == k for c in mono) for k in CONCEPTS},
        )

    @property
    def live(self) -> int:
        return self.units - self.dead

    @property
    def share(self) -> float:
        return self.monosemantic / self.live if self.live else 0.0

    @property
    def share_of_live(self) -> float:
        return round(self.share, 4)


def beats(a: RuleCount, b: RuleCount, alpha: float = BEATS_ALPHA) -> bool:
    """Whether ``a``'s monosemantic share (of live units) is larger than ``b``'s: a one-sided
    two-proportion z-test (pooled) at ``alpha``. False when either set has no live unit."""
    if a.live == 0 or b.live == 0:
        return False
    pooled = (a.monosemantic + b.monosemantic) / (a.live + b.live)
    if pooled in (0.0, 1.0):
        return False
    se = math.sqrt(pooled * (1 - pooled) * (1 / a.live + 1 / b.live))
    z = (a.share - b.share) / se
    return 0.5 * math.erfc(z / math.sqrt(2)) <= alpha
