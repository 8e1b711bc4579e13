"""Token labels a person can read: whitespace made visible, one label per model id."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from interp_toolkit.text.codecs import ENDOFTEXT, UNK, Codec

#: What each whitespace character reads as in a label.
VISIBLE = str.maketrans({" ": "·", "\n": "↵", "\t": "→", "\r": "␍"})


def visible_token(token: str) -> str:
    """A token label with its whitespace made visible: ``' the'`` -> ``'·the'``, ``'\\n'`` -> ``'↵'``."""
    if token in (UNK, ENDOFTEXT):
        return token
    return token.translate(VISIBLE) or "∅"


def token_labels(codec: Codec | None, tokens: Sequence[int] | Tensor) -> list[str]:
    """Decoded tokens of ``tokens`` (model ids) with spaces visible; ``<unk>`` stays ``<unk>``."""
    ids = tokens.tolist() if isinstance(tokens, Tensor) else [int(t) for t in tokens]
    if codec is None:
        return [str(i) for i in ids]
    return [visible_token(s) for s in codec.str_tokens(ids)]
