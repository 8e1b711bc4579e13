"""Fault injection: real ``interp-toolkit train`` processes are killed, interrupted, run out of
disk, share a folder, or meet damaged checkpoint files, and a run is never lost: ``--resume``
ends with weights bit-identical to an uninterrupted run, and every failure is one line.

Each process runs ``python -m interp_toolkit`` through ``fault_runner.py``, which injects the
fault named by FAULT (a signal sent at a given step, during a checkpoint write, or while the
corpus is read). The model is tiny (1 layer, d_model 32, 16 steps) so the file stays fast."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_helpers import run_cli
from safetensors.torch import load_file

from interp_toolkit.runs.folder import RunPaths
from interp_toolkit.training.checkpoints import read_progress

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "fault_runner.py"
STEPS = 16
TINY = ["--steps", str(STEPS), "--layers", "1", "--d-model", "32", "--n-ctx", "32"]
TINY += ["--vocab-size", "256", "--seed", "3", "--quiet"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 130 kB of Python source as one text file (a single-file corpus)."""
    lib = Path(os.__file__).parent
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("".join((lib / n).read_text() for n in ("argparse.py", "textwrap.py")))
    return path


def terminal_sigint() -> None:
    """A child's SIGINT as a terminal's Ctrl-C meets it: a shell without job control starts
    background jobs (pytest among them) with SIGINT ignored, and the child would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train(out, corpus, *extra, fault=None, wait=True):
    cmd = [sys.executable]
    cmd += [str(RUNNER)] if fault else ["-m", "interp_toolkit"]
    cmd += ["train", "--out", str(out), "--corpus", str(corpus), *TINY, *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAULT": fault or ""}
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=terminal_sigint,
    )
    if not wait:
        return proc
    out_text, err = proc.communicate(timeout=600)
    assert "Traceback" not in err, err
    return proc.returncode, err.strip()


def one_line(err):
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def assert_same_weights(a: Path, b: Path):
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def leftovers(run: Path):
    return sorted(str(p.relative_to(run)) for p in run.rglob("*.tmp"))


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "run"
    code, err = train(out, corpus)
    assert code == 0, err
    return out


def test_ctrl_c_and_kill_9_at_random_steps_then_resume_is_bit_identical(
    corpus, reference, tmp_path
):
    """Ctrl-C (SIGINT) at a random step, long before the preset's first regular checkpoint (step
    250): exit 130, one line, a checkpoint of the next step (the step under way finishes). Then
    kill -9 at a random later step of the resumed run, and once more while the last checkpoint
    is half-written: each time ``--resume`` goes on from the last whole checkpoint, and the end
    state is bit-identical to the uninterrupted run's."""
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    k1 = rng.randrange(2, STEPS - 4)
    k2 = rng.randrange(k1 + 2, STEPS)
    out, at = tmp_path / "run", f"seed {seed}: SIGINT at {k1}, kill -9 at {k2}"
    code, err = train(out, corpus, fault=f"step:INT:{k1}")
    assert code == 130, (at, err)
    assert one_line(err).startswith(f"interrupted: stopped at step {k1 + 1} of {STEPS} by SIGINT")
    assert "--resume" in err and read_progress(RunPaths(out)).step == k1 + 1, at
    code, _ = train(out, corpus, "--resume", fault=f"step:KILL:{k2}")
    assert code == -signal.SIGKILL and read_progress(RunPaths(out)).step == k1 + 1, at
    code, _ = train(out, corpus, "--resume", fault=f"checkpoint:KILL:{STEPS}")
    assert code == -signal.SIGKILL and read_progress(RunPaths(out)).step == k1 + 1, at
    code, err = train(out, corpus, "--resume")
    assert code == 0, (at, err)
    assert_same_weights(reference, out)
    assert leftovers(out) == [] and not (out / ".lock").exists()


def test_ctrl_c_before_training_leaves_nothing_behind(corpus, tmp_path):
    out = tmp_path / "new" / "run"
    code, err = train(out, corpus, fault="reading:INT")
    assert code == 130 and "before training began" in one_line(err)
    assert not (tmp_path / "new").exists()  # no stuck folder: a plain train can start over


