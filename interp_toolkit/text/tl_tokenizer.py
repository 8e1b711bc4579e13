"""A TransformerLens tokenizer for our codecs, so text works on every model as on TL's own.

:class:`CodecTokenizer` is a ``transformers`` ``PreTrainedTokenizer`` (the Python backend) that
encodes with the codec itself: GPT-2 BPE first (tiktoken), then the compact id map, so its ids
are the codec's ids by construction. Its token strings are GPT-2's byte-level strings (``Ġthe``,
as GPT-2's own tokenizer shows them) plus ``<unk>`` for a compact vocabulary; decoding joins the
tokens' bytes, so text split inside a multi-byte character round-trips.

:func:`attach_tokenizer` puts it on a ``TransformerBridge`` the way TL's boot does for its
pretrained models: ``to_tokens`` puts BOS (``<|endoftext|>``) first, and ``to_str_tokens``,
``to_string``, ``generate``, ``utilities.test_prompt`` and ``head_detector.detect_head`` work.

Two choices TL's boot would otherwise make for us:

- TL re-loads a tokenizer by ``name_or_path`` unless it already adds BOS (``KeyError
  'name_or_path'`` for in-memory ones); ours is built with ``add_bos_token=True`` and a
  ``name_or_path`` label, so TL keeps it as it is.
- Like GPT-2's tokenizer, a literal ``<|endoftext|>`` (or ``<unk>``) in the text is that special
  token; the codec's ``encode`` reads it as ordinary text. Everywhere else the ids are equal.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from transformer_lens import TransformerBridge
from transformers import PreTrainedTokenizer

from interp_toolkit.text.codecs import (
    ENDOFTEXT,
    UNK,
    ByteCodec,
    Codec,
    CompactVocab,
    gpt2_bpe_files,
    gpt2_encoding,
)


@lru_cache(maxsize=1)
def gpt2_token_strings() -> tuple[str, ...]:
    """GPT-2's byte-level token strings, indexed by GPT-2 id (``encoder.json`` inverted)."""
    encoder_json, _ = gpt2_bpe_files()
    encoder: dict[str, int] = json.loads(encoder_json.read_text(encoding="utf-8"))
    return tuple(sorted(encoder, key=encoder.__getitem__))  # its ids are 0..50256, once each


@lru_cache(maxsize=1)
def byte_token_strings() -> list[str]:
    """One distinct token string per byte: GPT-2's byte-level alphabet (``Ġ`` for a space, as
    GPT-2's own tokenizer shows its single-byte tokens), ``<|endoftext|>`` for byte 0 (BOS)."""
    strings = gpt2_token_strings()
    enc = gpt2_encoding()
    by_byte = {enc.decode_single_token_bytes(g): s for g, s in enumerate(strings) if s}
    out = [by_byte[bytes([b])] for b in range(256)]
    out[ByteCodec.bos_id] = ENDOFTEXT
    return out


def _token_table(codec: Codec) -> tuple[list[str], list[bytes], str]:
    """Each model id's token string and bytes, and the tokenizer's label."""
    if isinstance(codec, ByteCodec):
        # BOS reads as <|endoftext|>, as GPT-2's does; every other id is its byte.
        table = [ENDOFTEXT.encode(), *(bytes([b]) for b in range(1, 256))]
        return byte_token_strings(), table, "interp-toolkit/bytes"
    enc = gpt2_encoding()
    strings = gpt2_token_strings()
    if isinstance(codec, CompactVocab):
        gpt2_ids = codec.gpt2_ids.tolist()
        label = f"interp-toolkit/compact-{codec.d_vocab}"
    else:
        gpt2_ids = list(range(codec.d_vocab))
        label = "interp-toolkit/gpt2-bpe"
    names = [strings[g] for g in gpt2_ids]
    table = [enc.decode_single_token_bytes(g) for g in gpt2_ids]
    if codec.unk_id is not None:
        names.append(UNK)
        table.append(UNK.encode())
    return names, table, label


class CodecTokenizer(PreTrainedTokenizer):
    """A ``transformers`` tokenizer whose ids are exactly a codec's ids (see the module docstring).

    BOS = EOS = padding = ``<|endoftext|>``; ``<unk>`` is the unknown token of a compact
    vocabulary (the full GPT-2 vocabulary has none). ``tokenizer("text")`` prepends BOS, as TL
    expects of a tokenizer with ``add_bos_token=True``.
    """

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self._strings, self._bytes, label = _token_table(codec)
        self._ids = {s: i for i, s in enumerate(self._strings)}
        super().__init__(
            name_or_path=label,
            bos_token=ENDOFTEXT,
            eos_token=ENDOFTEXT,
            pad_token=ENDOFTEXT,
            unk_token=UNK if codec.unk_id is not None else None,
            add_bos_token=True,
            special_tokens_pattern="bos",
            clean_up_tokenization_spaces=False,
        )

    @property
    def vocab_size(self) -> int:
        return len(self._strings)

    def get_vocab(self) -> dict[str, int]:
        return dict(self._ids)

    def _tokenize(self, text: str, **kwargs: Any) -> list[str]:
        return [self._strings[i] for i in self.codec.encode(text)]

    def _convert_token_to_id(self, token: str) -> int:
        unk = self.codec.unk_id
        if token in self._ids:
            return self._ids[token]
        if unk is None:
            raise KeyError(f"{token!r} is not a GPT-2 token")
        return unk

    def _convert_id_to_token(self, index: int) -> str:
        return self._strings[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        data = b"".join(self._bytes[self._ids[t]] for t in tokens)
        return data.decode("utf-8", errors="replace")


def attach_tokenizer(model: TransformerBridge, codec: Codec) -> TransformerBridge:
    """Give ``model`` the tokenizer of ``codec``; returns ``model`` (its forward is unchanged).

    Sets what TL's boot sets for a pretrained model: ``model.tokenizer``,
    ``cfg.tokenizer_prepends_bos`` (the tokenizer adds BOS itself) and
    ``cfg.default_prepend_bos=True``, so ``to_tokens("x")`` is ``[[bos_id, ...]]`` and
    ``to_tokens("x", prepend_bos=False)`` has no BOS. ``cfg.d_vocab`` must already equal the
    codec's size (TL re-derives it from the tokenizer's vocabulary and gets the same number).
    """
    d_vocab = int(model.cfg.d_vocab)
    if d_vocab != codec.d_vocab:
        raise ValueError(
            f"the model has d_vocab={d_vocab} but the codec has {codec.d_vocab} tokens: "
            "attach the codec the model was trained with"
        )
    model.tokenizer = CodecTokenizer(codec)
    model.cfg.tokenizer_prepends_bos = True
    model.cfg.tokenizer_appends_eos = False
    model.cfg.default_prepend_bos = True
    return model
