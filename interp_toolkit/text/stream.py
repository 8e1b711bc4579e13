"""Corpora, tokenization and the training stream.

A corpus is named by a string (:mod:`interp_toolkit.text.corpora` reads them):

- ``stdlib`` (default, offline): the running Python's standard-library ``.py`` files, tests excluded.
- a text file (one document), or a folder whose text files
  (``.txt .md .py .rst .json .csv .html .tex``) are the documents.
- a dataset on disk, read offline through ``datasets``, one document per row of its ``text``
  column: a ``.parquet`` file, a ``.jsonl``/``.json`` file (JSON lines or a JSON list), a folder
  written by ``save_to_disk`` (a ``DatasetDict`` uses its ``train`` split), or a folder holding
  only ``.parquet`` (or only ``.jsonl``) shards.
- ``hf:NAME`` or ``hf:NAME:SPLIT`` (e.g. ``hf:Skylion007/openwebtext``): a Hugging Face Hub
  dataset, streamed; needs the network the first time (afterwards the token store has it).
- ``SPEC#COLUMN`` reads another column as the text, for dataset files and ``hf:`` corpora.

Tokenized once: documents are GPT-2-tokenized in parallel batches and written, each followed by
``<|endoftext|>``, to a token store (:mod:`interp_toolkit.text.store`) under :func:`cache_dir`, keyed
by the source (each file's path, size and modification time; for ``hf:`` the name, split, column
and character budget) and ``val_fraction``. Later runs memory-map it; nothing reads it whole.

Held-out split: a document goes to the held-out set when the CRC32 of its name (its path in the
corpus, or its row index) falls in the first ``val_fraction`` of the hash range. When that leaves
no held-out document, or puts half or more of the tokens in the held-out set (a single file, a
folder of one or two files), the held-out set is instead the last ``ceil(val_fraction * N)`` of
the corpus's N tokens (documents in the order read, those the hash assigned to training first).

Training windows are non-overlapping ``n_ctx`` slices of the training tokens. The training stream
can replace a fraction of windows with *repeated-span windows*: random tokens from the model's
vocabulary with one span repeated periodically at a random offset — the CPU recipe's way of
showing the model many repeats per step (see README).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.progress import progress_bar
from interp_toolkit.runtime.seeds import np_rng
from interp_toolkit.text.codecs import (
    EOT_ID,
    GPT2_VOCAB_SIZE,
    ByteCodec,
    Codec,
    CompactVocab,
    GPT2Codec,
    encode_batch,
)
from interp_toolkit.text.corpora import CorpusSource, Document, corpus_source
from interp_toolkit.text.store import (
    FORMAT,
    StoreWriter,
    TokenWindows,
    bincount,
    build_store,
    open_store,
    token_dtype,
)


@dataclass(frozen=True)
class DataConfig:
    """Where training text comes from and how windows are made.

    ``codec``: ``"bpe"`` (GPT-2 BPE) or ``"bytes"`` (:class:`~interp_toolkit.text.codecs.ByteCodec`:
    256 ids, nothing unknown; ``vocab_size`` must then be None). ``vocab_size``: compact
    vocabulary size K (the corpus's K-1 most frequent GPT-2 ids + ``<unk>``); ``None`` keeps the
    full GPT-2 vocabulary. ``repeat_fraction``: share of each batch made of
    repeated-span windows (0 = plain text). Spans are ``span_min``..``span_max`` tokens
    (``span_max`` defaults to n_ctx // 2, the longest span that occurs twice in a context) and
    repeat from a random offset to the window's end.
    """

    corpus: str = "stdlib"
    codec: str = "bpe"
    vocab_size: int | None = 1024
    repeat_fraction: float = 0.5
    span_min: int = 2
    span_max: int | None = None
    val_fraction: float = 0.02
    max_tokens: int | None = None

    def validate(self) -> None:
        validate.text(self.corpus, "corpus", '"stdlib" or "data/my.txt"')
        if not isinstance(self.codec, str) or self.codec not in CODECS:
            raise UserError(f"codec={self.codec!r} is unknown: use {' or '.join(CODECS)}.")
        if self.codec == "bytes" and self.vocab_size is not None:
            raise UserError(
                f"vocab_size={self.vocab_size} does not apply to the byte codec (always 256 ids): "
                "leave it unset."
            )
        vocab = self.vocab_size
        if vocab is not None and (not validate.is_whole(vocab) or not 3 <= vocab <= 50257):
            raise UserError(
                f"vocab_size={vocab!r} cannot work: use 3..50257, or none for full GPT-2."
            )
        fraction = validate.number(self.repeat_fraction, "repeat_fraction", least=0)
        if fraction is not None and fraction > 1.0:
            raise UserError(f"repeat_fraction={self.repeat_fraction} must be between 0 and 1.")
        validate.count(self.span_min, "span_min", 2)
        validate.count(self.span_max, "span_max", 2, optional=True)
        validate.count(self.max_tokens, "max_tokens", optional=True)
        validate.number(self.val_fraction, "val_fraction", above=0, below=0.5)

    @property
    def store(self) -> str:
        """What the token store holds for this codec: ``"bytes"`` or ``"gpt2"`` (GPT-2 ids)."""
        return "bytes" if self.codec == "bytes" else "gpt2"

    @property
    def setting(self) -> str:
        """The training setting every verdict names: ``"natural text"`` (plain text only) or
        ``"curriculum"`` (some share of every batch is repeated-span windows)."""
        return setting_name(self.repeat_fraction)

    def span_range(self, n_ctx: int) -> tuple[int, int]:
        """``(span_min, span_max)`` of the repeated spans for a context of ``n_ctx`` tokens."""
        longest = n_ctx // 2
        span_max = longest if self.span_max is None else self.span_max
        if not self.span_min <= span_max <= longest:
            raise UserError(
                f"spans of {self.span_min}..{span_max} tokens cannot repeat in a context of "
                f"{n_ctx}: use span_min <= span_max <= {longest}."
            )
        return self.span_min, span_max


#: The codecs a run can train with (:attr:`DataConfig.codec`).
CODECS = ("bpe", "bytes")

#: The two training settings a verdict can be measured in (:attr:`DataConfig.setting`).
NATURAL_TEXT = "natural text"
CURRICULUM = "curriculum"


def setting_name(repeat_fraction: float) -> str:
    """``"natural text"`` for ``repeat_fraction == 0`` (no synthetic windows), else
    ``"curriculum"``; the one place a run's setting is named."""
    return NATURAL_TEXT if float(repeat_fraction) == 0.0 else CURRICULUM


def is_validation(name: str, val_fraction: float) -> bool:
    """Deterministic held-out assignment of a document by the CRC32 of its name."""
    return (zlib.crc32(name.encode("utf-8")) % 10_000) < val_fraction * 10_000


@dataclass
class TokenizedCorpus:
    """A corpus's ids, memory-mapped from the token store: the training and held-out sets, GPT-2
    ids (documents joined with ``<|endoftext|>``) or bytes (``store="bytes"``, documents joined
    with byte 0)."""

    corpus: str
    train_ids: np.ndarray
    val_ids: np.ndarray
    n_documents: int

    def gpt2_counts(self) -> np.ndarray:
        return bincount(self.train_ids, GPT2_VOCAB_SIZE)

    def digest(self) -> str:
        """The SHA-256 of the training and held-out ids (hex, 16 digits): the corpus a run
        trained on, recorded in its config.json and checked when its batches are read again."""
        import hashlib

        h = hashlib.sha256()
        for ids in (self.train_ids, self.val_ids):
            h.update(np.ascontiguousarray(ids).view(np.uint8).data)
            h.update(b"|")
        return h.hexdigest()[:16]


def cache_dir() -> Path:
    """Where tokenized corpora are cached (``$INTERP_TOOLKIT_CACHE``, else ``~/.cache/interp-toolkit``)."""
    env = os.environ.get("INTERP_TOOLKIT_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp-toolkit"


def tokenize_corpus(
    corpus: str,
    val_fraction: float = 0.02,
    max_tokens: int | None = None,
    progress: bool = True,
    *,
    store: str = "gpt2",
) -> TokenizedCorpus:
    """A corpus's ids, split into training and held-out sets (see module doc): GPT-2 ids, or
    its UTF-8 bytes with ``store="bytes"`` (what a codec's ``store`` names).

    The first call tokenizes the corpus into the token store (with a progress bar unless
    ``progress=False``); later calls memory-map it. ``max_tokens`` keeps the first training ids.
    """
    source = corpus_source(corpus, max_tokens)
    root = cache_dir() / "tokens"
    name = f"{_slug(source.label)}-{source.key(FORMAT, store, val_fraction)}"
    found = open_store(root / name)
    if found is None:
        # a byte store is its own source: building one never prunes the GPT-2 store of the
        # same corpus (build_store removes other entries of the same source), nor the reverse
        identity = source.identity if store == "gpt2" else f"{store}:{source.identity}"
        meta = {"source": identity, "path": str(source.path) if source.path else None}
        found = build_store(
            root,
            name,
            meta,
            token_dtype(GPT2_VOCAB_SIZE if store == "gpt2" else 256),
            lambda writer: _tokenize_into(writer, source, val_fraction, progress, store),
        )
    return TokenizedCorpus(
        corpus,
        found.segment("train")[:max_tokens],
        found.segment("val"),
        int(found.meta["documents"]),
    )


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._")[:40] or "corpus"


def _tokenize_into(
    writer: StoreWriter, source: CorpusSource, val_fraction: float, progress: bool, store: str
) -> dict[str, Any]:
    """Tokenize the source's documents batch by batch into the writer; apply the split rule."""
    total, docs = source.read()
    threads = max(1, min(2, os.cpu_count() or 1))
    n_docs = 0
    bar = progress_bar(
        docs, total=total, desc=f"tokenizing {source.label}", unit="doc", enabled=progress
    )
    with bar:
        for batch in _batches(d for d in bar if d.text.strip()):
            if store == "bytes":
                ids = [list(d.text.encode("utf-8")) for d in batch]
            else:
                ids = encode_batch([d.text for d in batch], num_threads=threads)
            for doc, toks in zip(batch, ids, strict=True):
                toks.append(EOT_ID if store == "gpt2" else ByteCodec.bos_id)
                writer.append("val" if is_validation(doc.name, val_fraction) else "train", toks)
            n_docs += len(batch)
            bar.set_postfix_str(f"{sum(writer.sizes.values()):,} tokens", refresh=False)
    if n_docs == 0:
        raise UserError(f"corpus {source.spec!r} is empty: give it some text.")
    split = "documents"
    if writer.sizes["val"] == 0 or writer.sizes["val"] >= writer.sizes["train"]:
        writer.hold_out_tail(val_fraction)
        split = "tail"
    return {"documents": n_docs, "split": split}


def _batches(docs: Iterator[Document], max_chars: int = 1 << 23) -> Iterator[list[Document]]:
    batch: list[Document] = []
    size = 0
    for doc in docs:
        batch.append(doc)
        size += len(doc.text)
        if size >= max_chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def build_codec(corpus: TokenizedCorpus, vocab_size: int | None, codec: str = "bpe") -> Codec:
    """The codec a run trains with: bytes, the full GPT-2 vocabulary, or a compact one built
    from the corpus's GPT-2 id counts."""
    if codec == "bytes":
        return ByteCodec()
    if vocab_size is None or vocab_size >= 50257:
        return GPT2Codec()
    return CompactVocab.from_counts(corpus.gpt2_counts(), vocab_size)


def windows(ids: np.ndarray, codec: Codec, n_ctx: int) -> TokenWindows:
    """Non-overlapping windows of ``n_ctx`` model ids over a store's ids, read when indexed (a
    codec that re-tokenizes text, :class:`~interp_toolkit.text.codecs.TokenizerCodec`, maps them
    first)."""
    if getattr(codec, "retokenizes", False):
        return TokenWindows(codec.from_store(ids), None, n_ctx)
    return TokenWindows(ids, codec, n_ctx)


def repeated_span_windows(
    rng: np.random.Generator, n: int, n_ctx: int, low: int, high: int, span_min: int, span_max: int
) -> np.ndarray:
    """``n`` windows of random ids in [low, high); in each, a span of random length L in
    [span_min, span_max] repeats with period L from a random start to the window's end.

    The start is uniform over the offsets that leave at least two tokens of the second copy (its
    second token is the first one induction can predict), so the repeat may be cut short by the
    window's end: spans of every length occur at many positions, and a model cannot learn to copy
    from a fixed position instead of doing induction.
    """
    x = rng.integers(low, high, (n, n_ctx))
    span = rng.integers(span_min, span_max + 1, n)[:, None]
    start = (rng.random(n) * np.maximum(1, n_ctx - span[:, 0] - 1)).astype(np.int64)[:, None]
    pos = np.arange(n_ctx)[None, :]
    src = np.where(pos >= start + span, start + (pos - start) % span, pos)
    return np.take_along_axis(x, src, axis=1)


@dataclass(eq=False)
class TrainStream:
    """The training data as a deterministic function of (seed, global sample index).

    Every sample is a window of ``text.shape[1]`` tokens; training cuts windows of
    ``n_ctx + 1`` tokens so that the model reads ``n_ctx`` of them and every one of its positions,
    the last one too, is trained to predict the next (with ``n_ctx``-token windows the last
    position would never get a loss, and its position embedding never a gradient).
    Sample ``g`` belongs to step ``g // batch_size``; the first ``round(batch_size * repeat_fraction)``
    rows of every step are repeated-span windows, the rest are text windows in a seeded per-epoch
    permutation. Because every sample is fixed by its index, a resumed run sees exactly the batches
    an uninterrupted one would.

    What TransformerLens's loop reads (steps ``start_step`` to ``end_step``, in order, each process
    its own rows) is :class:`~interp_toolkit.training.loop.StepFeed`.
    """

    text: Int[torch.Tensor, "window pos"] | TokenWindows
    _: KW_ONLY
    batch_size: int
    repeat_fraction: float
    low: int
    high: int
    span_min: int
    span_max: int
    seed: int
    start_step: int = 0
    end_step: int = 0

    def __post_init__(self) -> None:
        self.length = int(self.text.shape[1])
        self.n_repeat = int(round(self.batch_size * self.repeat_fraction))
        self._perms: dict[int, np.ndarray] = {}
        self._block_step = -1
        self._block = torch.zeros(0, self.length, dtype=torch.long)
        if self.n_repeat < self.batch_size and len(self.text) == 0:
            raise UserError(
                "the corpus is too short for one window: use a larger corpus or a smaller n_ctx."
            )

    def _repeat_block(self, step: int) -> torch.Tensor:
        """The repeated-span rows of one step, drawn at once from the step's own generator."""
        if self._block_step != step:
            rng = np_rng(self.seed, "repeat_rows", step)
            ids = repeated_span_windows(
                rng, self.n_repeat, self.length, self.low, self.high, self.span_min, self.span_max
            )
            self._block = torch.from_numpy(ids)
            self._block_step = step
        return self._block

    def sample(self, g: int) -> Int[torch.Tensor, " pos"]:
        step, row = divmod(g, self.batch_size)
        if row < self.n_repeat:
            return self._repeat_block(step)[row]
        per_step = self.batch_size - self.n_repeat
        t = step * per_step + (row - self.n_repeat)
        epoch, i = divmod(t, len(self.text))
        perm = self._perms.get(epoch)
        if perm is None:
            perm = np_rng(self.seed, "text_order", epoch).permutation(len(self.text))
            self._perms = {epoch: perm}
        return self.text[int(perm[i])]

    def batch(self, step: int, rows: range | None = None) -> Int[torch.Tensor, "batch pos"]:
        """The batch of a given step, or the given ``rows`` of it."""
        g0 = step * self.batch_size
        return torch.stack([self.sample(g0 + r) for r in rows or range(self.batch_size)])
