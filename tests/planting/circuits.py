"""Hand-built two-layer induction circuits with a known answer.

Every model is a :func:`planting.blank_model` of 2 layers x 2 heads, d_head 64, d_model 128 (the
vocabulary of :func:`planting.letters_codec`). The residual stream is four one-hot blocks of 32
dims:

====================  ==========================================================
``TOK`` (0..31)        the token's id (``W_E[t] = e_{TOK+t}``)
``POS`` (32..63)       the position (``W_pos[p] = e_{POS+p}``)
``MID`` (64..95)       written by the layer-0 head of the circuit: the previous token's id
                       (K-composition model) or the earlier copy's position (Q-composition model)
``OUT`` (96..127)      what the unembedding reads (``W_U[OUT+t, t] = 1``): the embedding alone
                       gives every logit 0
====================  ==========================================================

Attention logits are ``ALPHA`` (20) where a head should look and 0 elsewhere (``W_Q`` carries
``ALPHA·sqrt(d_head)``, undoing the 1/sqrt(d_head) scale), so a planted head puts
``1 - 31·e^-20`` of its attention where it should. All biases are 0.

- :func:`k_composition_model`: 0.0 is a previous-token head (query position p -> key p-1, by
  position) whose OV copies the attended token's id into ``MID``; 1.0 is an induction head whose
  query reads ``TOK`` and whose key reads ``MID`` (K-composition): it attends to the key whose
  previous token is the current token, and its OV copies the attended token to ``OUT`` with gain
  ``GAIN``.
- :func:`q_composition_model`: 0.0 is a duplicate-token head (attends to the earlier occurrence of
  the current token: +ALPHA for the same id, -ALPHA for the same position, so the query's own
  position cancels) whose OV copies the attended *position* into ``MID``; 1.0's query reads
  ``MID`` shifted by one position and its key reads ``POS`` (Q-composition): it attends to the
  position after the earlier copy; its OV copies, as above.
- :func:`control_model`: either model with head 0.0's OV zeroed (its attention is unchanged, but
  nothing reaches layer 1, which then attends uniformly): no induction anywhere.

In both circuit models (and their controls) 0.1 is an unrelated head: it attends to its own
position and writes the current token's id into ``OUT`` with gain ``UNRELATED_GAIN`` (a copying
head outside the circuit), and 1.1 is empty (all weights 0: uniform attention, no output).

:func:`stripes_model` is not a circuit: its heads split their attention in known proportions, so
that every head score has a known value.
"""

from __future__ import annotations

import torch

from interp_toolkit.heads.registry import HeadId
from interp_toolkit.models.build import ModelConfig
from planting.blank import BLOCK, POS, TOK, Head, blank_model

MID, OUT = 64, 96
GAIN = 4.0
UNRELATED_GAIN = 0.5
CFG = ModelConfig(n_layers=2, d_model=128, n_heads=2, d_head=64, n_ctx=BLOCK, d_vocab=BLOCK)


def blank_circuit_model():
    """:data:`CFG` blank (:func:`planting.blank_model`): the unembedding reads ``OUT``."""
    return blank_model(CFG, OUT)


def _unrelated_head(model) -> None:
    """0.1: attends to its own position; writes the current token into OUT."""
    h = Head(model, HeadId(0, 1))
    for p in range(BLOCK):
        h.q[p, POS + p] = h.scale
        h.k[p, POS + p] = 1.0
    h.copy(TOK, OUT, UNRELATED_GAIN)


def previous_token_head(model) -> None:
    """0.0: query position p looks at key p-1 (by position); OV copies that token's id to MID."""
    prev = Head(model, HeadId(0, 0))
    for p in range(1, BLOCK):
        prev.q[p - 1, POS + p] = prev.scale  # query at p looks for head dim p-1 ...
    for p in range(BLOCK):
        prev.k[p, POS + p] = 1.0  # ... which only key p-1 has
    prev.copy(TOK, MID)  # the previous token's id -> MID


def induction_query_key(h: Head) -> None:
    """K-composition: the current token (TOK) matches a key whose previous token it is (MID)."""
    for t in range(BLOCK):
        h.q[t, TOK + t] = h.scale
        h.k[t, MID + t] = 1.0


def k_composition_model():
    """Previous-token head 0.0 -> K-composition induction head 1.0 (module docstring)."""
    model = blank_circuit_model()
    with torch.no_grad():
        previous_token_head(model)
        ind = Head(model, HeadId(1, 0))
        induction_query_key(ind)
        ind.copy(TOK, OUT, GAIN)
        _unrelated_head(model)
    return model


def q_composition_model():
    """Duplicate-token head 0.0 -> Q-composition induction head 1.0 (module docstring)."""
    model = blank_circuit_model()
    with torch.no_grad():
        dup = Head(model, HeadId(0, 0))
        for i in range(BLOCK):
            dup.q[i, TOK + i] = dup.scale  # same id: +ALPHA
            dup.k[i, TOK + i] = 1.0
            dup.q[BLOCK + i, POS + i] = -dup.scale  # same position (itself): -ALPHA
            dup.k[BLOCK + i, POS + i] = 1.0
            dup.v[i, POS + i] = 1.0  # the attended position -> MID
            dup.o[MID + i, i] = 1.0
        ind = Head(model, HeadId(1, 0))
        for p in range(BLOCK - 1):
            ind.q[p + 1, MID + p] = ind.scale  # the earlier copy's position, plus one ...
        for p in range(BLOCK):
            ind.k[p, POS + p] = 1.0  # ... is the key's position
        ind.copy(TOK, OUT, GAIN)
        _unrelated_head(model)
    return model


