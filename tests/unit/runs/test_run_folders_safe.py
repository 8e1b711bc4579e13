"""Run folders survive the outside world, without training anything (the fault tests that train
are in tests/integration/test_faults.py): file modes follow the umask, a permission problem is
named as one, damaged files are one line naming the file and the fix, a full disk leaves no
temporary file and the last checkpoint whole, a second writer is refused, and ``--out`` is
checked before any work."""

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import run_cli as run_main_cli

from interp_toolkit.errors import UserError
from interp_toolkit.models.build import build_model
from interp_toolkit.runs.folder import RunPaths, save_run
from interp_toolkit.text.codecs import EOT_ID, CompactVocab

ROOT = Path(__file__).resolve().parents[3]


def run_cli(capsys, *args):
    """The exit code and the one error line (asserted one line, no traceback)."""
    result = run_main_cli(capsys, *args)
    err = result.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return result.code, err


@pytest.fixture
def saved(tmp_path, tiny_cfg):
    codec = CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])
    cfg = tiny_cfg.replace(d_vocab=codec.d_vocab)
    return save_run(tmp_path / "run", build_model(cfg), codec, cfg)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_follow_the_umask(tmp_path, tiny_cfg, umask, mode):
    old = os.umask(umask)
    try:
        codec = CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])
        cfg = tiny_cfg.replace(d_vocab=codec.d_vocab)
        run = save_run(tmp_path / "run", build_model(cfg), codec, cfg)
    finally:
        os.umask(old)
    for name in ("model.safetensors", "config.json", "vocab.json"):
        assert stat.S_IMODE((run / name).stat().st_mode) == mode, name


def test_an_unreadable_file_is_a_permission_problem(saved, capsys, monkeypatch):
    """Not "corrupt... retrain the run": the fix for a permission problem is access, not deletion."""
    weights = saved / "model.safetensors"
    if os.geteuid() != 0:
        weights.chmod(0o000)
    else:  # root reads anything: the kernel's answer to another user is simulated
        real_open = os.open

        def refuse(path, *args, **kwargs):
            if Path(path) == weights:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr("interp_toolkit.files.io.os.open", refuse)
    code, err = run_cli(capsys, "sample", saved)
    assert code == 2 and "permission denied" in err and "model.safetensors" in err, err
    assert "corrupt" not in err and "damaged" not in err and "retrain" not in err


@pytest.mark.parametrize(
    "file, content, match",
    [
        ("vocab.json", "\x00garbage{", "vocabulary"),
        ("vocab.json", '{"kind": "compact", "gpt2_ids": [1, 2, 99999999]}', "vocabulary"),
        ("vocab.json", "[1, 2, 3]", "vocabulary"),
        ("config.json", '{"format_version": 1, "settings": {}}', 'no "model" section'),
        (
            "config.json",
            '{"format_version": 1, "model": {"n_layers": 2}}',
            "config.json is damaged",
        ),
        ("config.json", "{not json", "config.json is damaged"),
        ("model.safetensors", "\x80\x04pickle", "model.safetensors is damaged"),
    ],
)
def test_damaged_files_are_one_line_naming_the_file(saved, capsys, file, content, match):
    (saved / file).write_text(content)
    code, err = run_cli(capsys, "sample", saved)
    assert code == 2 and match in err and file in err and ("restore" in err or "retrain" in err)


def test_a_text_file_given_as_a_run_is_named_as_a_file(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    code, err = run_cli(capsys, "heads", text)
    assert code == 2 and "is a file, not a run folder" in err and "does not exist" not in err


def test_a_missing_head_on_a_one_layer_model_suggests_one_that_exists(tmp_path, capsys):
    from interp_toolkit.models.build import ModelConfig

    codec = CompactVocab([EOT_ID, *range(1, 31)])
    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=32)
    run = save_run(tmp_path / "one", build_model(cfg), codec, cfg)
    code, err = run_cli(capsys, "copying", run, "--head", "1.0")
    assert code == 2 and "does not exist" in err and "e.g. 0.0" in err and "e.g. 1.0" not in err


def test_an_emoji_the_vocabulary_lacks_is_named_whole(saved, capsys):
    code, err = run_cli(capsys, "exam", saved, "--prompt", "x 😀 y", "--target", "B")
    assert code == 2 and "😀" in err and "�" not in err


