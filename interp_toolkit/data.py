"""Corpora, tokenization and the training stream.

A corpus is named by a string:

- ``stdlib`` (default, offline): the running Python's standard-library ``.py`` files, tests excluded.
- a path: a text file, or a folder whose text files (``.txt .md .py .rst .json .csv .html .tex``) are read.
- ``hf:NAME`` or ``hf:NAME:SPLIT`` (e.g. ``hf:Skylion007/openwebtext``): a Hugging Face dataset,
  streamed; needs the network (or the HF cache).

Documents are GPT-2-tokenized in parallel, joined with ``<|endoftext|>`` and cut into windows of
``n_ctx`` tokens. Documents are split deterministically (by a hash of their name) into training and
held-out sets. The training stream can replace a fraction of windows with *repeated-span windows*:
random tokens from the model's vocabulary with one span repeated periodically at a random offset —
the CPU recipe's way of showing the model many repeats per step (see README).
"""

from __future__ import annotations

import os
import sysconfig
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import EOT_ID, CompactVocab, GPT2Codec, encode_batch

TEXT_SUFFIXES = {".txt", ".md", ".py", ".rst", ".json", ".csv", ".html", ".tex"}
_EXCLUDED_STDLIB_PARTS = {
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "__pycache__",
}


@dataclass(frozen=True)
class DataConfig:
    """Where training text comes from and how windows are made.

    ``vocab_size``: compact vocabulary size K (the corpus's K-1 most frequent GPT-2 ids + ``<unk>``);
    ``None`` keeps the full GPT-2 vocabulary. ``repeat_fraction``: share of each batch made of
    repeated-span windows (0 = plain text). Spans are ``span_min``..``span_max`` tokens
    (``span_max`` defaults to n_ctx // 3) and repeat from a random offset to the window's end.
    """

    corpus: str = "stdlib"
    vocab_size: int | None = 1024
    repeat_fraction: float = 0.5
    span_min: int = 3
    span_max: int | None = None
    val_fraction: float = 0.02
    max_tokens: int | None = None

    def validate(self) -> None:
        if self.vocab_size is not None and not 3 <= self.vocab_size <= 50257:
            raise UserError(
                f"vocab_size={self.vocab_size} cannot work: use 3..50257, or none for full GPT-2."
            )
        if not 0.0 <= self.repeat_fraction <= 1.0:
            raise UserError(f"repeat_fraction={self.repeat_fraction} must be between 0 and 1.")
        if self.span_min < 2:
            raise UserError(f"span_min={self.span_min} must be at least 2.")
        if not 0.0 < self.val_fraction < 0.5:
            raise UserError(f"val_fraction={self.val_fraction} must be in (0, 0.5).")


@dataclass
class Document:
    name: str
    text: str


