"""The ``measured`` tier: promises checked with a stopwatch or an allocation tracer,
which the machine's load can fail; each test retries (the best of three) and none runs in the
fast tier (``pytest -q --all-tiers`` or naming this file runs them; CI does)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.runs import hf
from interp_toolkit.text import stream as data
from interp_toolkit.text.codecs import GPT2Codec
from interp_toolkit.text.store import TokenWindows, build_store

pytestmark = pytest.mark.measured


def test_windows_and_counts_never_load_the_store(tmp_path):
    """Reading windows and counting ids over a 64 MiB store allocates < 16 MiB at its peak, where
    loading it allocates > 60 MiB (the check can fail). Measured with tracemalloc, which numpy
    reports its buffers to and a memory map's pages never reach: the kernel's anonymous-memory
    counters read 0 before and after a 64 MiB copy on CI's machine."""
    n = 32 * 2**20  # 32M tokens: a 64 MiB uint16 file
    block = np.random.default_rng(0).integers(0, 50257, 2**20, dtype=np.uint16)

    def fill(writer):
        for _ in range(n // len(block)):
            writer.append("train", block)
        return {"documents": 1}

    store = build_store(tmp_path, "big", {"source": "rss"}, np.dtype(np.uint16), fill)
    ids = store.segment("train")
    assert isinstance(ids, np.memmap) and len(ids) == n
    tracemalloc.start()
    try:
        win = TokenWindows(ids, GPT2Codec(), 1024)
        total = 0
        for i in range(len(win)):
            total += int(win[i][0])
        counts = data.TokenizedCorpus("rss", ids, ids[:0], 1).gpt2_counts()
        grown = tracemalloc.get_traced_memory()[1]
        assert counts.sum() == n and total > 0
        tracemalloc.reset_peak()
        whole = np.array(ids)  # what loading it would cost: the check can fail
        loaded = tracemalloc.get_traced_memory()[1]
        del whole
    finally:
        tracemalloc.stop()
    assert grown < 16 * 2**20, f"windows+counts allocated {grown / 2**20:.1f} MiB"
    assert loaded > 60 * 2**20, f"loading allocated only {loaded / 2**20:.1f} MiB"


def test_bad_gpt2_names_answer_within_two_seconds(tmp_path, monkeypatch):
    """The wall-clock promise, in the measured tier (the machine's load can fail a stopwatch):
    the best of three tries."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("gpt-5", "gpt2"):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with pytest.raises(UserError):
                hf.load(name)
            times.append(time.perf_counter() - t0)
        assert min(times) < 2.0, (name, times)
