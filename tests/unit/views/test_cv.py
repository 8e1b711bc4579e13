"""The circuitsvis adapter (views/cv.py) against a snapshot of circuitsvis's own output.

The snapshot is circuitsvis 1.43's ``attention_heads(...).local_src`` for a fixed input, with the
random element id written ``UUID`` and the ~1.3 MB bundle written ``BUNDLE``. If upstream
changes the shape the adapter relies on (the self-closed div, the inlined bundle, the render
call), the snapshot test fails first; regenerate the snapshot with ``UPDATE_SNAPSHOTS=1`` only
after checking cv.py still does the right thing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from circuitsvis.attention import attention_heads

from interp_toolkit.views import cv

SNAPSHOT = Path(__file__).parent / "snapshots" / "circuitsvis_attention_heads.html"
LABELS = ["<|endoftext|>", "·a", "</script>"]


def _view():
    pattern = torch.tensor([[[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.5, 0.25, 0.25]]])
    return attention_heads(attention=pattern, tokens=LABELS, attention_head_names=["1.3"])


def _normalised(src: str) -> str:
    return re.sub(r"circuits-vis-[0-9a-f-]{13}", "UUID", src.replace(cv.bundle(), "BUNDLE"))


def test_circuitsvis_output_matches_the_snapshot():
    got = _normalised(_view().local_src)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(got, encoding="utf-8")
    assert got == SNAPSHOT.read_text(encoding="utf-8")


def test_local_html_closes_the_div():
    html = cv.local_html(_view())
    assert re.match(r'<div id="circuits-vis-[^"]+" style="margin: 15px 0;"></div>', html)
    assert cv.bundle() in html  # still self-contained on its own


def test_page_fragment_strips_the_bundle_and_escapes_the_props():
    frag, used = cv.page_fragment(_view().local_src)
    assert used and cv.bundle() not in frag and len(frag) < 5_000
    call = frag[frag.index("CircuitsVis.render(") : frag.index("</script>")]
    assert "<" not in call and "\\u003c/script>" in call  # a label cannot end the script
    assert frag.count("</script>") == 1
    assert cv.page_fragment("<p>plain</p>") == ("<p>plain</p>", False)
