"""Corpus specs: what each names, what identifies its contents, and how its documents are read.

The specs are listed in :mod:`interp_toolkit.text.stream`. :func:`corpus_source` resolves one into a
:class:`CorpusSource`; documents are read (through ``datasets`` for dataset files and the Hub)
only when the token store has no entry for the source yet.
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError

TEXT_SUFFIXES = {".txt", ".md", ".py", ".rst", ".json", ".csv", ".html", ".tex"}
DATASET_SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}  # a single file
SHARD_SUFFIXES = {".parquet": "parquet", ".jsonl": "json"}  # a folder holding only these
_EXCLUDED_STDLIB_PARTS = {
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "__pycache__",
}


@dataclass
class Document:
    name: str
    text: str


def stdlib_files() -> list[Path]:
    """The standard library's ``.py`` files (no tests, no site-packages), sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, dirs, names in os.walk(root):  # excluded folders are not walked (site-packages)
        dirs[:] = [d for d in dirs if d not in _EXCLUDED_STDLIB_PARTS and not d.startswith("test_")]
        files += [Path(folder, n) for n in names if n.endswith(".py") and not n.startswith("test_")]
    return sorted(files)


#: How much of a file :func:`not_text` reads to decide.
SNIFF_BYTES = 1 << 16


def not_text(path: Path) -> str | None:
    """Why ``path`` is not UTF-8 text (a NUL byte, or more than 10% of its first
    :data:`SNIFF_BYTES` not UTF-8), or None when it reads as text."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"a NUL byte at offset {nul}: binary data"
    text = head.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad > 0.1 * len(text):
        return f"{bad / len(text):.0%} of its first {len(head):,} bytes are not UTF-8"
    return None


@dataclass(frozen=True)
class CorpusSource:
    """A resolved corpus spec: what identifies its contents, and how to read its documents.

    ``identity`` and the sizes and modification times of ``files`` key the token store;
    ``read()`` (called only when the store has no entry yet) returns the number of documents when
    known up front, for the progress bar, and an iterator over them.
    """

    spec: str
    label: str
    identity: str
    files: tuple[Path, ...]
    read: Callable[[], tuple[int | None, Iterator[Document]]]
    path: Path | None = None

    def key(self, *settings: object) -> str:
        """A hash of the identity, ``settings`` and each file's path, size and modification time."""
        h = hashlib.sha1("|".join(map(str, (self.identity, *settings))).encode())
        for file in self.files:
            st = file.stat()
            h.update(f"|{file}|{st.st_size}|{st.st_mtime_ns}".encode())
        return h.hexdigest()[:16]


def corpus_source(corpus: str, max_tokens: int | None = None) -> CorpusSource:
    """Resolve a corpus spec (see module doc). Raises UserError with the fix on bad specs."""
    if corpus == "stdlib":
        root = Path(sysconfig.get_paths()["stdlib"])
        files = tuple(stdlib_files())
        return CorpusSource(
            corpus, "stdlib", f"stdlib:{root}", files, lambda: (len(files), _texts(files, root))
        )
    spec, column = corpus, None
    if "#" in corpus and not Path(corpus).expanduser().exists():
        spec, _, column = corpus.rpartition("#")
    if spec.startswith("hf:"):
        return _hf_source(corpus, spec[3:], column or "text", max_tokens)
    path = Path(spec).expanduser()
    if not path.exists():
        raise UserError(
            f"corpus {corpus!r} is neither 'stdlib', 'hf:NAME' nor an existing path: check the path."
        )
    path = path.resolve()
    if not path.is_file() and not path.is_dir():  # a FIFO, a device, a socket
        from interp_toolkit.files.paths import path_kind

        raise UserError(
            f"corpus {corpus!r} is {path_kind(path)}: point --corpus at a text file, a folder of "
            "text files or a dataset file (.parquet, .jsonl)."
        )
    dataset = _dataset_files(path)
    if dataset is not None:
        builder, files = dataset
        col = column or "text"
        return CorpusSource(
            corpus,
            path.name,
            f"{builder}:{path}#{col}",
            tuple(files),
            lambda: _open_local_dataset(path, builder, files, col),
            path,
        )
    if column is not None:
        raise UserError(
            f"corpus {corpus!r}: '#{column}' names a dataset's text column, and {path} is plain "
            "text: drop the '#'."
        )
    root = path.parent if path.is_file() else path
    reason = not_text(path) if path.is_file() else None
    if reason:
        raise UserError(
            f"corpus {corpus!r} is not text ({reason}): point --corpus at UTF-8 text, a folder "
            "of text files or a dataset file (.parquet, .jsonl)."
        )
    files = (path,) if path.is_file() else _text_files(path)
    return CorpusSource(
        corpus, path.name, f"text:{path}", files, lambda: (len(files), _texts(files, root)), path
    )