# ---------------------------------------------------------------------------- a full disk


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_leaves_no_temporary_file_and_names_the_file(tmp_path, monkeypatch):
    from interp_toolkit.files.io import write_bytes

    monkeypatch.setattr(Path, "write_bytes", _enospc)
    with pytest.raises(OSError) as exc:
        write_bytes(tmp_path / "x.bin", b"data")
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(tmp_path / "x.bin")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_during_a_checkpoint_keeps_the_last_one(tmp_path, tiny_model, monkeypatch):
    """A patched writer raises ENOSPC while the optimizer state of step 4 is written: no
    temporary file and no file of step 4 stays, and step 2's checkpoint is still the one."""
    from interp_toolkit.training import checkpoints as ck

    paths = RunPaths(tmp_path / "run")
    opt = torch.optim.AdamW(tiny_model.parameters())
    tiny_model(torch.randint(0, 64, (2, 8))).sum().backward()
    opt.step()
    ck.save_checkpoint(paths, tiny_model, opt, ck.Progress(2, 100, 1.0))
    before = sorted(p.name for p in paths.checkpoints.iterdir())
    real = ck.write_bytes

    def full_on_optimizer(path, data):
        if str(path).endswith(".pt"):
            with open(path.parent / f".{path.name}.partial.tmp", "wb"):
                pass  # what a writer dying half-way leaves... removed by the atomic writer?
            os.unlink(path.parent / f".{path.name}.partial.tmp")
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(ck, "write_bytes", full_on_optimizer)
    with pytest.raises(OSError):
        ck.save_checkpoint(paths, tiny_model, opt, ck.Progress(4, 200, 2.0))
    assert sorted(p.name for p in paths.checkpoints.iterdir()) == before
    assert ck.read_progress(paths) == ck.Progress(2, 100, 1.0)
    assert ck.read_checkpoint(paths).progress.step == 2


# ---------------------------------------------------------------------------- the lock


