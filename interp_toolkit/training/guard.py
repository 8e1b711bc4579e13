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
- **Divergence** (:class:`LossWatch`): a logged loss that stays past :class:`Divergence`'s bound
  for its ``patience`` logged steps stops training in one line naming the step; no checkpoint is
  written while the last logged loss is past the bound, so the one kept is the last good one. A
  NaN or infinite loss or weight stops it at once (``StepLog``).
"""

from __future__ import annotations

import math
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from interp_toolkit.errors import Interrupted
from interp_toolkit.files.io import check_writable_dir, folder_lock, tidy_folders
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
    hint = f"continue from the last checkpoint with `interp-toolkit train --resume --out {paths.root}`."
    with tidy_folders(paths.root):
        check_writable_dir(paths.root, "run folder")
        with folder_lock(paths.root, "run folder") as stale, StopSignals(hint) as signals:
            if stale:
                print(
                    f"{paths.root}: took over the lock of PID {stale}, which is no longer running",
                    file=sys.stderr,
                )
            yield signals


@dataclass(frozen=True)
class Divergence:
    """When a finite loss counts as diverged: a logged loss past :meth:`bound` (``ratio`` times
    the running minimum of the logged losses and ``gap`` nats above it; or ``margin`` nats above
    the untrained loss, whichever is lower) at ``patience`` logged steps in a row. The untrained
    loss is ln(vocabulary size), the loss of a uniform guess where an untrained model starts (or
    the run's first logged loss, when higher). A healthy run never comes near it: the presets'
    logged losses stay under their first ones; lr=1000 went 3.29 -> 5.9e14 on an AMX CPU."""

    ratio: float = 4.0
    gap: float = 2.0
    margin: float = 1.0
    patience: int = 3

    def bound(self, best: float, untrained: float) -> float:
        return min(max(self.ratio * best, best + self.gap), untrained + self.margin)


@dataclass
class LossWatch:
    """The logged losses of one training, read in order (:meth:`read`), against
    :class:`Divergence`. ``untrained``: ln(vocabulary size)."""

    untrained: float
    rule: Divergence = Divergence()
    best: float = math.inf  # the running minimum of the logged losses within the bound
    since: int | None = None  # the first logged step of the streak past the bound
    streak: int = 0
    bound_then: float = math.inf  # the bound when the streak began
    fresh: bool = True  # no loss read yet
    last: tuple[int, float] = (0, math.nan)  # the last logged step and its loss

    def read(self, step: int, loss: float, *, from_start: bool = False) -> None:
        """One logged loss; ``from_start``: the run's first logged loss, which raises the
        untrained loss when higher."""
        if self.fresh and from_start:
            self.untrained = max(self.untrained, loss)
        self.fresh, self.last = False, (step, loss)
        bound = self.rule.bound(self.best, self.untrained)
        if loss > bound:
            if self.streak == 0:
                self.since, self.bound_then = step, bound
            self.streak += 1
        else:
            self.streak, self.since = 0, None
            self.best = min(self.best, loss)

    @property
    def past(self) -> bool:
        """The last logged loss is past the bound (checkpoints wait)."""
        return self.streak > 0

    @property
    def diverged(self) -> bool:
        return self.streak >= self.rule.patience

    def what(self) -> str:
        """What diverged, for the stop's line."""
        r, (step, loss) = self.rule, self.last
        lowest = f"the lowest logged loss {self.best:.4g}" if self.best < math.inf else "none yet"
        return (
            f"the loss went past {self.bound_then:.4g} at step {self.since} and stayed past it "
            f"for {self.streak} logged step(s) (loss {loss:.4g} at step {step}; the bound: "
            f"{r.ratio:g}x {lowest} and {r.gap:g} nats above it, or {r.margin:g} nat above the "
            f"untrained loss {self.untrained:.4g}, whichever is lower)"
        )
