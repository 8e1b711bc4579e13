"""A hand-built 2-layer model of planted heads, each with the role it must (or must not) get.

Every weight is written by hand on a :func:`planting.blank_model`: the residual stream is five
one-hot blocks of 32 dims (the rest of ``d_model`` 576 unused; ``n_ctx`` and vocabulary 32:
:func:`planting.letters_codec`); :class:`planting.Head` writes each head.

==========  ===============================================================================
``TOK``      the token's id (``W_E[t] = e_{TOK+t}``)
``POS``      the position (``W_pos[p] = e_{POS+p}``)
``PREV``     written by head 0.0 (the previous-token head): the token at p-1
``PREV2``    written by head 0.1 (the q-2 head): the token at p-2
``OUT``      written by the layer-1 heads; the unembedding reads it
==========  ===============================================================================

A planted head puts attention logit ``sharpness`` (plus the log of its share) on the keys it
looks for and 0 elsewhere, so it attends there in the planted proportions (all of it for
``sharpness`` 20, most of it for 6). With ``noise`` > 0 every planted head's logits also get a
random term that depends on the *key's token* (one normal draw per token id, std ``noise``,
seeded): it differs from row to row of random tokens, so a head that splits its attention evenly
between two keys does so on average, not in every row. Heads 0.0 and 0.1, which write ``PREV``
and ``PREV2`` for layer 1, stay sharp and noiseless (:data:`FIXED`).

:data:`PLANTED` lists every head with its description and the role discovery must give it:
the positives (previous-token 0.0 and 1.4, duplicate-token 0.7, induction 1.0) and the negatives,
each almost but not quite a role (attends to q-2; to q, q-1, q-2 evenly; to q-1 and q-2 evenly;
more to q-2 than to q-1; to BOS; to itself; an induction head one position late; one split between
q-Δ+1 and q-Δ+2; a head at the fixed offset Δ-1, which looks like induction on the probe but is
positional; one split between the duplicate and the induction key; one uniform; one random).
Several negatives reach the 0.4 effect-size floor, so the floor alone would give them the role.

:func:`split_model` (issue 30) re-plants nine of those heads as splits between a score's key and
another key, near or far (:data:`SPLIT`: 50/50 with q-4 or q-9, 60/40 with q-2 or q-4, 64/36 and
60/40 beside the induction key, and two positives at 75/25 and 80/20); :func:`split_roles` is what
discovery must return for it.
"""

from __future__ import annotations

import math

import torch

from interp_toolkit.heads.registry import HeadId
from interp_toolkit.models.build import ModelConfig
from planting.blank import BLOCK, POS, TOK, Head, blank_model

PREV, PREV2, OUT = 64, 96, 128
N_HEADS, D_HEAD = 8, 72  # head dims 0..63: two one-hot blocks; 71: the key noise
CFG = ModelConfig(
    n_layers=2,
    d_model=N_HEADS * D_HEAD,  # the blocks above, then unused dims
    n_heads=N_HEADS,
    d_head=D_HEAD,
    n_ctx=BLOCK,
    d_vocab=BLOCK,
)
#: The discovery probe's period for n_ctx 32 (batches.default_layout): the positional imposter
#: 1.3 sits at offset PERIOD - 1.
PERIOD = 13

