"""Issue 33's hostile cases that need a real process: standard output closed (``>&-``), a
file-size limit (``ulimit -f``) below a report's size, and ``RUN/.lock`` being a folder when a
trained run is resumed. Each is one line naming the problem, never "internal error"."""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_helpers import tiny_codec

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, preexec_fn=None):
    """``python -m interp_toolkit ARGS``; ``preexec_fn`` runs in the child first (its fd 1 is a
    pipe until it closes it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "interp_toolkit", *map(str, args)]
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=600, preexec_fn=preexec_fn
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr.strip()


def one_line(err):
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from interp_toolkit.models.build import ModelConfig, build_model
    from interp_toolkit.runs.folder import save_run

    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64, seed=0)
    return save_run(tmp_path_factory.mktemp("r") / "run", build_model(cfg), tiny_codec(64), cfg)


@pytest.mark.parametrize("argv", [["sample", "--tokens", "3"], ["heads", "--n-seqs", "4"]])
def test_a_closed_standard_output_is_one_line(run, argv):
    code, err = cli(argv[0], run, *argv[1:], preexec_fn=lambda: os.close(1))
    assert code == 1 and one_line(err).startswith("error: standard output is closed")


def test_a_file_size_limit_below_the_report_is_named_with_its_file(run, tmp_path):
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))

    out = tmp_path / "report.html"
    code, err = cli("report", run, "--out", out, preexec_fn=limit)
    assert code == 1, err
    assert one_line(err) == (
        f"error: {out} would pass this process's file-size limit (65536 bytes, set by ulimit -f): "
        "raise it (ulimit -f unlimited) or write less."
    )
    assert list(tmp_path.iterdir()) == []  # no report, no temporary file


def test_a_lock_that_is_a_folder_is_named_on_resume(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((Path(os.__file__).parent / "textwrap.py").read_text() * 4)
    out = tmp_path / "run"
    tiny = ["--layers", "1", "--d-model", "32", "--n-ctx", "32", "--vocab-size", "256", "--quiet"]
    code, err = cli("train", "--out", out, "--corpus", corpus, "--steps", "4", *tiny)
    assert code == 0, err
    (out / ".lock").mkdir()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, err = cli("train", "--out", out, "--resume", "--steps", "6", "--quiet")
    assert code == 2 and one_line(err) == (
        f"error: {out / '.lock'} is a folder, not the lock file of the run folder: move it away "
        "(or rmdir it if empty) and run the command again."
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