HOLDER = """
import sys, time
from interp_toolkit.files.io import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def _hold(folder):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_writer_is_refused_naming_the_pid_and_a_dead_ones_lock_taken_over(tmp_path):
    from interp_toolkit.files.io import folder_lock

    folder = tmp_path / "run"
    folder.mkdir()
    holder = _hold(folder)
    try:
        with pytest.raises(UserError, match=f"in use by another process \\(PID {holder.pid}\\)"):
            with folder_lock(folder):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert (folder / ".lock").read_text().strip() == str(holder.pid)  # kill -9 leaves it
    with folder_lock(folder) as stale:
        assert stale == str(holder.pid)
        assert (folder / ".lock").read_text().strip() == str(os.getpid())
    assert not (folder / ".lock").exists()


def test_train_into_a_folder_in_use_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("interp_toolkit.training.trainer.tokenize_corpus", _no_corpus)
    folder = tmp_path / "run"
    folder.mkdir()
    holder = _hold(folder)
    try:
        code, err = run_cli(capsys, "train", "--out", folder, "--quiet")
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and f"PID {holder.pid}" in err


# ---------------------------------------------------------------------------- --out, early


def _no_corpus(*args, **kwargs):
    raise AssertionError("the corpus was read before --out was checked")


def test_out_is_checked_before_the_corpus_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("interp_toolkit.training.trainer.tokenize_corpus", _no_corpus)
    existing = tmp_path / "a-file"
    existing.write_text("mine")
    code, err = run_cli(capsys, "train", "--out", existing, "--quiet")
    assert code == 2 and "a-file" in err and existing.read_text() == "mine"
    if os.geteuid() == 0:
        unwritable = Path("/sys/interp-toolkit-run")  # sysfs refuses mkdir, even to root
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        unwritable = locked / "run"
    code, err = run_cli(capsys, "train", "--out", unwritable, "--quiet")
    assert code == 2 and "not writable" in err
    code, err = run_cli(capsys, "train", "--out", tmp_path / "new" / "deep", "--steps", "0")
    assert code == 2 and "steps=0" in err
    assert not (tmp_path / "new").exists()  # bad settings: nothing created


def test_a_failure_before_training_removes_the_folder_it_created(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "run"
    code, err = run_cli(capsys, "train", "--out", out, "--corpus", tmp_path / "none", "--quiet")
    assert code == 2 and "existing path" in err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- --seed, studies


def test_seed_sets_init_and_data_order(tmp_path, capsys, monkeypatch):
    seen = {}

    def capture(out, model_cfg, data_cfg, train_cfg, **kwargs):
        seen.update(model=model_cfg.seed, train=train_cfg.seed)
        raise UserError("(test) captured")

    monkeypatch.setattr("interp_toolkit.training.train_model", capture)
    run_cli(capsys, "train", "--out", tmp_path / "r", "--seed", "5", "--quiet")
    assert seen == {"model": 5, "train": 5}


def _study_with_a_seed_0_run(tmp_path, tiny_cfg):
    from interp_toolkit.training.presets import get_preset
    from interp_toolkit.training.settings import settings_dict

    p = get_preset("cpu", 1)
    study = tmp_path / "study"
    study.mkdir()
    (study / "study.json").write_text(json.dumps({"status": "done", "seed": 0}))
    codec = CompactVocab([EOT_ID, *range(1, 63)])
    cfg = p.model.replace(d_vocab=codec.d_vocab, d_model=32, d_head=8)
    save_run(study / "cpu-1l", build_model(cfg), codec, cfg, settings_dict(p.data, p.train, "cpu"))
    return study


def _no_training(*args, **kwargs):
    raise AssertionError("a run was trained (or deleted and retrained)")


def test_reproduce_with_another_seed_does_not_reuse_a_run(tmp_path, capsys, tiny_cfg, monkeypatch):
    study = _study_with_a_seed_0_run(tmp_path, tiny_cfg)
    monkeypatch.setattr("interp_toolkit.study.folder.train_model", _no_training)
    before = (study / "cpu-1l" / "config.json").read_text()
    code, err = run_cli(
        capsys, "reproduce", "--out", study, "--preset", "cpu", "--layers", "1", "--seed", "5"
    )
    assert code == 2 and "seed=0 (asked 5)" in err and "cpu-1l" in err
    assert (study / "cpu-1l" / "config.json").read_text() == before  # nothing deleted
    assert json.loads((study / "study.json").read_text())["status"] == "done"


def test_study_json_is_never_left_running(tmp_path, capsys, monkeypatch):
    code, err = run_cli(capsys, "reproduce", "--out", tmp_path / "s", "--steps", "0")
    assert code == 2 and "steps=0" in err
    assert not (tmp_path / "s" / "study.json").exists()

    def fails(*args, **kwargs):
        raise UserError("(test) the corpus went away")

    monkeypatch.setattr("interp_toolkit.study.folder.train_model", fails)
    # a progress line, then the error's one line
    code, _, err = run_main_cli(
        capsys, "sweep", "--over", "n_ctx", "--values", "16", "--out", tmp_path / "w"
    )
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "error: (test) the corpus went away"
    marker = json.loads((tmp_path / "w" / "study.json").read_text())
    assert marker["status"] == "stopped" and "corpus went away" in marker["reason"]


# ---------------------------------------------------------------------------- damaged metrics


def test_report_names_a_cut_off_metrics_line(tmp_path, capsys):
    """A kill -9 mid-write leaves half a line: the report is still written, and the damage is
    named on standard error (the line, and the last step the curves reach)."""
    from _views_fixtures import make_tiny_run

    from interp_toolkit.runs.folder import metrics_damage, read_metrics

    run = make_tiny_run(tmp_path / "run")
    metrics = run / "metrics.jsonl"
    assert metrics_damage(run) is None
    lines = metrics.read_text().splitlines()
    metrics.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    assert len(read_metrics(run)) == len(lines) - 1
    damage = metrics_damage(run)
    assert f"its last line ({len(lines)} of {len(lines)}) is cut off" in damage
    assert "stops at step 35" in damage
    result = run_main_cli(capsys, "report", run, "--out", tmp_path / "r.html", "--device", "cpu")
    assert result.code == 0 and (tmp_path / "r.html").is_file()
    assert result.err.strip() == f"warning: {damage}"
    metrics.write_text("garbage\n" + "\n".join(lines) + "\n")
    assert "1 of its 10 lines are not whole records (line 1: not JSON)" in metrics_damage(run)
    # a JSON line whose induction grid has the wrong shape was an internal error in `report`
    bent = [json.loads(ln) for ln in lines]
    scored = next(i for i, r in enumerate(bent) if "induction" in r)
    bent[scored]["induction"] = [1, 2, 3]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in bent))
    assert f"(line {scored + 1}: line {scored + 1}.induction[0] is 1, not a list" in (
        metrics_damage(run)
    )
    result = run_main_cli(capsys, "report", run, "--out", tmp_path / "r2.html", "--device", "cpu")
    assert result.code == 0 and (tmp_path / "r2.html").is_file(), result.err
    assert result.err.startswith("warning: ") and "internal error" not in result.err
