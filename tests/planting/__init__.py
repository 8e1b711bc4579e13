"""The planting kit: models whose every weight is written by hand, so the tests know the answer.

- :mod:`planting.blank` (re-exported here): the shared machinery: :func:`blank_model` (a native
  attention-only model with every weight 0 but the one-hot embedding, positions and unembedding),
  the residual block layout (:data:`BLOCK`, :data:`TOK`, :data:`POS`), :class:`Head` (one head's
  QK/OV, written by hand), :data:`ALPHA` and :func:`letters_codec` (the 32-id vocabulary);
- :mod:`planting.circuits`: known-answer composition circuits, 2 layers x 2 heads (the K- and
  Q-composition circuits, their controls, the chain and stripes models);
- :mod:`planting.heads`: 16 planted heads on 2 layers x 8, each with the role discovery must (or
  must not) give it (:data:`planting.heads.PLANTED`), and the split heads;
- :mod:`planting.disagreeing`: a circuit model on which the old rules for "the induction head"
  disagree (issue 23).

The families keep their own ``CFG`` and block layout past ``POS``: import those from the family's
module (``from planting.circuits import CFG``).
"""

from planting.blank import ALPHA, BLOCK, LETTERS, POS, TOK, Head, blank_model, letters_codec

__all__ = ["ALPHA", "BLOCK", "LETTERS", "POS", "TOK", "Head", "blank_model", "letters_codec"]
