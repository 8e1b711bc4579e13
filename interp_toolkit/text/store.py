"""The token store: a corpus's token ids, written once to disk and read through memory maps.

One entry is a folder ``<cache>/tokens/<label>-<key>/``:

- ``train.bin``, ``val.bin``: raw token ids (``uint16`` when the vocabulary has at most 65,536
  ids, as GPT-2's 50,257 do; ``uint32`` otherwise) of the documents assigned to each set;
- ``meta.json``: the dtype, each file's length in tokens, the ``train``/``val`` segments (a file
  and a token range: the held-out set may be a range of ``train.bin``), and what the entry was
  built from.

An entry is built in a temporary folder ``.<name>.tmp-<pid>`` and renamed into place only when
complete, so a folder under its final name is always whole. An interrupted build leaves at most
that temporary folder, which no reader trusts and the next build removes once its process is
gone. Opening an entry checks each file's size against ``meta.json``; any mismatch means
"rebuild". Readers memory-map the files (``np.memmap``) and never load them whole:
:class:`TokenWindows` reads one window at a time and :func:`bincount` counts in chunks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Int

from interp_toolkit.errors import UserError
from interp_toolkit.text.codecs import EOT_ID, Codec

FORMAT = 1
SEGMENTS = ("train", "val")
CHUNK = 1 << 20  # tokens per read when streaming over a store


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned dtype holding every id below ``vocab_size``."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def bincount(ids: np.ndarray, minlength: int) -> np.ndarray:
    """``np.bincount`` of a (memory-mapped) id array, read ``CHUNK`` tokens at a time."""
    counts = np.zeros(minlength, dtype=np.int64)
    for start in range(0, len(ids), CHUNK):
        counts += np.bincount(ids[start : start + CHUNK], minlength=minlength)
    return counts


class StoreWriter:
    """Appends ids to the segment files of an entry under construction."""

    def __init__(self, folder: Path, dtype: np.dtype) -> None:
        self.folder, self.dtype = folder, dtype
        self.sizes = dict.fromkeys(SEGMENTS, 0)
        self.segments: dict[str, list[Any]] | None = None
        self._files = {s: open(folder / f"{s}.bin", "wb") for s in SEGMENTS}

    def append(self, segment: str, ids: Sequence[int] | np.ndarray) -> None:
        with _writing(self.folder.parent):
            self._files[segment].write(np.asarray(ids, dtype=self.dtype).tobytes())
        self.sizes[segment] += len(ids)

    def hold_out_tail(self, fraction: float) -> None:
        """One stream instead of two: ``val.bin``'s ids are appended to ``train.bin`` and the
        held-out set becomes the last ``ceil(fraction * n)`` ids of it."""
        with _writing(self.folder.parent):
            train, val = self._files["train"], self._files["val"]
            val.flush()
            with open(val.name, "rb") as src:
                shutil.copyfileobj(src, train, CHUNK * self.dtype.itemsize)
            val.seek(0)
            val.truncate()
        n = self.sizes["train"] + self.sizes["val"]
        self.sizes = {"train": n, "val": 0}
        cut = n - math.ceil(n * fraction)
        self.segments = {"train": ["train.bin", 0, cut], "val": ["train.bin", cut, n]}

    def close(self) -> dict[str, Any]:
        """Close the files; the ``files`` and ``segments`` entries of ``meta.json``."""
        with _writing(self.folder.parent):
            for f in self._files.values():
                f.close()
        segments = self.segments or {s: [f"{s}.bin", 0, self.sizes[s]] for s in SEGMENTS}
        return {
            "dtype": self.dtype.name,
            "files": {f"{s}.bin": self.sizes[s] for s in SEGMENTS},
            "segments": segments,
        }


@contextmanager
def _writing(root: Path) -> Iterator[None]:
    """Turn an OSError while writing the store into a one-line UserError with the fix."""
    try:
        yield
    except OSError as exc:
        raise UserError(
            f"could not write the token cache in {root} ({exc.strerror or exc}): "
            "free disk space, or set INTERP_TOOLKIT_CACHE to a writable folder."
        ) from None


@dataclass(frozen=True)
class TokenStore:
    """A complete entry; :meth:`segment` memory-maps one of its sets."""

    folder: Path
    meta: dict[str, Any]

    def segment(self, name: str) -> np.ndarray:
        file, start, stop = self.meta["segments"][name]
        n = self.meta["files"][file]
        dtype = np.dtype(self.meta["dtype"])
        if n == 0:  # np.memmap cannot map an empty file
            return np.zeros(0, dtype=dtype)
        mm = np.memmap(self.folder / file, dtype=dtype, mode="r", shape=(n,))
        return mm[start:stop]


def open_store(folder: Path) -> TokenStore | None:
    """The entry in ``folder`` if it is complete and its files have the recorded sizes."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            return None
        itemsize = np.dtype(meta["dtype"]).itemsize
        for file, n in meta["files"].items():
            if (folder / file).stat().st_size != n * itemsize:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return TokenStore(folder, meta)


