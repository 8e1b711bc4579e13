import numpy as np
import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.text import corpora
from interp_toolkit.text import stream as data
from interp_toolkit.text.codecs import EOT_ID
from interp_toolkit.training.distributed import Cluster
from interp_toolkit.training.loop import StepFeed


def test_stdlib_files_exclude_tests():
    files = corpora.stdlib_files()
    assert len(files) > 300
    assert all("test" not in p.parts for p in files)
    assert any(p.name == "os.py" for p in files)


def test_local_folder_corpus_split_and_windows(tmp_path):
    for i in range(60):
        (tmp_path / f"doc{i}.txt").write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    corpus = data.tokenize_corpus(str(tmp_path), val_fraction=0.1)
    assert corpus.n_documents == 60
    assert len(corpus.train_ids) > 0 and len(corpus.val_ids) > 0
    assert (corpus.train_ids == EOT_ID).sum() + (corpus.val_ids == EOT_ID).sum() == 60
    codec = data.build_codec(corpus, 64)
    w = data.windows(corpus.train_ids, codec, 16)[:]
    assert w.shape[1] == 16 and w.dtype == torch.int64 and int(w.max()) < 64
    # the split is a deterministic function of the document name
    again = data.tokenize_corpus(str(tmp_path), val_fraction=0.1)
    assert np.array_equal(again.val_ids, corpus.val_ids)


@pytest.mark.parametrize(
    "spec, match",
    [("/nonexistent/corpus", "existing path"), ("hf:Skylion007/openwebtext", "offline")],
)
def test_bad_corpora_are_one_line_errors(spec, match, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match=match):
        data.tokenize_corpus(spec)


def test_empty_corpus_and_folder_without_text(tmp_path):
    (tmp_path / "empty.txt").write_text("   \n")
    with pytest.raises(UserError, match="empty"):
        data.tokenize_corpus(str(tmp_path / "empty.txt"))
    other = tmp_path / "bin"
    other.mkdir()
    (other / "x.bin").write_bytes(b"\x00\x01")
    with pytest.raises(UserError, match="no text files"):
        data.tokenize_corpus(str(other))


def _span_starts(row: np.ndarray, lengths: range) -> list[tuple[int, int]]:
    """(L, start) pairs such that row[start:start+L] repeats with period L to the row's end and at
    least two tokens of the second copy fit."""
    n = len(row)
    return [
        (L, start)
        for L in lengths
        for start in range(0, n - L - 1)
        if all(row[j] == row[j - L] for j in range(start + L, n))
    ]


def test_repeated_span_windows_repeat_with_their_period():
    rng = np.random.default_rng(0)
    x = data.repeated_span_windows(rng, 200, 32, 0, 100, 3, 10)
    assert x.shape == (200, 32) and x.min() >= 0 and x.max() < 100
    for row in x:
        assert _span_starts(row, range(3, 11))


def test_long_spans_start_anywhere_they_still_repeat():
    """A span of half the window is not pinned to the window's start (the second copy may be cut
    short), so a fixed-position copy cannot stand in for induction."""
    rng = np.random.default_rng(1)
    x = data.repeated_span_windows(rng, 300, 33, 0, 1000, 16, 16)
    starts = {min(s for _, s in _span_starts(row, range(16, 17))) for row in x}
    assert starts == set(range(16))  # every offset that leaves two repeated tokens


def test_span_range_defaults_to_half_the_context():
    assert data.DataConfig().span_range(32) == (2, 16)
    assert data.DataConfig(span_min=3, span_max=10).span_range(32) == (3, 10)
    with pytest.raises(UserError, match="span_min <= span_max <= 16"):
        data.DataConfig(span_max=17).span_range(32)
    with pytest.raises(UserError, match="span_min <= span_max <= 4"):
        data.DataConfig(span_min=5).span_range(9)


def test_train_stream_is_a_function_of_the_global_index():
    text = torch.arange(40 * 8).reshape(40, 8)
    kw = dict(batch_size=4, repeat_fraction=0.5, low=0, high=50, span_min=2, span_max=3, seed=3)
    full = StepFeed(data.TrainStream(text, start_step=0, end_step=6, **kw))
    resumed = StepFeed(data.TrainStream(text, start_step=4, end_step=6, **kw))
    served_full = [full[0]["tokens"] for _ in range(len(full))]
    served_resumed = [resumed[7]["tokens"] for _ in range(len(resumed))]  # the index is ignored
    assert len(served_resumed) == 8
    for a, b in zip(served_full[16:], served_resumed, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(full.stream.batch(5), torch.stack(served_full[20:24]))


def test_each_process_is_fed_its_own_rows_of_every_global_batch():
    text = torch.arange(40 * 8).reshape(40, 8)
    kw = dict(batch_size=6, repeat_fraction=0.5, low=0, high=50, span_min=2, span_max=3, seed=3)
    stream = data.TrainStream(text, start_step=2, end_step=5, **kw)
    feeds = [StepFeed(stream, Cluster(rank, 3, rank)) for rank in range(3)]
    served = [[f[0]["tokens"] for _ in range(len(f))] for f in feeds]
    assert [len(s) for s in served] == [6, 6, 6]  # 3 steps x 2 rows each
    for i, step in enumerate(range(2, 5)):
        rows = [r for s in served for r in s[2 * i : 2 * i + 2]]  # rank 0's rows, then rank 1's...
        assert torch.equal(torch.stack(rows), stream.batch(step))
    with pytest.raises(UserError, match="batch_size=6 does not split over 4 processes"):
        StepFeed(stream, Cluster(0, 4, 0))
