"""``python fault_runner.py ARGS`` is ``python -m interp_toolkit ARGS`` with one fault injected,
named by the FAULT environment variable (the fault tests' helper; nothing in the package knows it):

- ``step:SIG:N``: right after optimizer step N's bookkeeping, send SIG (INT, TERM, KILL, STOP) to
  this process, as a user or the system would;
- ``checkpoint:SIG:N``: send SIG while the checkpoint of step N is half-written (its weights are
  written, its optimizer state is not);
- ``reading:SIG``: send SIG while the corpus is read, before any training step;
- ``sae-step:SIG:N``: send SIG inside SAE training step N (1-based: while its loss is computed);
- ``analysis:SIG``: send SIG when ``reproduce`` starts analysing its first run.
"""

import os
import runpy
import signal
import sys

from interp_toolkit.training import checkpoints, trainer

kind, sig_name, *at = os.environ["FAULT"].split(":")
sig = signal.Signals[f"SIG{sig_name}"]


def fire() -> None:
    os.kill(os.getpid(), sig)


if kind == "step":
    step_log = trainer.StepLog.__call__

    def after_step(self, step, loss, optimizer):
        step_log(self, step, loss, optimizer)
        if step == int(at[0]):
            fire()

    trainer.StepLog.__call__ = after_step
elif kind == "checkpoint":
    write_bytes = checkpoints.write_bytes

    def half_written(path, data):
        if path.name == f"step_{int(at[0])}.optimizer.pt":
            fire()
        return write_bytes(path, data)

    checkpoints.write_bytes = half_written
elif kind == "reading":
    tokenize_corpus = trainer.tokenize_corpus

    def reading(*args, **kwargs):
        fire()
        return tokenize_corpus(*args, **kwargs)

    trainer.tokenize_corpus = reading
elif kind == "sae-step":
    from interp_toolkit.saes import train as sae_train

    sae_loss, calls = sae_train.sae_loss, []

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) == int(at[0]):
            fire()
        return sae_loss(*args, **kwargs)

    sae_train.sae_loss = counted
elif kind == "analysis":
    from interp_toolkit.study import reproduce

    analyse_and_report = reproduce.analyse_and_report

    def analysing(*args, **kwargs):
        fire()
        return analyse_and_report(*args, **kwargs)

    reproduce.analyse_and_report = analysing
else:
    raise SystemExit(f"unknown FAULT {os.environ['FAULT']!r}")

sys.argv = ["interp-toolkit", *sys.argv[1:]]
runpy.run_module("interp_toolkit", run_name="__main__", alter_sys=True)
