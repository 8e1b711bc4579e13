"""Corpus specs read through ``datasets``, the token store, and the held-out split rule."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.text import stream as data
from interp_toolkit.text.codecs import EOT_ID, CompactVocab, GPT2Codec, encode_batch
from interp_toolkit.text.store import TokenWindows, build_store, open_store, token_dtype

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(folder))
    return folder / "tokens"


def _texts(n: int = 120) -> list[str]:
    return [
        f"row {i}: the quick brown fox {'jumps ' * (i % 7)}over {i * 37} dogs.\n" for i in range(n)
    ]


def _expected(texts: list[str], val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Today's rule: each document + <|endoftext|>, held out by the hash of its row index."""
    train: list[int] = []
    val: list[int] = []
    for i, ids in enumerate(encode_batch(texts)):
        (val if data.is_validation(str(i), val_fraction) else train).extend([*ids, EOT_ID])
    return np.array(train), np.array(val)


def _datasets(folder: Path, texts: list[str]) -> dict[str, str]:
    import datasets

    ds = datasets.Dataset.from_dict({"text": texts, "id": list(range(len(texts)))})
    ds.to_parquet(str(folder / "c.parquet"))
    ds.to_json(str(folder / "c.jsonl"))
    ds.save_to_disk(str(folder / "saved"))
    datasets.DatasetDict({"train": ds, "test": ds.select(range(3))}).save_to_disk(
        str(folder / "saved_dict")
    )
    (folder / "shards").mkdir()
    half = len(texts) // 2
    ds.select(range(half)).to_parquet(str(folder / "shards" / "part-0.parquet"))
    ds.select(range(half, len(texts))).to_parquet(str(folder / "shards" / "part-1.parquet"))
    names = ("c.parquet", "c.jsonl", "saved", "saved_dict", "shards")
    return {name: str(folder / name) for name in names}


def test_dataset_files_tokenize_like_joined_documents(tmp_path, cache):
    texts = _texts()
    want_train, want_val = _expected(texts, 0.1)
    assert len(want_val) > 0 and len(want_train) > len(want_val)  # the hash split applies
    for name, spec in _datasets(tmp_path, texts).items():
        corpus = data.tokenize_corpus(spec, val_fraction=0.1, progress=False)
        assert isinstance(corpus.train_ids, np.memmap), name
        assert corpus.train_ids.dtype == np.uint16, name
        assert np.array_equal(corpus.train_ids, want_train), name
        assert np.array_equal(corpus.val_ids, want_val), name
        assert corpus.n_documents == len(texts), name
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 5


def test_store_is_reused_until_the_source_changes(tmp_path, cache, monkeypatch):
    calls = []
    monkeypatch.setattr(data, "encode_batch", lambda t, **kw: calls.append(1) or encode_batch(t))
    spec = _datasets(tmp_path, _texts())["c.parquet"]
    first = data.tokenize_corpus(spec, progress=False)
    (entry,) = cache.iterdir()
    stamp = (entry / "train.bin").stat().st_mtime_ns
    again = data.tokenize_corpus(spec, progress=False)
    assert len(calls) == 1 and (entry / "train.bin").stat().st_mtime_ns == stamp
    assert np.array_equal(first.train_ids, again.train_ids)
    # a new version of the file: tokenized again, and the old entry is replaced
    import datasets

    datasets.Dataset.from_dict({"text": ["changed text"] * 40}).to_parquet(spec)
    changed = data.tokenize_corpus(spec, progress=False)
    assert len(calls) == 2 and changed.n_documents == 40
    assert [p.name for p in cache.iterdir()] != [entry.name] and len(list(cache.iterdir())) == 1


def test_missing_text_column_names_the_columns_and_hash_column_reads_another(tmp_path):
    import datasets

    path = tmp_path / "body.parquet"
    datasets.Dataset.from_dict({"body": _texts(30), "id": list(range(30))}).to_parquet(str(path))
    with pytest.raises(UserError, match=r"no 'text' column \(columns: body, id\).*#COLUMN"):
        data.tokenize_corpus(str(path), progress=False)
    corpus = data.tokenize_corpus(f"{path}#body", progress=False)
    assert corpus.n_documents == 30
    with pytest.raises(UserError, match="holds int, not text"):
        data.tokenize_corpus(f"{path}#id", progress=False)
    text = tmp_path / "a.txt"
    text.write_text("plain text")
    with pytest.raises(UserError, match="drop the '#'"):
        data.tokenize_corpus(f"{text}#body", progress=False)