def control_model(kind: str = "k"):
    """The K- (``"k"``) or Q-composition (``"q"``) model with head 0.0's OV zeroed: its attention
    is kept, but nothing it reads reaches the residual stream, so layer 1 attends uniformly and
    nothing induces."""
    model = CIRCUITS[kind][0]()
    d_head = int(model.cfg.d_head)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.v.original_component.weight[:d_head] = 0.0
        attn.o.original_component.weight[:, :d_head] = 0.0
    return model


#: The gain of head 1.1's OV in :func:`chain_model`.
CHAIN_GAIN = 4.0


def chain_model():
    """:func:`k_composition_model` plus a head 1.1 that writes nothing on any one run but hurts
    when its value inputs come from different runs (for pruning and the curve's search).

    1.1 attends like 1.0 (its query reads ``TOK``, its key reads 0.0's ``MID``: K-composition);
    its value is ``2 * OUT - TOK`` at the attended key, where ``OUT`` holds 0.1's write (half the
    key's token id), so it is 0 whenever 0.1's write and the token come from the same run; its
    OV writes that value to ``OUT`` with gain ``CHAIN_GAIN``. With its value edge from the
    embedding clean and the one from 0.1 corrupt (or 0.1's own value edge corrupt), the value is
    ``e(fresh) - e(right)``: 1.1 lowers the right token by ``CHAIN_GAIN``, below the corrupt
    run. With both clean, or both corrupt, or 1.1's output edge corrupt, it changes nothing."""
    model = k_composition_model()
    with torch.no_grad():
        h = Head(model, HeadId(1, 1))
        induction_query_key(h)
        for i in range(BLOCK):
            h.v[i, OUT + i] = 2.0
            h.v[i, TOK + i] = -1.0
            h.o[OUT + i, i] = CHAIN_GAIN
    return model


#: The value norm of BOS for head 1.1 of :func:`stripes_model` (every other token's is 1).
BOS_VALUE_NORM = 3.0


def stripes_model():
    """Heads whose every score is known, for the scorer's definitions (no OV but 0.0's):

    - 0.0: the previous-token head of :func:`k_composition_model` (it writes MID for 1.1);
    - 0.1: logit ALPHA at the previous key and at itself: half its attention on each;
    - 1.0: logit ALPHA at BOS (position 0) only (its query is constant: one per token);
    - 1.1: logit ALPHA at BOS and at the K-composition induction key: half on each in the second
      repeat, all on BOS before it. Its value vector reads the token: norm BOS_VALUE_NORM for
      BOS, 1 for every other token.
    """
    model = blank_circuit_model()
    with torch.no_grad():
        previous_token_head(model)
        both = Head(model, HeadId(0, 1))
        for p in range(1, BLOCK):
            both.q[p - 1, POS + p] = both.scale  # dims 0..31: the previous position
        for p in range(BLOCK):
            both.q[BLOCK + p, POS + p] = both.scale  # dims 32..63: the query's own position
            both.k[p, POS + p] = 1.0
            both.k[BLOCK + p, POS + p] = 1.0
        bos, ind = Head(model, HeadId(1, 0)), Head(model, HeadId(1, 1))
        for h in (bos, ind):
            for t in range(BLOCK):
                h.q[BLOCK, TOK + t] = h.scale  # dim 32: every token ...
            h.k[BLOCK, POS] = 1.0  # ... looks for position 0
        induction_query_key(ind)  # dims 0..31
        for t in range(BLOCK):
            ind.v[t, TOK + t] = BOS_VALUE_NORM if t == 0 else 1.0
    return model


#: kind -> (builder, the role of the circuit's layer-0 head 0.0)
CIRCUITS = {
    "k": (k_composition_model, "previous-token"),
    "q": (q_composition_model, "duplicate-token"),
}


def role_check_model():
    """:func:`k_composition_model` with two heads that attend like a role but do not do its work
    (the causal check's planted negatives, issue 30):

    - 1.1 attends like 1.0 (an induction head's pattern; its value reads the token, so its
      value-weighted induction score is 1.0's) but its output weights are 0: it writes nothing;
    - 0.1 attends to the previous token, like 0.0, but writes that token into ``OUT`` (the
      logits), where no layer-1 head reads: no induction head's query, key or value uses it.
    """
    model = k_composition_model()
    with torch.no_grad():
        looks = Head(model, HeadId(1, 1))
        induction_query_key(looks)
        looks.copy(TOK, OUT, 0.0)  # value: the token; output: nothing
        prev = Head(model, HeadId(0, 1))
        for p in range(1, BLOCK):
            prev.q[p - 1, POS + p] = prev.scale
        for p in range(BLOCK):
            prev.k[p, POS + p] = 1.0
        prev.copy(TOK, OUT, UNRELATED_GAIN)
    return model
