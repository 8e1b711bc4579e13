"""Progress bars that behave in a terminal, a notebook and a log: the one place tqdm is set up.

``tqdm.auto`` draws a widget in Jupyter when ipywidgets is installed. Without it tqdm falls back
to a text bar, and so does any output that is not a terminal (a
notebook's stderr, a CI log): there a bar redraws about every :data:`PIPED_INTERVAL` seconds (its
``mininterval``, and its ``maxinterval``, after which tqdm's monitor thread would force a redraw),
so a saved notebook holds a few lines instead of one per step. tqdm's "IProgress not found"
warning is silenced when :mod:`interp_toolkit` is imported (TransformerLens imports ``tqdm.auto``
before any bar of ours exists).

A stage with no count (``heads``, ``circuit``) shows :func:`status`: a spinner in a terminal, and
elsewhere (a log, a pipe) a plain line every :data:`STATUS_INTERVAL` seconds, so a long stage is
never silent: ``heads: sign-flip tests (1000 draws) (35 s)``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from io import TextIOBase
from types import SimpleNamespace
from typing import Any

#: Seconds between redraws of a text bar whose output is not a terminal.
PIPED_INTERVAL = 30.0
#: Seconds between the plain lines of a :func:`status` whose output is not a terminal.
STATUS_INTERVAL = 5.0


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


class StatusLines:
    """A stage's progress as plain lines on a stream that is not a terminal: after every
    ``interval`` seconds of ``clock``, :meth:`poll` prints ``LABEL: STAGE (N s)``."""

    def __init__(
        self,
        label: str,
        stage: str,
        file: Any,
        interval: float = STATUS_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.stage, self.file = label, stage, file
        self.interval, self.clock = interval, clock
        self.start = self.last = clock()

    def update(self, stage: str) -> None:
        self.stage = stage

    def poll(self) -> bool:
        """Print the line if ``interval`` has passed since the last (or the start); True if so."""
        now = self.clock()
        if now - self.last < self.interval:
            return False
        self.last = now
        line = f"{self.label}: {self.stage} ({now - self.start:.0f} s)"
        try:
            print(line, file=self.file, flush=True)
        except (OSError, ValueError):  # the stream is closed: progress is not worth a failure
            return False
        return True


@contextmanager
def status(
    label: str, stage: str, *, file: Any = None, interval: float | None = None
) -> Iterator[Any]:
    """Show ``LABEL: STAGE`` while the block runs; the yielded object's ``update(stage)`` moves it
    on. In a terminal a spinner (rich); elsewhere a line every ``interval`` seconds
    (:class:`StatusLines`, polled by a daemon thread), none when the block ends sooner."""
    out = file if file is not None else sys.stderr
    if _is_terminal(out):
        from rich.console import Console

        with Console(file=out).status(f"{label}: {stage}") as spinner:
            yield SimpleNamespace(update=lambda stage: spinner.update(f"{label}: {stage}"))
        return
    lines = StatusLines(label, stage, out, STATUS_INTERVAL if interval is None else interval)
    done = threading.Event()

    def tick() -> None:
        while not done.wait(min(1.0, lines.interval / 4)):
            lines.poll()

    thread = threading.Thread(target=tick, daemon=True, name=f"{label} status")
    thread.start()
    try:
        yield lines
    finally:
        done.set()
        thread.join()