def test_saved_dataset_dict_without_train_split_is_one_line(tmp_path):
    import datasets

    ds = datasets.Dataset.from_dict({"text": _texts(5)})
    datasets.DatasetDict({"a": ds, "b": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(UserError, match="splits a, b and no 'train'"):
        data.tokenize_corpus(str(tmp_path / "dd"), progress=False)


def test_single_file_or_one_file_folder_holds_out_its_last_tokens(tmp_path):
    text = "".join(f"line {i}: value = compute({i}, {i * 7})\n" for i in range(500))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "only.txt").write_text(text)
    want = np.array([*encode_batch([text])[0], EOT_ID])
    for spec in (tmp_path / "one" / "only.txt", tmp_path / "one"):
        corpus = data.tokenize_corpus(str(spec), val_fraction=0.02, progress=False)
        assert (corpus.n_documents, len(corpus.val_ids)) == (1, math.ceil(0.02 * len(want)))
        assert np.array_equal(np.concatenate([corpus.train_ids, corpus.val_ids]), want)


def test_a_2mb_single_file_corpus_trains(tmp_path):
    from interp_toolkit.models.build import ModelConfig
    from interp_toolkit.training import TrainSettings, train_model

    words = np.array("alpha beta gamma delta import return self value for while\n".split(" "))
    text = " ".join(words[np.random.default_rng(0).integers(0, len(words), 400_000)])
    assert len(text.encode()) > 2_000_000
    (tmp_path / "big.txt").write_text(text)
    res = train_model(
        tmp_path / "run",
        ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=1),
        data.DataConfig(corpus=str(tmp_path / "big.txt"), vocab_size=32),
        TrainSettings(steps=2, batch_size=4, log_every=1, score_every=2, checkpoint_every=2),
        progress=False,
    )
    assert res.steps_done == 2 and "val_loss" in res.run.metrics()[-1]


def test_two_documents_with_most_tokens_held_out_split_by_tokens(tmp_path):
    names = [f"{c}.txt" for c in "abcdefghijklmnop"]
    held = next(n for n in names if data.is_validation(n, 0.3))
    kept = next(n for n in names if not data.is_validation(n, 0.3))
    (tmp_path / held).write_text("held out words " * 400)  # the hash split would hold out ~80%
    (tmp_path / kept).write_text("kept words " * 100)
    corpus = data.tokenize_corpus(str(tmp_path), val_fraction=0.3, progress=False)
    kept_ids, held_ids = encode_batch(
        [(tmp_path / kept).read_text(), (tmp_path / held).read_text()]
    )
    stream = np.array([*kept_ids, EOT_ID, *held_ids, EOT_ID])  # training-assigned first
    assert corpus.n_documents == 2
    assert len(corpus.val_ids) == math.ceil(0.3 * len(stream))
    assert np.array_equal(np.concatenate([corpus.train_ids, corpus.val_ids]), stream)


