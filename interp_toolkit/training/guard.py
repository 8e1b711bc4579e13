"""What keeps a training run safe from the outside world while it runs.

- **The folder**: checked before any work (a file, or a folder we cannot write, is one line),
  locked (:func:`interp_toolkit.files.io.folder_lock`: a second training in it is refused, naming the
  PID; the lock of a dead process is taken over, and said), and removed again if training never
  started in it (nothing half-written).
- **Stop signals**: SIGINT (Ctrl-C), SIGTERM and SIGHUP while the optimizer steps run are
  remembered and acted on after the current step (:class:`StopSignals`): the trainer saves a
  checkpoint at that step and raises :class:`~interp_toolkit.errors.Interrupted`. A signal outside
  the steps, or a second one, stops at once (the last checkpoint stays whole: checkpoints are
  atomic). A signal ignored when the process started (``nohup``: SIGHUP) stays ignored.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from interp_toolkit.errors import Interrupted
from interp_toolkit.files.io import check_writable_dir, folder_lock
from interp_toolkit.runs.folder import RunPaths
from interp_toolkit.runtime.signals import STOP_SIGNALS


class StopSignals:
    """SIGINT/SIGTERM/SIGHUP handlers for one training (main thread only; elsewhere signals keep
    their usual effect). Inside :meth:`deferred` the first signal is only recorded in
    ``signum``; the training loop checks it between steps."""

    def __init__(self, resume_hint: str) -> None:
        self.signum: int | None = None
        self.resume_hint = resume_hint
        self._deferring = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {
                s: signal.signal(s, self._handle)
                for s in STOP_SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN
            }
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._deferring and self.signum is None:
            self.signum = signum
            return
        if self.signum is not None:
            raise Interrupted(f"stopped at once by a second {name}: {self.resume_hint}", signum)
        raise Interrupted(f"stopped by {name} before training began: nothing was changed.", signum)


@contextmanager
def run_guard(paths: RunPaths) -> Iterator[StopSignals]:
    """Hold ``paths.root`` for one training (see module doc); yields the stop-signal state."""
    created = _missing_dirs(paths.root)
    hint = f"continue from the last checkpoint with `interp-toolkit train --resume --out {paths.root}`."
    try:
        check_writable_dir(paths.root, "run folder")
        with folder_lock(paths.root, "run folder") as stale, StopSignals(hint) as signals:
            if stale:
                print(
                    f"{paths.root}: took over the lock of PID {stale}, which is no longer running",
                    file=sys.stderr,
                )
            yield signals
    finally:
        for folder in created:  # deepest first; stops at the first that is not empty
            try:
                folder.rmdir()
            except OSError:
                break


def _missing_dirs(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing
