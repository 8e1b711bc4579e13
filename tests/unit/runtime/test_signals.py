"""Every stop signal is Ctrl-C: SIGINT, SIGTERM and SIGHUP each stop a command through the same
"save on Ctrl-C" paths (exit 130, 143, 129), and the one line always says what was kept and how
to go on; a study's ``study.json`` never stays ``running``; a stage with no count prints a plain
line every few seconds when standard error is not a terminal (docs/reliability.md). Real
processes (an SAE stopped by SIGTERM and resumed, a study's workers outliving a kill -9):
tests/integration/test_signals_processes.py."""

from __future__ import annotations

import io
import json
import os
import signal

import pytest
from analysis_helpers import tiny_mlp_text_run
from cli_helpers import run_cli

from interp_toolkit.errors import Interrupted
from interp_toolkit.runtime import signals
from interp_toolkit.runtime.progress import StatusLines, status

STOPS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal():
    """Run as a terminal runs a command: a shell starts a background job (``pytest ... &``) with
    SIGINT ignored, which the code rightly keeps ignored; these tests send a real SIGINT."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def one_line(err: str) -> str:
    err = err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _mlp_run(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    return tiny_mlp_text_run(tmp_path)


@pytest.fixture
def mlp_run(tmp_path, monkeypatch):
    return _mlp_run(tmp_path, monkeypatch)


def _send(signum):
    """A fake stage that gets a real signal, as ``kill -TERM PID`` would send it (refused when no
    handler would catch it: the default one would end pytest itself)."""

    def fake(*args, **kwargs):
        assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN), "no handler"
        os.kill(os.getpid(), signum)
        raise AssertionError("the signal did not stop the command")

    return fake


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_every_stop_signal_stops_a_command_like_ctrl_c(
    capsys, monkeypatch, mlp_run, tmp_path, signum
):
    """``heads`` gets a real SIGINT, SIGTERM or SIGHUP mid-work: exit 128 + signal and one line
    naming the signal and what was written (SIGTERM used to end it silently, exit 143)."""
    monkeypatch.setattr("interp_toolkit.heads.discovery.discover", _send(signum))
    before = {s: signal.getsignal(s) for s in STOPS}
    code, out, err = run_cli(capsys, "heads", mlp_run, "--json", tmp_path / "h.json")
    name = signal.Signals(signum).name
    assert code == 128 + signum, (code, err)
    assert one_line(err) == (
        f"interrupted ({name}): nothing was written; run the command again to finish."
    )
    assert not (tmp_path / "h.json").exists()
    assert {s: signal.getsignal(s) for s in STOPS} == before  # handlers restored


def _interrupt(monkeypatch, target):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(target, stop)


LOAD = "interp_toolkit.runs.targets.load_target"


@pytest.mark.parametrize(
    "argv, where, says",
    [
        (["heads", "{run}"], LOAD, "nothing was written"),
        (["circuit", "{run}"], LOAD, "nothing was written"),
        (["exam", "{run}", "--periods"], LOAD, "nothing was written"),
        (["neurons", "{run}", "--layer", "0"], LOAD, "nothing was written"),
        (
            ["sae", "{run}", "--hook", "blocks.0.hook_resid_pre", "--out", "{tmp}/s"],
            "interp_toolkit.saes.pipeline.run_sae",
            "by SIGINT before the SAE's first step: nothing new was saved in {tmp}/s; run the same",
        ),
    ],
    ids=["heads", "circuit", "exam-periods", "neurons", "sae"],
)
def test_ctrl_c_in_any_command_says_what_was_kept(
    capsys, monkeypatch, mlp_run, tmp_path, argv, where, says
):
    """Ctrl-C used to print ``interrupted: `` and nothing after it."""
    _interrupt(monkeypatch, where)
    argv = [a.format(run=mlp_run, tmp=tmp_path) for a in argv]
    code, _, err = run_cli(capsys, *argv)
    line = one_line(err)
    assert code == 130 and line.startswith("interrupted") and says.format(tmp=tmp_path) in line


def test_ctrl_c_in_report_names_the_files_it_had_written(capsys, monkeypatch, mlp_run):
    from interp_toolkit.files.io import write_text

    def half(run, out, device="auto"):
        write_text(run / "part.html", "<p>")
        raise KeyboardInterrupt

    monkeypatch.setattr("interp_toolkit.reports.run_report.build_run_report", half)
    code, _, err = run_cli(capsys, "report", mlp_run)
    assert code == 130 and one_line(err) == (
        f"interrupted (SIGINT): wrote {mlp_run / 'part.html'} (each whole) before it stopped; the "
        "rest was not written: run the command again to finish."
    )


def _fake_run(path, *, trained=False, analysed=False, step=None):
    from interp_toolkit.runs.folder import RunPaths

    paths = RunPaths(path)
    paths.checkpoints.mkdir(parents=True)
    paths.config.write_text("{}")
    if trained:
        paths.weights.write_bytes(b"")
    if analysed:
        paths.report.write_text("")
    if step is not None:
        paths.checkpoint_state.write_text(json.dumps({"step": step, "tokens": 0, "elapsed_s": 0}))


@pytest.mark.parametrize("signum", STOPS, ids=lambda s: signal.Signals(s).name)
def test_an_interrupted_study_says_stopped_and_what_finished(capsys, monkeypatch, tmp_path, signum):
    """``reproduce`` stopped (during its analyses, say) leaves study.json ``stopped`` (never
    ``running``) with the signal and what had finished; its line says so and how to go on."""
    out = tmp_path / "study"

    def midway(cfg, out, runs):
        _fake_run(out / "cpu-1l", trained=True, analysed=True)
        _fake_run(out / "cpu-2l", trained=True)
        _fake_run(out / "cpu-3l", step=40)
        assert json.loads((out / "study.json").read_text())["status"] == "running"
        _send(signum)()

    monkeypatch.setattr("interp_toolkit.study.reproduce._train_and_measure", midway)
    code, _, err = run_cli(
        capsys, "reproduce", "--out", out, "--preset", "cpu", "--layers", "1,2,3", "--workers", 1
    )
    name = signal.Signals(signum).name
    assert code == 128 + signum, err
    line = one_line(err)
    assert line.startswith(f"interrupted: stopped by {name}; trained: cpu-1l, cpu-2l; ")
    assert "analysed: cpu-1l; unfinished: cpu-3l (step 40)" in line
    assert "Run the same command again" in line
    marker = json.loads((out / "study.json").read_text())
    assert marker["status"] == "stopped" and marker["signal"] == name
    assert marker["finished"] == {
        "trained": ["cpu-1l", "cpu-2l"],
        "analysed": ["cpu-1l"],
        "unfinished": {"cpu-3l": 40},
    }
    assert not (out / ".lock").exists()


@pytest.mark.parametrize(
    "signum, path",
    [(signal.SIGINT, "workers 1"), (signal.SIGTERM, "workers 1"), (signal.SIGTERM, "gpu")],
)
def test_a_stop_while_a_study_trains_in_process_says_stopped(
    capsys, monkeypatch, tmp_path, signum, path
):
    """A stop inside a training run in this process (``--workers 1``; a GPU study always trains
    here) used to exit 143/130 without a word, leaving study.json ``running`` (each seed's
    too, under ``--seeds``): the job was handed ``parent=os.getpid()``, so ``orphaned(parent)``
    was always true and it called ``os._exit``."""
    import torch

    def no_exit(code):
        raise AssertionError(f"os._exit({code}) in the study's own process")

    monkeypatch.setattr(os, "_exit", no_exit)
    out, args = tmp_path / "study", ["--workers", 1]
    if path == "gpu":  # jobs on an accelerator run here whatever --workers says
        monkeypatch.setattr(
            "interp_toolkit.study.jobs.resolve_device", lambda d: torch.device("meta")
        )
        args = ["--workers", 2]
    monkeypatch.setattr("interp_toolkit.study.folder.train_or_reuse", _send(signum))
    code, _, err = run_cli(
        capsys, "reproduce", "--out", out, "--preset", "cpu", "--layers", "1", "--steps", 2, *args
    )
    assert code == 128 + signum, err
    assert one_line(err).startswith(f"interrupted: stopped by {signal.Signals(signum).name}")
    assert json.loads((out / "study.json").read_text())["status"] == "stopped"


# ------------------------------------------------------------------------- the signal module


def test_a_signal_inside_deferred_waits_for_the_block_and_a_second_one_does_not():
    with signals.stop_signals():
        done = []
        with pytest.raises(Interrupted) as stop:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                done.append("the block finished")
        assert done == ["the block finished"] and stop.value.exit_code == 143
        with pytest.raises(Interrupted) as stop:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGHUP)
                os.kill(os.getpid(), signal.SIGINT)
                done.append("never")
        assert done == ["the block finished"] and stop.value.exit_code == 130
        assert signals._State.pending is None  # the held SIGHUP went with the block


def test_an_ignored_signal_stays_ignored():
    """``nohup`` starts a command with SIGHUP ignored: it stays ignored, as Python keeps an
    ignored SIGINT."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals.stop_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is signals._handle
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_training_ignores_what_was_ignored_and_stops_on_sighup():
    from interp_toolkit.training.guard import StopSignals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with StopSignals("resume"):
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    with StopSignals("resume") as stops, stops.deferred():
        os.kill(os.getpid(), signal.SIGHUP)
        assert stops.signum == signal.SIGHUP