def test_interrupted_build_leaves_nothing_trusted(tmp_path, cache, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(20):
        (folder / f"d{i}.txt").write_text(f"document {i} " * 50)

    def boom(texts, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(data, "encode_batch", boom)
    with pytest.raises(KeyboardInterrupt):
        data.tokenize_corpus(str(folder), progress=False)
    assert list(cache.iterdir()) == []  # no entry, no temporary folder
    monkeypatch.setattr(data, "encode_batch", encode_batch)
    good = np.array(data.tokenize_corpus(str(folder), progress=False).train_ids)
    # a damaged entry (a file shorter than meta.json says) is not trusted: it is rebuilt
    (entry,) = cache.iterdir()
    with open(entry / "train.bin", "r+b") as fh:
        fh.truncate(10)
    assert open_store(entry) is None
    again = data.tokenize_corpus(str(folder), progress=False)
    assert np.array_equal(again.train_ids, good)


@pytest.mark.slow
def test_kill_9_during_tokenization_leaves_only_a_temporary_folder(tmp_path, cache):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(40):
        (folder / f"d{i}.txt").write_text(f"document {i} " * 2000)
    script = textwrap.dedent(
        f"""
        import time
        from interp_toolkit.text import stream as data
        real, calls = data.encode_batch, []
        def slow(texts, **kw):
            calls.append(1)
            if len(calls) == 2:  # the first batch is on disk
                print("wrote a batch", flush=True)
                time.sleep(60)
            return real(texts)
        data.encode_batch = slow
        data._batches.__defaults__ = (1000,)
        data.tokenize_corpus({str(folder)!r}, progress=False)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"wrote a batch\n"
        time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (tmp,) = cache.iterdir()
    assert tmp.name.startswith(".") and tmp.name.endswith(f".tmp-{proc.pid}")
    corpus = data.tokenize_corpus(str(folder), progress=False)
    assert corpus.n_documents == 40
    assert [p.name.startswith(".") for p in cache.iterdir()] == [False]  # the dead one is gone


def test_token_dtype_and_uint32_store(tmp_path):
    assert token_dtype(50257) == np.uint16 and token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32
    ids = np.array([1, 70_000, 5, 99_999], dtype=np.int64)

    def fill(writer):
        writer.append("train", ids)
        writer.append("val", ids[:1])
        return {"documents": 1}

    store = build_store(tmp_path, "big", {"source": "test"}, token_dtype(100_000), fill)
    assert store.segment("train").dtype == np.uint32
    assert np.array_equal(store.segment("train"), ids)
    assert json.loads((tmp_path / "big" / "meta.json").read_text())["dtype"] == "uint32"


def test_token_windows_match_in_memory_windows_and_feed_train_stream():
    ids = np.random.default_rng(1).integers(0, 300, 1000)
    codec = CompactVocab.from_counts(np.bincount(ids, minlength=50257), 40)
    win = TokenWindows(ids.astype(np.uint16), codec, 16)
    dense = torch.from_numpy(codec.from_gpt2(ids[: 62 * 16]).reshape(62, 16))
    assert len(win) == 62 and win.shape == (62, 16)
    assert torch.equal(win[:], dense) and torch.equal(win[-1], dense[-1])
    assert torch.equal(win[3:7], dense[3:7]) and win[60:80].shape == (2, 16)
    with pytest.raises(IndexError):
        win[62]
    kw = dict(batch_size=8, repeat_fraction=0.5, low=0, high=40, span_min=2, span_max=5, seed=3)
    a = data.TrainStream(win, end_step=20, **kw)
    b = data.TrainStream(dense, end_step=20, **kw)
    for step in (0, 7, 19):
        assert torch.equal(a.batch(step), b.batch(step))
    assert TokenWindows(np.zeros(5, np.uint16), GPT2Codec(), 16)[:].shape == (0, 16)


def test_progress_bar_only_when_asked(tmp_path, capfd):
    (tmp_path / "a.txt").write_text("some words " * 100)
    data.tokenize_corpus(str(tmp_path / "a.txt"), progress=False)
    assert "tokenizing" not in capfd.readouterr().err
    (tmp_path / "b.txt").write_text("other words " * 100)
    data.tokenize_corpus(str(tmp_path / "b.txt"), progress=True)
    assert "tokenizing b.txt" in capfd.readouterr().err


def test_hf_corpus_is_streamed_once_then_read_offline_from_the_store(monkeypatch):
    import datasets

    import interp_toolkit.files.io

    texts = _texts(200)
    opened = []

    def load_dataset(name, split, streaming):
        opened.append((name, split, streaming))
        return datasets.Dataset.from_dict({"body": texts}).to_iterable_dataset()

    monkeypatch.setattr(interp_toolkit.files.io, "hub_offline", lambda *flags: False)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    corpus = data.tokenize_corpus("hf:fake/owt:train#body", val_fraction=0.1, progress=False)
    assert opened == [("fake/owt", "train", True)]
    train = [i for i in range(200) if not data.is_validation(f"fake/owt/{i}", 0.1)]
    want = np.concatenate([[*ids, EOT_ID] for ids in encode_batch([texts[i] for i in train])])
    assert np.array_equal(corpus.train_ids, want)
    monkeypatch.setattr(interp_toolkit.files.io, "hub_offline", lambda *flags: True)
    again = data.tokenize_corpus("hf:fake/owt:train#body", val_fraction=0.1, progress=False)
    assert len(opened) == 1 and np.array_equal(again.train_ids, want)
    with pytest.raises(UserError, match="offline"):  # another split is not in the store
        data.tokenize_corpus("hf:fake/owt:test#body", progress=False)
