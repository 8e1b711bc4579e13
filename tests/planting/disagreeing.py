"""A hand-built model on which the old rules for "the induction head" disagree (issue 23).

Built from :mod:`planting.circuits`' blocks (2 layers x 2 heads, the residual blocks TOK/POS/MID/OUT;
the standard probe at n_ctx 32 has period 13):

- 0.0: the previous-token head (writes the previous token's id into MID);
- 0.1: a positional head: query p attends to key p - 12 (= p - period + 1), so on the probe it
  scores ~1 on both induction scores, in layer 0, with no composition at all; value norm 1;
- 1.0: K-composition induction key (logit ALPHA) and BOS (logit ALPHA - ln 1.5): 60% / 40% in the
  second repeat; BOS's value norm 3 (others 1): plain induction 0.6, value-weighted 0.6/1.8 = 1/3;
- 1.1: induction key and BOS at logit ALPHA each (50% / 50%); BOS's value norm 1/3: plain 0.5,
  value-weighted 0.5/(0.5 + 0.5/3) = 0.75.

Old rules: any layer, value-weighted (the run report): 0.1; layer >= 1, plain (the stop rule): 1.0;
layer >= 1, value-weighted (the causal check): 1.1. The one rule (layer >= 1, the deciding score,
value-weighted by default): 1.1. Layer-1 heads write nothing (O = 0).
"""

from __future__ import annotations

import math

import torch

from interp_toolkit.heads.registry import HeadId
from planting.blank import ALPHA, BLOCK, POS, TOK, Head
from planting.circuits import blank_circuit_model, induction_query_key, previous_token_head

PERIOD = 13  # default_layout(32): prefix up to 4, period (32 - 1 - 4) // 2
PLAIN = {(1, 0): 0.6, (1, 1): 0.5}
VALUE_WEIGHTED = {(1, 0): 1 / 3, (1, 1): 0.75}


def _split_with_bos(h: Head, bos_logit: float, bos_norm: float) -> None:
    """Induction key at logit ALPHA (dims 0..31), BOS at ``bos_logit`` (dim 32); value = the
    token, BOS's with norm ``bos_norm``."""
    induction_query_key(h)
    for t in range(BLOCK):
        h.q[BLOCK, TOK + t] = h.scale
        h.v[t, TOK + t] = bos_norm if t == 0 else 1.0
    h.k[BLOCK, POS] = bos_logit / ALPHA  # the query carries ALPHA * sqrt(d_head)


def disagreeing_model():
    """The model of the module docstring."""
    model = blank_circuit_model()
    with torch.no_grad():
        previous_token_head(model)
        pos = Head(model, HeadId(0, 1))
        for p in range(PERIOD - 1, BLOCK):
            pos.q[p - (PERIOD - 1), POS + p] = pos.scale  # query p looks for dim p - 12 ...
        for p in range(BLOCK):
            pos.k[p, POS + p] = 1.0  # ... which key p - 12 has
            pos.v[p, TOK + p] = 1.0
        _split_with_bos(Head(model, HeadId(1, 0)), ALPHA - math.log(1.5), 3.0)
        _split_with_bos(Head(model, HeadId(1, 1)), ALPHA, 1 / 3)
    return model
