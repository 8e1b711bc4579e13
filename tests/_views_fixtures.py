"""Helpers shared by the view, page and browser tests: a tiny run folder on disk, and the check
that a page works offline."""

from __future__ import annotations

import json
import re
from pathlib import Path

TEXT = " the cat sat on the mat. The dog ran after the cat.\nA B C X D E F A B C D"


def tiny_vocab():
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab, gpt2_encoding

    ids = list(dict.fromkeys(gpt2_encoding().encode_ordinary(TEXT)))
    return CompactVocab([*ids, EOT_ID])


def make_tiny_run(path: Path, *, n_layers: int = 2, metrics: bool = True) -> Path:
    """A run folder with an untrained tiny model, a compact vocabulary, metrics and samples."""
    from interp_toolkit.models.build import ModelConfig, build_model
    from interp_toolkit.runs.folder import save_run

    vocab = tiny_vocab()
    cfg = ModelConfig(
        n_layers=n_layers, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=vocab.d_vocab, seed=0
    )
    model = build_model(cfg)
    save_run(
        path, model, vocab, cfg, settings={"preset": "test", "train": {"lr": 1e-3, "steps": 40}}
    )
    if metrics:
        rows = []
        for step in range(0, 41, 5):
            row = {
                "step": step,
                "tokens": step * 256,
                "loss": 4.0 - step / 20,
                "elapsed_s": step / 10,
            }
            if step % 10 == 0:
                row["induction"] = [
                    [0.01 * step * (layer + head) / 10 for head in range(4)]
                    for layer in range(n_layers)
                ]
                row["prev_token"] = [
                    [0.1 + 0.01 * head for head in range(4)] for _ in range(n_layers)
                ]
            rows.append(row)
        (path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (path / "samples.json").write_text(
        json.dumps([{"prompt": "The cat", "text": "The cat <sat> & ran"}])
    )
    return path


def assert_offline(page: str) -> None:
    """No external script, stylesheet or module import: the page must work with no network.

    The inlined libraries (plotly.js, the circuitsvis bundle) mention URLs in strings they never
    load for our figures (map tiles, error messages); the check reads the page without them.
    """
    from interp_toolkit.views.cv import bundle

    ours = page.replace(plotly_js(), "").replace(bundle(), "")
    assert not re.search(r"<script[^>]*\bsrc=", ours)
    assert not re.search(r"<link[^>]*\bhref=", ours)
    assert not re.search(r"\bimport\b[^;]*\bfrom\s*[\"']https?:", ours)
    assert "https://" not in ours and "http://" not in ours
    assert "unpkg.com" not in ours and "cdn" not in ours.lower()


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()
