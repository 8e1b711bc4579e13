"""A study's work as jobs side by side: each run's training and its measurements, on ``workers``
processes, every job as soon as what it waits for has finished.

A :class:`Job` names what it waits for (``after``) and its place among the jobs ready at the same
time (``rank``, lowest first); its function and arguments are made when it becomes ready
(``make``), so a job can read what earlier ones wrote (a 1-layer control's length, read from the
runs it follows). On the CPU with more than one worker, jobs run in worker processes (spawned,
each dying with this one, a Ctrl-C passed to each once); on any other device, or with one worker,
they run here one after another in the same order (processes sharing one accelerator would only
contend for it). Every job's result comes back by name; a job's error stops the rest.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.runtime.signals import die_with_parent

#: How long a stop waits for the running jobs to end (a training saves its checkpoint first).
STOP_WAIT_S = 120.0


@dataclass(frozen=True)
class Job:
    name: str
    #: Called here once the job is ready: the function to run (picklable: module level) and its
    #: arguments.
    make: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]
    after: tuple[str, ...] = ()
    rank: tuple[int, ...] = ()


def _next_ready(pending: list[Job], done: dict[str, Any]) -> Job | None:
    ready = [j for j in pending if all(a in done for a in j.after)]
    return min(ready, key=lambda j: j.rank) if ready else None


def run_jobs(jobs: Sequence[Job], workers: int, device: str = "auto") -> dict[str, Any]:
    """Run ``jobs`` (module doc); every job's result by its name."""
    names = {j.name for j in jobs}
    for j in jobs:
        if missing := [a for a in j.after if a not in names]:
            raise ValueError(f"job {j.name!r} waits for unknown jobs {missing}")
    pending, done = list(jobs), {}
    if workers <= 1 or len(jobs) <= 1 or resolve_device(device).type != "cpu":
        while (job := _next_ready(pending, done)) is not None:
            pending.remove(job)
            fn, args = job.make()
            done[job.name] = fn(*args)
        if pending:
            raise ValueError(f"jobs wait on each other: {[j.name for j in pending]}")
        return done
    parent = os.getpid()
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=worker_start,
        initargs=(parent,),
    )
    running: dict[Future[Any], Job] = {}
    try:
        while pending or running:
            while len(running) < workers and (job := _next_ready(pending, done)) is not None:
                pending.remove(job)
                fn, args = job.make()
                running[pool.submit(fn, *args)] = job
            if not running:
                raise ValueError(f"jobs wait on each other: {[j.name for j in pending]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future).name] = future.result()
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt):  # a job failed: the running ones finish
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        # A stop: each running job ends at its next safe point (a training saves its checkpoint
        # first); an idle worker just ends, maybe holding the pool's queue lock, which would leave
        # the others waiting on it forever: once the running jobs are done, the rest are killed.
        stop_workers(pool)
        wait(running, timeout=STOP_WAIT_S)
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return done


def worker_start(parent: int) -> None:
    """Each worker's first act: leave the terminal's process group, so that a Ctrl-C reaches it
    once, through its parent (:func:`stop_workers`), not twice (a second signal stops a
    training at once, unsaved); and die with its parent (``parent``: the parent's PID), even when
    that is killed with -9 (no orphan keeps training, or waits for a job nobody sends)."""
    with contextlib.suppress(OSError):  # already a session leader
        os.setsid()
    die_with_parent(parent)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """Pass a stop to the pool's workers (SIGTERM, whatever stopped the parent): each training
    saves a checkpoint at the step under way and stops; an idle worker just ends."""
    for process in list(getattr(pool, "_processes", {}).values()):
        if process.pid is not None and process.is_alive():
            with contextlib.suppress(OSError):  # it has just ended
                os.kill(process.pid, signal.SIGTERM)