def _text_files(folder: Path) -> tuple[Path, ...]:
    files = tuple(
        f for f in sorted(folder.rglob("*")) if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES
    )
    if not files:
        raise UserError(
            f"corpus folder {folder} holds no text files ({', '.join(sorted(TEXT_SUFFIXES))}): "
            "point --corpus at a folder of text."
        )
    return files


def _texts(files: tuple[Path, ...], root: Path) -> Iterator[Document]:
    """The documents of text files; a file of a folder that is not text is skipped, and said."""
    for file in files:
        reason = not_text(file) if len(files) > 1 else None
        if reason:
            print(f"corpus: skipping {file} ({reason})", file=sys.stderr, flush=True)
            continue
        yield Document(str(file.relative_to(root)), file.read_text("utf-8", errors="replace"))


def _dataset_files(path: Path) -> tuple[str, list[Path]] | None:
    """``(datasets builder, files)`` when ``path`` is a dataset file or folder, else None."""
    if path.is_file():
        builder = DATASET_SUFFIXES.get(path.suffix.lower())
        return (builder, [path]) if builder else None
    files = [f for f in sorted(path.rglob("*")) if f.is_file() and not f.name.startswith(".")]
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        return "disk", files
    builders = {SHARD_SUFFIXES.get(f.suffix.lower()) for f in files}
    if len(builders) == 1 and None not in builders:
        return builders.pop(), files
    return None


def _open_local_dataset(
    path: Path, builder: str, files: list[Path], column: str
) -> tuple[int | None, Iterator[Document]]:
    import datasets

    try:
        if builder == "disk":
            ds = datasets.load_from_disk(str(path))
            if isinstance(ds, datasets.DatasetDict):
                if "train" not in ds:
                    raise UserError(
                        f"{path} holds the splits {', '.join(ds)} and no 'train': point --corpus "
                        f"at one split's folder, e.g. {path / next(iter(ds))}."
                    )
                ds = ds["train"]
            total = len(ds)
        else:
            data_files = [str(f) for f in files]
            ds = datasets.load_dataset(
                builder, data_files=data_files, split="train", streaming=True
            )
            total = None
            if builder == "parquet":
                import pyarrow.parquet as pq

                total = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    except UserError:
        raise
    except Exception as exc:  # datasets and pyarrow raise many types for unreadable files
        raise UserError(
            f"could not read the dataset at {path} ({type(exc).__name__}): check the file."
        ) from None
    return total, _rows(ds, column, str(path), "")


def _hf_source(corpus: str, spec: str, column: str, max_tokens: int | None) -> CorpusSource:
    name, _, split = spec.partition(":")
    split = split or "train"
    if not name:
        raise UserError(
            "an HF corpus needs a dataset name: use --corpus hf:NAME (e.g. hf:Skylion007/openwebtext)."
        )
    budget = max_tokens * 5 if max_tokens else None  # ~5 characters per GPT-2 token

    def open_stream() -> tuple[int | None, Iterator[Document]]:
        from interp_toolkit.files.io import hub_offline

        if hub_offline("HF_DATASETS_OFFLINE"):
            raise UserError(
                f"dataset {name!r} needs the network, and this machine is offline: "
                "use --corpus stdlib, a local dataset file, or a folder of text files."
            )
        try:
            import datasets

            ds = datasets.load_dataset(name, split=split, streaming=True)
        except Exception as exc:  # network and hub errors come in many types
            raise UserError(
                f"could not open dataset {name!r} ({type(exc).__name__}): check the name and network."
            ) from None
        return None, _rows(ds, column, f"dataset {name!r}", f"{name}/", budget)

    identity = f"hf:{name}:{split}#{column}|chars={budget}"
    return CorpusSource(corpus, f"hf-{name}", identity, (), open_stream)


def _rows(
    ds: Any, column: str, where: str, prefix: str, budget: int | None = None
) -> Iterator[Document]:
    """Documents of a ``datasets`` dataset's text column, named ``prefix + row index``."""
    columns = ds.column_names
    if columns is not None and column not in columns:
        raise UserError(
            f"{where} has no {column!r} column (columns: {', '.join(columns)}): "
            "name the text column as --corpus SPEC#COLUMN."
        )
    if columns is not None:
        ds = ds.select_columns([column])
    return _row_texts(ds, column, where, prefix, budget)


def _row_texts(
    ds: Any, column: str, where: str, prefix: str, budget: int | None
) -> Iterator[Document]:
    seen = 0
    try:
        for i, row in enumerate(ds):
            text = row.get(column)
            if text is not None and not isinstance(text, str):
                raise UserError(
                    f"column {column!r} of {where} holds {type(text).__name__}, not text: "
                    "name the text column as --corpus SPEC#COLUMN."
                )
            if not text:
                continue
            yield Document(f"{prefix}{i}", text)
            seen += len(text)
            if budget is not None and seen >= budget:
                break
    except UserError:
        raise
    except Exception as exc:  # datasets and pyarrow raise many types for unreadable rows
        raise UserError(f"could not read {where} ({type(exc).__name__}): check the data.") from None