@pytest.fixture
def small_disk(tmp_path):
    """A 420 KiB tmpfs: room for a run and its first checkpoint, not for the last one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs root (mount -t tmpfs)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=420k", "tmpfs", str(disk)])
    if done.returncode != 0:
        pytest.skip("mount -t tmpfs is not allowed here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_line_and_the_run_resumes(corpus, reference, small_disk):
    """On a real full disk (a small tmpfs): exit 1, one line naming the problem and the file, no
    temporary file left, the step-1 checkpoint whole; after space is freed, ``--resume`` ends
    bit-identical to the uninterrupted run."""
    out = small_disk / "run"
    code, err = train(out, corpus)
    assert code == 1 and "no space left" in one_line(err).lower(), err
    assert str(out) in err and leftovers(out) == []
    assert read_progress(RunPaths(out)).step == 1
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    code, err = train(out, corpus, "--resume")
    assert code == 0, err
    assert_same_weights(reference, out)


def _stopped(pid):
    for _ in range(6000):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "T":
            return
        time.sleep(0.1)
    raise AssertionError("the first training never reached its step")


def test_two_writers_on_one_folder(corpus, reference, tmp_path):
    """A second training into a folder being trained is refused at once, naming the PID; the
    first finishes untouched (its metrics in order, weights equal to the uninterrupted run)."""
    out = tmp_path / "run"
    first = train(out, corpus, fault="step:STOP:3", wait=False)
    try:
        _stopped(first.pid)
        code, err = train(out, corpus)
        assert code == 2 and f"in use by another process (PID {first.pid})" in one_line(err)
    finally:
        first.send_signal(signal.SIGCONT)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    steps = [int(line.split('"step": ')[1].split(",")[0]) for line in open(out / "metrics.jsonl")]
    assert steps == sorted(set(steps))
    assert_same_weights(reference, out)


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda ck: (ck / "state.json").write_text("\x00garbage{"), "state.json"),
        (lambda ck: (ck / "state.json").write_text('{"step": "x"}'), "state.json"),
        (lambda ck: _truncate(next(ck.glob("*.optimizer.pt"))), "optimizer.pt"),
        (lambda ck: _truncate(next(ck.glob("step_*.safetensors"))), ".safetensors"),
        (lambda ck: next(ck.glob("*.optimizer.pt")).unlink(), "optimizer.pt"),
    ],
    ids=[
        "state-garbage",
        "state-wrong-type",
        "optimizer-truncated",
        "weights-truncated",
        "optimizer-missing",
    ],
)
def test_damaged_checkpoint_files_are_one_line_and_change_nothing(
    reference, tmp_path, capsys, damage, match
):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    damage(run / "checkpoints")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    result = run_cli(capsys, "train", "--out", run, "--resume", "--steps", STEPS + 4, "--quiet")
    err = result.one_line_error(match)
    assert "--restart" in err, err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # metrics too


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    "option, match", [(["--seed", "4"], "seed"), (["--layers", "2"], "n_layers")]
)
def test_resume_refuses_changed_options(reference, tmp_path, capsys, option, match):
    """``--resume`` continues a run as it was configured: a changed option is named, not ignored."""
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    err = run_cli(capsys, "train", "--out", run, "--resume", *option, "--quiet").one_line_error(
        "other settings than asked"
    )
    assert match in err, err
    assert "--restart" in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


# ---------------------------------------------------------------------------- hostile outputs


def cli(*args, **popen):
    """``python -m interp_toolkit ARGS`` as a real process (stdout and stderr piped)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "interp_toolkit", *map(str, args)]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
    )


def finish(proc):
    out, err = proc.communicate(timeout=600)
    assert "Traceback" not in err, err
    return proc.returncode, out, err.strip()


def test_json_to_dev_full_dev_null_a_fifo_and_a_symlink(reference, tmp_path):
    """Real processes: ``--json /dev/full`` exits 1 naming the device; ``/dev/null`` exits 0;
    both stay character devices; a FIFO read by ``cat`` receives the JSON and stays a FIFO; a
    symlink writes its target; ``/dev/stdout`` is the command's own standard output."""
    import json
    import stat

    head = ("copying", reference, "--head", "0.0", "--json")
    code, _, err = finish(cli(*head, "/dev/full"))
    assert code == 1 and one_line(err) == (
        "error: the device /dev/full is full (no space left): write to another path."
    )
    code, _, err = finish(cli(*head, "/dev/null"))
    assert code == 0, err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    code, _, err = finish(cli(*head, fifo))
    received, _ = reader.communicate(timeout=600)
    assert code == 0 and json.loads(received)["head"] == "0.0", err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    (tmp_path / "keep.json").write_text("old")
    (tmp_path / "link.json").symlink_to("keep.json")
    code, _, err = finish(cli(*head, tmp_path / "link.json"))
    assert code == 0 and (tmp_path / "link.json").is_symlink(), err
    assert json.loads((tmp_path / "keep.json").read_text())["head"] == "0.0"
    code, out, err = finish(cli(*head, "/dev/stdout"))
    assert code == 0 and json.loads(out)["head"] == "0.0", err
    assert err == "wrote /dev/stdout"


def test_sampling_streams_and_ctrl_c_keeps_the_text(reference):
    """``sample --tokens 100000000`` prints text as it comes (no silent hang); Ctrl-C stops it:
    exit 130, one line saying how many tokens came, the text kept on standard output."""
    proc = cli(
        "sample", reference, "--prompt", "def", "--tokens", 100_000_000,
        preexec_fn=terminal_sigint,
    )  # fmt: skip
    first = proc.stdout.read(40)  # blocks until the command has printed 40 characters
    proc.send_signal(signal.SIGINT)
    code, rest, err = finish(proc)
    last = err.splitlines()[-1]
    assert code == 130 and first.startswith("def") and len(first) == 40, (code, err)
    assert last.startswith("interrupted: stopped after ") and "of 100000000 tokens" in last


def test_a_bad_seed_is_refused_before_the_run_folder_exists(corpus, tmp_path):
    """``train --seed -5`` used to crash after writing config.json, leaving an "unfinished" run
    that blocked the next ``train --out``: now it is one line, exit 2, and nothing is written."""
    out = tmp_path / "new" / "run"
    code, _, err = finish(cli("train", "--out", out, "--corpus", corpus, "--seed", -5, "--quiet"))
    assert code == 2 and "--seed=-5 cannot work" in one_line(err)
    assert not (tmp_path / "new").exists()
