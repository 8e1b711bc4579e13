"""The study's bad input: checked before any training starts."""

import pytest

from interp_toolkit.cli import main
from interp_toolkit.errors import UserError
from interp_toolkit.study.reproduce import StudyConfig, parse_layers, reproduce


def test_reproduce_refuses_a_folder_holding_something_else(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "holds something else" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_reproduce_mlp_without_a_depth_to_twin_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--mlp", "--layers", "3,8", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "--mlp trains MLP twins of the 1 and 2-layer models: include one of them" in err
    assert not (tmp_path / "s").exists()


def test_reproduce_seeds_below_one_and_a_seed_folder_holding_something_else(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--seeds", "0", "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err.strip()
    assert (
        exc.value.code == 2
        and err == "error: --seeds=0 cannot work: use a whole number, 1 or more."
    )
    # every seed's folder is checked before any work: seed 2's holds something else
    (tmp_path / "t" / "seed-2").mkdir(parents=True)
    (tmp_path / "t" / "study.json").write_text("{}")  # an earlier study's folder: reusable
    (tmp_path / "t" / "seed-2" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--seeds", "3", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "seed-2 holds something else" in err
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["seed-2", "study.json"]
    assert (tmp_path / "t" / "study.json").read_text() == "{}"  # untouched: nothing started


def test_parse_layers():
    assert parse_layers("2,1") == (1, 2)
    with pytest.raises(UserError):
        parse_layers("one")


def test_reproduce_bad_layers_and_preset(tmp_path):
    with pytest.raises(UserError, match="--layers 0 cannot work"):  # any depth from 1 is taken
        reproduce(StudyConfig(out=tmp_path / "s", layers=(1, 0)))
    with pytest.raises(UserError, match=r"unknown preset 'tpu': use one of cpu, .*, or all \("):
        reproduce(StudyConfig(out=tmp_path / "s", preset="tpu"))
    with pytest.raises(UserError, match="--mlp trains MLP twins of the 1 and 2-layer models"):
        reproduce(StudyConfig(out=tmp_path / "s", layers=(3, 8), mlp=True))
    assert not (tmp_path / "s").exists()


def test_workers_fan_out_on_the_cpu_only(tmp_path, monkeypatch):
    """On a GPU the runs train one after another in this process (no pool of processes sharing
    one accelerator); on the CPU they go to the pool."""
    import torch

    from interp_toolkit.study import folder as study
    from interp_toolkit.study import jobs
    from interp_toolkit.training.presets import get_preset

    trained, pools = [], []
    monkeypatch.setattr(study, "is_finished", lambda path, preset: False)
    monkeypatch.setattr(study, "train_or_reuse", lambda p, preset, device: trained.append(device))
    monkeypatch.setattr(jobs, "ProcessPoolExecutor", lambda **kw: pools.append(kw) or 1 / 0)

    def work(device):
        return [
            jobs.Job(
                n, lambda n=n: (study.train_job, (tmp_path / n, get_preset("cpu", 2), device, 0))
            )
            for n in ("a", "b")
        ]

    monkeypatch.setattr(jobs, "resolve_device", lambda spec: torch.device("cuda", 0))
    jobs.run_jobs(work("cuda"), workers=2, device="cuda")
    assert trained == ["cuda", "cuda"] and not pools
    monkeypatch.setattr(jobs, "resolve_device", lambda spec: torch.device("cpu"))
    with pytest.raises(ZeroDivisionError):
        jobs.run_jobs(work("cpu"), workers=2, device="cpu")
    assert len(pools) == 1 and pools[0]["max_workers"] == 2


def test_mlp_twins_and_how_long_each_control_trains(tmp_path):
    """--mlp adds twins of the 1- and 2-layer models only, on the GPT-2 block; a 1-layer
    control trains as long as the longest deeper run of its own kind."""
    import json

    from interp_toolkit.study.reproduce import StudyRun, control_steps, depth_preset, study_runs

    cfg = StudyConfig(out=tmp_path, preset="cpu", layers=(1, 2, 8), mlp=True)
    runs = study_runs(cfg)
    assert [(r.name, r.n_layers, r.mlp) for r in runs] == [
        ("cpu-1l", 1, False),
        ("cpu-2l", 2, False),
        ("cpu-8l", 8, False),
        ("cpu-1l-mlp", 1, True),
        ("cpu-2l-mlp", 2, True),
    ]
    twin, plain = depth_preset(cfg, runs[4]), depth_preset(cfg, runs[1])
    assert twin.model.mlp and not plain.model.mlp and twin.data == plain.data
    assert twin.train == plain.train and twin.train.stop_score == 0.4
    assert not study_runs(StudyConfig(preset="cpu", layers=(1, 2)))[-1].mlp  # no --mlp: no twins
    assert control_steps(tmp_path, runs, runs[0]) is None  # nothing trained yet

    def trained(name, step):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text(json.dumps({"step": step}) + "\n")

    trained("cpu-8l", 400)
    # no deeper MLP run yet: the MLP control follows the longest of any kind
    assert control_steps(tmp_path, runs, runs[3]) == 400
    trained("cpu-2l", 550)
    trained("cpu-2l-mlp", 1100)
    assert control_steps(tmp_path, runs, runs[0]) == 550
    assert control_steps(tmp_path, runs, runs[3]) == 1100
    assert depth_preset(cfg, StudyRun("cpu-1l-mlp", 1, True), 1100).train.steps == 1100


def test_jobs_run_when_what_they_wait_for_has_finished(monkeypatch):
    """``run_jobs``: on the CPU, jobs go to worker processes as soon as their ``after`` jobs have
    finished, the lowest rank first among the ready ones, never more than ``workers`` at once; a
    job is made (its arguments read) only when ready; a job's error stops the rest; on a GPU they
    run here in the same order."""
    import os
    from concurrent.futures import Future

    import torch

    from interp_toolkit.study import jobs

    events = []

    class Pool:
        def __init__(self, max_workers, mp_context, initializer, initargs):
            events.append(("pool", max_workers))
            # each worker dies with this process (tests/integration/test_signals_processes.py)
            assert initializer is jobs.worker_start and initargs == (os.getpid(),)
            self.running = 0

        def submit(self, fn, *args):
            events.append(("submit", args[0]))
            future = Future()
            if args[0] == "bad":
                future.set_exception(UserError("(test) it failed"))
            else:
                future.set_result(fn(*args))
            return future

        def shutdown(self, **kwargs):
            events.append(("shutdown", kwargs.get("cancel_futures", False)))

    def job(name, after=(), rank=(0,)):
        def make():
            events.append(("make", name))
            return str.upper, (name,)

        return jobs.Job(name, make, after, rank)

    monkeypatch.setattr(jobs, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(jobs, "resolve_device", lambda spec: torch.device("cpu"))
    work = [
        job("measure a", ("train a",), (2,)),
        job("train b", (), (0, 1)),
        job("train a", (), (0, 0)),
        job("control", ("train a", "train b"), (1,)),
    ]
    done = jobs.run_jobs(work, workers=2)
    assert done == {n: n.upper() for n in ("train a", "train b", "measure a", "control")}
    assert events == [
        ("pool", 2),
        ("make", "train a"),
        ("submit", "train a"),
        ("make", "train b"),
        ("submit", "train b"),
        ("make", "control"),  # ranked before the measurement once both trainings finished
        ("submit", "control"),
        ("make", "measure a"),
        ("submit", "measure a"),
        ("shutdown", False),
    ]
    events.clear()
    with pytest.raises(UserError, match="it failed"):
        jobs.run_jobs([job("bad"), job("after bad", ("bad",))], workers=2)
    assert events == [("pool", 2), ("make", "bad"), ("submit", "bad"), ("shutdown", True)]
    events.clear()
    monkeypatch.setattr(jobs, "resolve_device", lambda spec: torch.device("cuda", 0))
    assert jobs.run_jobs(work, workers=2, device="cuda") == done
    assert [e for e in events if e[0] != "make"] == []  # here, no pool
    assert [e[1] for e in events] == ["train a", "train b", "control", "measure a"]
    with pytest.raises(ValueError, match="unknown jobs"):
        jobs.run_jobs([job("x", ("nowhere",))], workers=2)


def test_a_stop_kills_the_workers_left_once_the_running_jobs_end(monkeypatch):
    """A stop (Ctrl-C, SIGTERM) while jobs run: the workers get the stop, the running jobs get
    their time to end, then every worker still alive is killed (one may wait forever on a queue
    lock an idle worker died holding) and the pool is not joined."""
    from concurrent.futures import Future

    import torch

    from interp_toolkit.study import jobs

    events = []

    class Process:
        def __init__(self, alive):
            self.alive = alive

        def is_alive(self):
            return self.alive

        def kill(self):
            events.append("kill")

    class Pool:
        def __init__(self, **kwargs):
            self._processes = {1: Process(True), 2: Process(False)}

        def submit(self, fn, *args):
            return Future()  # never done: a long training

        def shutdown(self, wait=True, cancel_futures=False):
            events.append(("shutdown", wait, cancel_futures))

    waits = []

    def interrupted_wait(futures, timeout=None, return_when=None):
        waits.append(timeout)
        if len(waits) == 1:
            raise KeyboardInterrupt  # the signal arrives while the parent waits
        return set(), set(futures)

    monkeypatch.setattr(jobs, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(jobs, "resolve_device", lambda spec: torch.device("cpu"))
    monkeypatch.setattr(jobs, "wait", interrupted_wait)
    monkeypatch.setattr(jobs, "stop_workers", lambda pool: events.append("stop"))
    work = [jobs.Job(n, lambda: (str.upper, ("x",))) for n in ("a", "b")]
    with pytest.raises(KeyboardInterrupt):
        jobs.run_jobs(work, workers=2)
    assert waits == [None, jobs.STOP_WAIT_S]
    assert events == ["stop", "kill", ("shutdown", False, True)]


def test_both_settings_train_the_text_pair_first_and_each_control_follows_its_own(tmp_path):
    """`reproduce --preset all`: the natural-text pair beside the curriculum's depths; each
    2+-layer model stops its own preset's steps past the floor, and each 1-layer control
    follows only the runs of its setting."""
    import json

    from interp_toolkit.study.reproduce import (
        control_steps,
        depth_preset,
        study_runs,
        study_settings,
    )

    cfg = StudyConfig(out=tmp_path, preset=None)
    assert study_settings(cfg) == [("text", (1, 2)), ("cpu", (1, 2, 3, 8))]
    runs = study_runs(cfg)
    assert [r.name for r in runs] == ["text-1l", "text-2l", "cpu-1l", "cpu-2l", "cpu-3l", "cpu-8l"]
    text1, text2, cpu1 = runs[0], runs[1], runs[2]
    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.training.presets import TEXT_AFTER_INDUCTION

    # both settings stop past the floor, each after its own preset's steps after induction
    text = depth_preset(cfg, text2).train
    assert (text.stop_score, text.stop_after) == (THRESHOLDS.induction, TEXT_AFTER_INDUCTION)
    cpu = depth_preset(cfg, runs[3]).train
    assert (cpu.stop_score, cpu.stop_after) == (THRESHOLDS.induction, 200)
    assert depth_preset(StudyConfig(after_induction=50), text2).train.stop_after == 50
    assert depth_preset(cfg, text1).data.codec == "bytes"
    (tmp_path / "text-2l").mkdir()
    (tmp_path / "text-2l" / "metrics.jsonl").write_text(json.dumps({"step": 9000}) + "\n")
    assert control_steps(tmp_path, runs, cpu1) is None  # the text run is not its kind
    assert depth_preset(cfg, text1, control_steps(tmp_path, runs, text1)).train.steps == 9000
    assert study_settings(StudyConfig(out=tmp_path)) == study_settings(cfg)  # the default
    assert study_settings(StudyConfig(out=tmp_path, preset="cpu")) == [("cpu", (1, 2, 3, 8))]


def test_a_seed_folder_linked_to_the_study_itself_is_refused(tmp_path, capsys):
    """`DIR/seed-1` a link to `.` (DIR itself): seed 1's runs would have been seed 0's, and the
    fix offered would have deleted them."""
    out = tmp_path / "s"
    out.mkdir()
    (out / "study.json").write_text("{}")
    (out / "seed-1").symlink_to(".")
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--seeds", "2", "--preset", "cpu", "--layers", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert "is a link to" in err and "a folder above it" in err and "rm " in err