def build_store(
    root: Path,
    name: str,
    meta: dict[str, Any],
    dtype: np.dtype,
    fill: Callable[[StoreWriter], dict[str, Any]],
) -> TokenStore:
    """Build entry ``root/name``: ``fill`` appends the ids and returns more metadata.

    ``meta["source"]`` names what the entry was built from: other entries of the same source
    (older versions of its files) are removed once this one is in place, as are entries whose
    ``meta["path"]`` no longer exists.
    """
    final = root / name
    tmp = root / f".{name}.tmp-{os.getpid()}"
    with _writing(root):
        root.mkdir(parents=True, exist_ok=True)
        _remove_dead_temps(root)
        if final.exists() and open_store(final) is None:  # damaged: rebuild it
            shutil.rmtree(final, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    try:
        with _writing(root):
            writer = StoreWriter(tmp, dtype)
        try:
            extra = fill(writer)
        finally:
            files = writer.close()
        with _writing(root):
            text = json.dumps({"format": FORMAT, **meta, **extra, **files}, indent=1)
            (tmp / "meta.json").write_text(text + "\n", encoding="utf-8")
            try:
                os.rename(tmp, final)
            except OSError:
                if open_store(final) is None:  # not a concurrent build of the same entry
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(root, name, meta["source"])
    store = open_store(final)
    assert store is not None
    return store


def _remove_dead_temps(root: Path) -> None:
    for tmp in root.glob(".*.tmp-*"):
        pid = tmp.name.rpartition("-")[2]
        if pid.isascii() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prune(root: Path, keep: str, source: str) -> None:
    for entry in root.iterdir():
        if entry.name == keep or entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        path = meta.get("path")
        if meta.get("source") == source or (path and not Path(path).exists()):
            shutil.rmtree(entry, ignore_errors=True)


class TokenWindows:
    """Non-overlapping windows of ``n_ctx`` model ids over an id array (the tail is dropped).

    The ids are usually a memory-mapped segment of a :class:`TokenStore`: indexing reads just the
    windows asked for and maps them through the codec, so nothing is loaded whole. ``len`` and
    integer indexing are what :class:`~interp_toolkit.text.stream.TrainStream` needs; a slice with step
    1 gives a ``(windows, n_ctx)`` tensor.
    """

    def __init__(self, ids: np.ndarray, codec: Codec | None, n_ctx: int) -> None:
        self.ids = np.asarray(ids)  # a plain view of a memmap: faster to slice, still not loaded
        self.codec, self.n_ctx = codec, n_ctx
        self.shape = (len(ids) // n_ctx, n_ctx)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: int | slice) -> Int[torch.Tensor, "*window pos"]:
        n, rows = self.n_ctx, range(len(self))[index]  # IndexError past the end
        if isinstance(rows, int):
            return torch.from_numpy(self._model_ids(self.ids[rows * n : (rows + 1) * n]))
        if rows.step != 1:
            raise ValueError("TokenWindows slices take step 1")
        ids = self.ids[rows.start * n : max(rows.start, rows.stop) * n]
        return torch.from_numpy(self._model_ids(ids).reshape(-1, n))

    def _model_ids(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` as model ids (``codec`` None: they are model ids already)."""
        return np.asarray(ids, dtype=np.int64) if self.codec is None else self.codec.from_store(ids)

    def spread(self, n: int) -> tuple[Int[torch.Tensor, "window pos"], list[int] | None]:
        """``n`` windows spread evenly over all of them (all when there are fewer), in order,
        and the document each starts in (0, 1, ...: documents end at the store's separator, the
        end-of-text id or byte 0), so that a statistic over them can resample documents; None
        for ids without a codec (no separator known)."""
        count = len(self)
        idx = np.unique(np.linspace(0, max(0, count - 1), min(n, count)).round().astype(np.int64))
        rows = np.concatenate(
            [self.ids[:0], *(self.ids[i * self.n_ctx : (i + 1) * self.n_ctx] for i in idx)]
        )
        windows = torch.from_numpy(self._model_ids(rows).reshape(-1, self.n_ctx))
        if self.codec is None:
            return windows, None
        sep = 0 if self.codec.store == "bytes" else EOT_ID  # what ends a document in the store
        bounds = [0, *(int(i) * self.n_ctx for i in idx)]
        seps = [np.count_nonzero(self.ids[a:b] == sep) for a, b in pairwise(bounds)]
        return windows, np.cumsum(seps, dtype=np.int64).tolist()