def test_a_worker_asks_for_its_parents_death_signal():
    """Linux's prctl(PR_SET_PDEATHSIG) is reachable (the real kill -9 test is
    tests/integration/test_signals_processes.py); asked in a forked child, not here."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if signals.parent_death_signal(signal.SIGTERM) else 1)
    _, status_ = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status_) == 0


# ------------------------------------------------------------------------ progress off a tty


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_stage_prints_a_plain_line_every_few_seconds_off_a_terminal():
    """``heads --n-seqs 100000000`` used to show nothing for minutes when standard error was not
    a terminal (a spinner is drawn only in one)."""
    clock, out = FakeClock(), io.StringIO()
    lines = StatusLines("heads", "scoring the probe", out, interval=5.0, clock=clock)
    for _ in range(24):  # 12 s of work, polled every half second
        clock.now += 0.5
        lines.poll()
        if clock.now == 108.0:
            lines.update("sign-flip tests (1000 draws)")
    assert out.getvalue().splitlines() == [
        "heads: scoring the probe (5 s)",
        "heads: sign-flip tests (1000 draws) (10 s)",
    ]


def test_a_quick_stage_prints_nothing_and_heads_prints_lines_off_a_terminal(
    capsys, monkeypatch, mlp_run
):
    import threading

    out = io.StringIO()
    with status("circuit", "scoring edges", file=out) as shown:
        shown.update("pruning 3 edges")
    assert out.getvalue() == ""  # a quick stage (or an early error) stays one line
    printed = threading.Event()
    poll = StatusLines.poll

    def polled(self):
        if poll(self):
            printed.set()
        return printed.is_set()

    def discover(*args, progress, **kwargs):
        progress("sign-flip tests (1000 draws)")
        assert printed.wait(60), "no status line"
        raise KeyboardInterrupt

    monkeypatch.setattr(StatusLines, "poll", polled)
    monkeypatch.setattr("interp_toolkit.runtime.progress.STATUS_INTERVAL", 0.01)
    monkeypatch.setattr("interp_toolkit.heads.discovery.discover", discover)
    code, _, err = run_cli(capsys, "heads", mlp_run)  # captured: standard error is no terminal
    assert code == 130 and err.startswith("heads: sign-flip tests (1000 draws) (0 s)\n"), err
