"""Progress bars that behave in a terminal, a notebook and a log: the one place tqdm is set up.

``tqdm.auto`` draws a widget in Jupyter when ipywidgets is installed. Without it tqdm falls back
to a text bar, and so does any output that is not a terminal (a
notebook's stderr, a CI log): there a bar redraws about every :data:`PIPED_INTERVAL` seconds (its
``mininterval``, and its ``maxinterval``, after which tqdm's monitor thread would force a redraw),
so a saved notebook holds a few lines instead of one per step. tqdm's "IProgress not found"
warning is silenced when :mod:`interp_toolkit` is imported (TransformerLens imports ``tqdm.auto``
before any bar of ours exists).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from io import TextIOBase
from typing import Any

#: Seconds between redraws of a text bar whose output is not a terminal.
PIPED_INTERVAL = 30.0


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    enabled: bool = True,
    file: TextIOBase | None = None,
    **options: Any,
) -> Any:
    """A ``tqdm`` bar (``options`` are tqdm's) on ``file`` (default stderr); ``enabled=False``
    draws nothing."""
    from tqdm import autonotebook
    from tqdm.auto import tqdm

    out = file if file is not None else sys.stderr
    widget = autonotebook.tqdm.__module__ == "tqdm.notebook"
    if not widget and not _is_terminal(out):
        options.setdefault("mininterval", PIPED_INTERVAL)
        options.setdefault("maxinterval", PIPED_INTERVAL)
    return tqdm(iterable, file=out, disable=not enabled, **options)


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