#: head -> (what it is, the role it must get)
PLANTED: dict[HeadId, tuple[str, str]] = {
    HeadId(0, 0): ("previous token (q-1)", "previous-token"),
    HeadId(0, 1): ("q-2", "none"),
    HeadId(0, 2): ("window q, q-1, q-2 evenly", "none"),
    HeadId(0, 3): ("q-1 and q-2 evenly", "none"),
    HeadId(0, 4): ("q-2 (0.55) over q-1 (0.45)", "none"),
    HeadId(0, 5): ("BOS", "none"),
    HeadId(0, 6): ("current token (q)", "none"),
    HeadId(0, 7): ("duplicate token (earlier copy)", "duplicate-token"),
    HeadId(1, 0): ("induction (q-Δ+1)", "induction"),
    HeadId(1, 1): ("induction one position late (q-Δ+2)", "none"),
    HeadId(1, 2): ("induction split q-Δ+1 / q-Δ+2", "none"),
    HeadId(1, 3): ("positional, fixed offset Δ-1", "none"),
    HeadId(1, 4): ("previous token (q-1), layer 1", "previous-token"),
    HeadId(1, 5): ("uniform", "none"),
    HeadId(1, 6): ("split duplicate / induction key", "none"),
    HeadId(1, 7): ("random QK", "none"),
}
#: Heads that keep their weights whatever ``sharpness`` and ``noise`` say: the two that feed
#: layer 1 (sharp), the uniform and the random head.
FIXED = (HeadId(0, 0), HeadId(0, 1), HeadId(1, 5), HeadId(1, 7))
SHARP = 20.0
POSITIVES = {h: role for h, (_, role) in PLANTED.items() if role != "none"}
NEGATIVES = [h for h, (_, role) in PLANTED.items() if role == "none"]


def planted_model(
    *, sharpness: float = 20.0, noise: float = 0.0, seed: int = 0, period: int = PERIOD
):
    """The model of :data:`PLANTED` (module docstring)."""
    model = blank_model(CFG, OUT)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        heads = {h: Head(model, h) for h in PLANTED}
        a = sharpness
        # 0.0 and 0.1 feed layer 1: always sharp and noiseless, so PREV and PREV2 are exact
        heads[HeadId(0, 0)].positional({1: 1.0}, SHARP)
        heads[HeadId(0, 0)].copy(TOK, PREV)
        heads[HeadId(0, 1)].positional({2: 1.0}, SHARP)
        heads[HeadId(0, 1)].copy(TOK, PREV2)
        heads[HeadId(0, 2)].positional({0: 1.0, 1: 1.0, 2: 1.0}, a)
        heads[HeadId(0, 3)].positional({1: 1.0, 2: 1.0}, a)
        heads[HeadId(0, 4)].positional({1: 0.45, 2: 0.55}, a)
        heads[HeadId(0, 6)].positional({0: 1.0}, a)
        bos = heads[HeadId(0, 5)]
        for p in range(BLOCK):
            bos.q[0, POS + p] = bos.unit * a
        bos.k[0, POS] = 1.0
        dup = heads[HeadId(0, 7)]
        dup.content(TOK, a)
        for p in range(BLOCK):  # minus twice the logit at the query's own position: not itself
            dup.q[BLOCK + p, POS + p] = -2 * dup.unit * a
            dup.k[BLOCK + p, POS + p] = 1.0
        heads[HeadId(1, 0)].content(PREV, a)
        heads[HeadId(1, 1)].content(PREV2, a)
        heads[HeadId(1, 2)].content((PREV, PREV2), a)
        heads[HeadId(1, 3)].positional({period - 1: 1.0}, a)
        heads[HeadId(1, 4)].positional({1: 1.0}, a)
        split = heads[HeadId(1, 6)]
        split.content((TOK, PREV), a)  # the earlier copy (and itself) and the key after it
        for p in range(BLOCK):
            split.q[BLOCK + p, POS + p] = -2 * split.unit * a
            split.k[BLOCK + p, POS + p] = 1.0
        rnd = heads[HeadId(1, 7)]
        rnd.q.copy_(torch.randn(rnd.q.shape, generator=gen) * 0.5)
        rnd.k.copy_(torch.randn(rnd.k.shape, generator=gen) * 0.5)
        for h in (HeadId(1, 0), HeadId(1, 1), HeadId(1, 2), HeadId(1, 3), HeadId(1, 6)):
            heads[h].copy(TOK, OUT)
        if noise > 0:
            for h, head in heads.items():
                if h not in FIXED:
                    head.key_noise(torch.randn(BLOCK, generator=gen) * noise)
    return model


def expected_roles() -> list[list[str]]:
    """``roles[layer][head]`` discovery must return for :func:`planted_model`."""
    return [[PLANTED[HeadId(ly, h)][1] for h in range(N_HEADS)] for ly in range(CFG.n_layers)]