def stdlib_files() -> list[Path]:
    """The standard library's ``.py`` files (no tests, no site-packages), sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if any(p in _EXCLUDED_STDLIB_PARTS or p.startswith("test_") for p in parts):
            continue
        files.append(path)
    return sorted(files)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def iter_documents(corpus: str, max_tokens: int | None = None) -> Iterator[Document]:
    """Documents of a corpus spec (see module doc). Raises UserError with the fix on bad specs."""
    if corpus == "stdlib":
        root = Path(sysconfig.get_paths()["stdlib"])
        for path in stdlib_files():
            yield Document(str(path.relative_to(root)), _read(path))
        return
    if corpus.startswith("hf:"):
        yield from _iter_hf(corpus[3:], max_tokens)
        return
    path = Path(corpus).expanduser()
    if not path.exists():
        raise UserError(
            f"corpus {corpus!r} is neither 'stdlib', 'hf:NAME' nor an existing path: check the path."
        )
    if path.is_file():
        yield Document(path.name, _read(path))
        return
    found = False
    for file in sorted(path.rglob("*")):
        if file.is_file() and file.suffix.lower() in TEXT_SUFFIXES:
            found = True
            yield Document(str(file.relative_to(path)), _read(file))
    if not found:
        raise UserError(
            f"corpus folder {path} holds no text files ({', '.join(sorted(TEXT_SUFFIXES))}): "
            "point --corpus at a folder of text."
        )


def _iter_hf(spec: str, max_tokens: int | None) -> Iterator[Document]:
    name, _, split = spec.partition(":")
    split = split or "train"
    if not name:
        raise UserError(
            "an HF corpus needs a dataset name: use --corpus hf:NAME (e.g. hf:Skylion007/openwebtext)."
        )
    from interp_toolkit.io import hub_offline

    if hub_offline("HF_DATASETS_OFFLINE"):
        raise UserError(
            f"dataset {name!r} needs the network, and this machine is offline: "
            "use --corpus stdlib, or a local folder of text files."
        )
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split, streaming=True)
    except Exception as exc:  # network and hub errors come in many types
        raise UserError(
            f"could not open dataset {name!r} ({type(exc).__name__}): check the name and network."
        ) from None
    budget = max_tokens * 5 if max_tokens else None  # ~5 characters per GPT-2 token
    seen = 0
    for i, row in enumerate(ds):
        text = row.get("text") if isinstance(row, dict) else None
        if not text:
            continue
        yield Document(f"{name}/{i}", text)
        seen += len(text)
        if budget is not None and seen >= budget:
            break


def is_validation(name: str, val_fraction: float) -> bool:
    """Deterministic held-out assignment of a document by the CRC32 of its name."""
    return (zlib.crc32(name.encode("utf-8")) % 10_000) < val_fraction * 10_000


@dataclass
class TokenizedCorpus:
    """GPT-2 ids of a corpus: training and held-out documents joined with ``<|endoftext|>``."""

    corpus: str
    train_ids: np.ndarray
    val_ids: np.ndarray
    n_documents: int

    def gpt2_counts(self) -> np.ndarray:
        return np.bincount(self.train_ids, minlength=50257)


def cache_dir() -> Path:
    """Where tokenized corpora are cached (``$INTERP_TOOLKIT_CACHE``, else ``~/.cache/interp-toolkit``)."""
    env = os.environ.get("INTERP_TOOLKIT_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp-toolkit"


def _stdlib_cache_key(val_fraction: float) -> str:
    import hashlib
    import sys

    h = hashlib.sha1(f"v1|{sys.version}|{val_fraction}".encode())
    for path in stdlib_files():
        st = path.stat()
        h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def tokenize_corpus(
    corpus: str, val_fraction: float = 0.02, max_tokens: int | None = None
) -> TokenizedCorpus:
    """GPT-2 ids of a corpus, split into training and held-out documents.

    The embedded ``stdlib`` corpus is cached (keyed by the files' names, sizes and times) so
    later runs skip the ~10 s of reading and tokenizing.
    """
    if corpus != "stdlib":
        return _tokenize(corpus, val_fraction, max_tokens)
    file = cache_dir() / f"stdlib-{_stdlib_cache_key(val_fraction)}.npz"
    full = None
    if file.is_file():
        try:
            with np.load(file) as z:
                full = TokenizedCorpus(corpus, z["train"], z["val"], int(z["n_documents"]))
        except (OSError, ValueError, KeyError):
            full = None  # unreadable cache: rebuild it
    if full is None:
        full = _tokenize(corpus, val_fraction, None)
        try:
            from interp_toolkit.io import write_with

            def _save(tmp: Path) -> None:
                with open(tmp, "wb") as fh:
                    np.savez(
                        fh, train=full.train_ids, val=full.val_ids, n_documents=full.n_documents
                    )

            write_with(file, _save)
        except OSError:
            pass  # a read-only home is fine: we just do not cache
    if max_tokens is not None:
        full.train_ids = full.train_ids[:max_tokens]
    return full


def _tokenize(corpus: str, val_fraction: float, max_tokens: int | None) -> TokenizedCorpus:
    docs = list(iter_documents(corpus, max_tokens))
    docs = [d for d in docs if d.text.strip()]
    if not docs:
        raise UserError(f"corpus {corpus!r} is empty: give it some text.")
    ids = encode_batch([d.text for d in docs], num_threads=max(1, min(2, os.cpu_count() or 1)))
    train: list[np.ndarray] = []
    val: list[np.ndarray] = []
    eot = np.array([EOT_ID], dtype=np.int64)
    for doc, toks in zip(docs, ids, strict=True):
        (val if is_validation(doc.name, val_fraction) else train).extend(
            [np.asarray(toks, dtype=np.int64), eot]
        )
    if not val:  # tiny corpora: hold out the last document
        val, train = train[-2:], train[:-2]
    train_ids = np.concatenate(train) if train else np.zeros(0, dtype=np.int64)
    val_ids = np.concatenate(val)
    if max_tokens is not None:
        train_ids = train_ids[:max_tokens]
    return TokenizedCorpus(corpus, train_ids, val_ids, len(docs))


def build_codec(corpus: TokenizedCorpus, vocab_size: int | None) -> CompactVocab | GPT2Codec:
    if vocab_size is None or vocab_size >= 50257:
        return GPT2Codec()
    return CompactVocab.from_counts(corpus.gpt2_counts(), vocab_size)


def windows(
    ids: np.ndarray, codec: CompactVocab | GPT2Codec, n_ctx: int
) -> Int[torch.Tensor, "window pos"]:
    """Cut GPT-2 ids into non-overlapping windows of ``n_ctx`` model ids (the tail is dropped)."""
    n = len(ids) // n_ctx
    mapped = codec.from_gpt2(ids[: n * n_ctx])
    return torch.from_numpy(np.ascontiguousarray(mapped.reshape(n, n_ctx)))


def repeated_span_windows(
    rng: np.random.Generator, n: int, n_ctx: int, low: int, high: int, span_min: int, span_max: int
) -> np.ndarray:
    """``n`` windows of random ids in [low, high); in each, a span of random length L in
    [span_min, span_max] repeats with period L from a random start to the window's end."""
    x = rng.integers(low, high, (n, n_ctx))
    span = rng.integers(span_min, span_max + 1, n)[:, None]
    start = (rng.random(n) * np.maximum(1, n_ctx - 2 * span[:, 0] + 1)).astype(np.int64)[:, None]
    pos = np.arange(n_ctx)[None, :]
    src = np.where(pos >= start + span, start + (pos - start) % span, pos)
    return np.take_along_axis(x, src, axis=1)


class TrainStream(torch.utils.data.Dataset):
    """The training data as a deterministic function of (seed, global sample index).

    Sample ``g`` belongs to step ``g // batch_size``; the first ``round(batch_size * repeat_fraction)``
    rows of every step are repeated-span windows, the rest are text windows in a seeded per-epoch
    permutation. Because every sample is fixed by its index, a resumed run sees exactly the batches
    an uninterrupted one would.

    TransformerLens's ``train`` wraps the dataset in ``DataLoader(shuffle=True)`` after reseeding the
    global RNG, so it would reorder (and, on resume, repeat) samples. We work around that trap: items
    are served in stream order by position within the loop (an internal cursor), and the index the
    sampler asks for is ignored. ``__len__`` is the number of samples still to serve.
    """

    def __init__(
        self,
        text_windows: Int[torch.Tensor, "window pos"],
        *,
        batch_size: int,
        repeat_fraction: float,
        low: int,
        high: int,
        span_min: int,
        span_max: int,
        seed: int,
        start_step: int = 0,
        end_step: int = 0,
    ) -> None:
        self.text = text_windows
        self.n_ctx = int(text_windows.shape[1])
        self.batch_size = batch_size
        self.n_repeat = int(round(batch_size * repeat_fraction))
        self.low, self.high = low, high
        self.span_min, self.span_max = span_min, span_max
        self.seed = seed
        self.start_step, self.end_step = start_step, end_step
        self._cursor = start_step * batch_size
        self._perms: dict[int, np.ndarray] = {}
        self._block_step = -1
        self._block = torch.zeros(0, self.n_ctx, dtype=torch.long)
        if self.n_repeat < batch_size and len(self.text) == 0:
            raise UserError(
                "the corpus is too short for one window: use a larger corpus or a smaller n_ctx."
            )

    def __len__(self) -> int:
        return max(0, (self.end_step - self.start_step) * self.batch_size)

    def _repeat_block(self, step: int) -> torch.Tensor:
        """The repeated-span rows of one step, drawn at once from the step's own generator."""
        if self._block_step != step:
            rng = np.random.default_rng([self.seed, 1, step])
            ids = repeated_span_windows(
                rng, self.n_repeat, self.n_ctx, self.low, self.high, self.span_min, self.span_max
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
            perm = np.random.default_rng([self.seed, 2, epoch]).permutation(len(self.text))
            self._perms = {epoch: perm}
        return self.text[int(perm[i])]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        g = self._cursor
        self._cursor += 1
        return {"tokens": self.sample(g)}

    def batch(self, step: int) -> Int[torch.Tensor, "batch pos"]:
        """The batch of a given step (for tests and inspection)."""
        g0 = step * self.batch_size
        return torch.stack([self.sample(g0 + r) for r in range(self.batch_size)])
