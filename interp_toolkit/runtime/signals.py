"""Stop signals, one way: SIGINT (Ctrl-C), SIGTERM (``kill``, a scheduler's stop) and SIGHUP (the
terminal closed) each raise :class:`~interp_toolkit.errors.Interrupted` in the main thread, as
Ctrl-C raises ``KeyboardInterrupt``, so every "save on Ctrl-C" path (a checkpoint, a study's
``stopped`` status) runs for all three; the CLI then exits 128 + the signal (130, 143, 129).

- :func:`stop_signals` installs the handlers while its block runs (the CLI's boundary holds it
  around every command; a loop that must stop cleanly for API callers too holds it as well). A
  signal that was ignored when the process started (``nohup``, a shell's background job) stays
  ignored, as Python keeps an ignored SIGINT.
- :func:`deferred` marks a block that must not be cut in two (one optimizer step): a signal that
  arrives inside it is acted on at its end; a second one stops at once.
- :func:`die_with_parent` makes a worker process stop when its parent dies, even by ``kill -9``:
  Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``), and a watchdog thread that polls
  the parent where that is not available (or when the worker outlives the signal).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from interp_toolkit.errors import Interrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _State:
    deferring = 0  # nesting depth of deferred()
    pending: int | None = None  # a signal that came inside deferred()


def _handle(signum: int, frame: FrameType | None) -> None:
    if _State.deferring and _State.pending is None:
        _State.pending = signum
        return
    raise Interrupted("", signum)


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` while the block runs (main thread
    only; elsewhere nothing changes). Signals ignored on entry stay ignored."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for s in STOP_SIGNALS:
            handler = signal.getsignal(s)
            if handler is not signal.SIG_IGN and handler is not _handle:
                previous[s] = signal.signal(s, _handle)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if previous:
            _State.pending = None


@contextmanager
def deferred() -> Iterator[None]:
    """A stop signal arriving inside the block raises :class:`Interrupted` at its end, once the
    block is whole (a second one raises at once)."""
    _State.deferring += 1
    try:
        yield
    except BaseException:  # the block stops anyway: a signal it held is spent with it
        if _State.deferring == 1:
            _State.pending = None
        raise
    finally:
        _State.deferring -= 1
    if not _State.deferring and _State.pending is not None:
        signum, _State.pending = _State.pending, None
        raise Interrupted("", signum)


# ------------------------------------------------------------------------- worker processes

PR_SET_PDEATHSIG = 1
#: Seconds between the watchdog's looks at the parent; and how long an orphaned worker has to
#: save a checkpoint after its SIGTERM before it is ended.
WATCH_INTERVAL, ORPHAN_GRACE = 0.5, 60.0


def parent_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies; False where it cannot."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int, *, poll: Callable[[], int] = os.getppid) -> None:
    """Make this worker stop when ``parent`` (its parent's PID, taken in the parent) is gone:
    SIGTERM (a training saves its checkpoint and stops), then, after :data:`ORPHAN_GRACE`
    seconds, an exit. Called first thing in a worker (a pool's ``initializer``)."""
    signalled = parent_death_signal(signal.SIGTERM)
    if poll() != parent:  # the parent died before the signal was asked for
        os._exit(128 + signal.SIGTERM)
    watch = threading.Thread(
        target=_watch, args=(parent, poll, not signalled), daemon=True, name="watchdog"
    )
    watch.start()


def _watch(parent: int, poll: Callable[[], int], send: bool) -> None:
    while poll() == parent:
        time.sleep(WATCH_INTERVAL)
    if send:  # no parent-death signal came (a second SIGTERM would stop a step half-way)
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE)
    os._exit(128 + signal.SIGTERM)


def orphaned(parent: int) -> bool:
    """Whether this is a worker process whose parent ``parent`` is gone (never in ``parent``
    itself: a job run in-process, ``--workers 1`` or on a GPU, has no parent to lose)."""
    return os.getpid() != parent and os.getppid() != parent