# ------------------------------------------------------------------------ split heads (issue 30)


def positional_rows(head: Head, shares: dict[int, float], sharpness: float, row0: int) -> None:
    """Like :meth:`planting.Head.positional` in head dims ``row0 .. row0 + 31`` (so it can sit beside a
    content rule in dims 0..31): query p puts ``sharpness + log(share)`` on key ``p - d``."""
    for p in range(BLOCK):
        head.k[row0 + p, POS + p] = 1.0
        for d, share in shares.items():
            if p - d >= 0:
                head.q[row0 + p - d, POS + p] += head.unit * (sharpness + math.log(share))


def induction_split(head: Head, share: float, *, far: int | None, sharpness: float) -> None:
    """An induction head (content: the key whose PREV holds the query's token) with ``share`` of
    its attention there and the rest on the key one later (PREV2, ``far`` None) or on the fixed
    key ``q - far`` (positional)."""
    for t in range(BLOCK):
        head.q[t, TOK + t] = head.unit * (sharpness + math.log(share))
        head.k[t, PREV + t] = 1.0
    if far is None:
        for t in range(BLOCK):
            head.q[BLOCK + t, TOK + t] = head.unit * (sharpness + math.log(1 - share))
            head.k[BLOCK + t, PREV2 + t] = 1.0
    else:
        positional_rows(head, {far: 1 - share}, sharpness, BLOCK)
    head.copy(TOK, OUT)


#: head -> (planted, the role it must get); every other head of planted_model keeps its role.
#: The negatives reach the 0.4 floor on the deciding score; under the rule before (each key
#: within 2 positions, on its own) 0.2, 0.5, 0.6, 1.1 and 1.6 got the role: their second key is
#: further.
SPLIT: dict[HeadId, tuple[str, str]] = {
    HeadId(0, 2): ("q-1 / q-4, 50/50", "none"),
    HeadId(0, 3): ("q-1 / q-2, 60/40", "none"),
    HeadId(0, 4): ("q-1 / q-4, 75/25 (ratio 3)", "previous-token"),
    HeadId(0, 5): ("q-1 / q-9, 50/50", "none"),
    HeadId(0, 6): ("q-1 / q-4, 60/40 (ratio 1.5)", "none"),
    HeadId(1, 1): ("induction / q-4, 50/50", "none"),
    HeadId(1, 2): ("induction / q-Δ+2, 60/40", "none"),
    HeadId(1, 5): ("induction / q-4, 80/20 (ratio 4)", "induction"),
    HeadId(1, 6): ("induction / q-7, 64/36 (almost the role)", "none"),
}


def split_model(sharpness: float = 20.0):
    """:func:`planted_model` with the heads of :data:`SPLIT` re-planted (sharp, noiseless)."""
    model = planted_model()
    with torch.no_grad():
        positional = {
            HeadId(0, 2): {1: 0.5, 4: 0.5},
            HeadId(0, 3): {1: 0.6, 2: 0.4},
            HeadId(0, 4): {1: 0.75, 4: 0.25},
            HeadId(0, 5): {1: 0.5, 9: 0.5},
            HeadId(0, 6): {1: 0.6, 4: 0.4},
        }
        for h, shares in positional.items():
            positional_rows(Head(model, h), shares, sharpness, 0)
        induction_split(Head(model, HeadId(1, 1)), 0.5, far=4, sharpness=sharpness)
        induction_split(Head(model, HeadId(1, 2)), 0.6, far=None, sharpness=sharpness)
        induction_split(Head(model, HeadId(1, 5)), 0.8, far=4, sharpness=sharpness)
        induction_split(Head(model, HeadId(1, 6)), 0.64, far=7, sharpness=sharpness)
    return model


def split_roles() -> list[list[str]]:
    """``roles[layer][head]`` discovery must return for :func:`split_model`."""
    roles = expected_roles()
    for h, (_, role) in SPLIT.items():
        roles[h.layer][h.head] = role
    return roles
