"""The command line's error boundary: whatever goes wrong, one line and a known exit code, never a
traceback. Usage errors (typer's vendored click and the click package) exit 2, Ctrl-C 130 (SIGTERM
143), a full disk 1, and a bug 1 with its traceback in a report file that the line names."""

import errno
import re
import signal
from pathlib import Path

import click
import pytest
import typer
from cli_helpers import run_cli


def one_line(err):
    err = err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "args, match",
    [
        (["train", "--layers", "abc", "--out", "x"], "Invalid value for '--layers'"),
        (["train", "--steps", "1.5", "--out", "x"], "Invalid value for '--steps'"),
        (["train"], "Missing option '--out'"),
        (["train", "--out", "x", "--bogus"], "No such option"),
        (["bogus"], "No such command"),
    ],
)
def test_usage_errors_are_one_line_exit_2(capsys, tmp_path, monkeypatch, args, match):
    monkeypatch.chdir(tmp_path)
    run_cli(capsys, *args).one_line_error(match)
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def saved_run(tmp_path, tiny_cfg):
    from interp_toolkit.models.build import build_model
    from interp_toolkit.runs.folder import save_run
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab

    codec = CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])
    cfg = tiny_cfg.replace(d_vocab=codec.d_vocab)
    return save_run(tmp_path / "run", build_model(cfg), codec, cfg)


def _raise_in_sample(monkeypatch, exc):
    def boom(*a, **k):
        raise exc

    monkeypatch.setattr("interp_toolkit.models.sampling.sample_ids", boom)


def test_ctrl_c_exits_130_with_one_line(capsys, monkeypatch, saved_run):
    _raise_in_sample(monkeypatch, KeyboardInterrupt())
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == 130 and one_line(err).startswith("interrupted")


def test_an_interrupt_keeps_its_message_and_signal(capsys, monkeypatch, saved_run):
    from interp_toolkit.errors import Interrupted

    _raise_in_sample(
        monkeypatch, Interrupted("stopped at step 7: checkpoint saved", signal.SIGTERM)
    )
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == 143 and one_line(err) == "interrupted: stopped at step 7: checkpoint saved"


def test_a_bug_prints_one_line_naming_its_report(capsys, monkeypatch, saved_run, tmp_path):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    _raise_in_sample(monkeypatch, ZeroDivisionError("a bug\nover two lines"))
    code, _, err = run_cli(capsys, "sample", str(saved_run), "--tokens", "3")
    assert code == 1 and "ZeroDivisionError: a bug" in one_line(err) and "bug" in err
    report = Path(re.search(r"report is in (\S+)", err).group(1))
    text = report.read_text()
    assert report.parent == tmp_path and "Traceback" in text and "--tokens 3" in text


@pytest.mark.parametrize(
    "exc, match, want",
    [
        (OSError(errno.ENOSPC, "No space left on device", "/data/run/x"), "no space left", 1),
        (PermissionError(errno.EACCES, "Permission denied", "/data/run/x"), "permission denied", 1),
        (OSError(errno.EROFS, "Read-only file system", "/data/run/x"), "read-only", 1),
        (BrokenPipeError(errno.EPIPE, "Broken pipe", "/data/run/x"), "closed its end", 1),
        (OSError(errno.ELOOP, "Too many levels of symbolic links", "/data/run/x"), "loop", 2),
        (OSError(errno.ENAMETOOLONG, "File name too long", "/data/run/x"), "too long", 2),
    ],
)
def test_disk_path_and_permission_problems_are_one_line(
    capsys, monkeypatch, saved_run, exc, match, want
):
    _raise_in_sample(monkeypatch, exc)
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == want and match in one_line(err) and "/data/run/x" in err


def test_standard_output_closed_early_exits_1_quietly(capsys, monkeypatch, saved_run):
    _raise_in_sample(monkeypatch, BrokenPipeError(errno.EPIPE, "Broken pipe"))
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == 1 and err == ""  # `interp-toolkit ... | head`: the reader has what it wanted


def test_a_full_device_is_named_as_a_device(capsys, monkeypatch, saved_run):
    _raise_in_sample(monkeypatch, OSError(errno.ENOSPC, "No space left on device", "/dev/full"))
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == 1 and one_line(err) == (
        "error: the device /dev/full is full (no space left): write to another path."
    )


@pytest.mark.parametrize(
    "exc",
    [MemoryError(), RuntimeError("[enforce fail] DefaultCPUAllocator: can't allocate memory")],
)
def test_running_out_of_memory_is_one_line_not_a_bug(capsys, monkeypatch, saved_run, exc):
    _raise_in_sample(monkeypatch, exc)
    code, _, err = run_cli(capsys, "sample", str(saved_run))
    assert code == 1 and "out of memory" in one_line(err) and "bug" not in err


def _toy_app(exc):
    from interp_toolkit.cli.boundary import BoundaryGroup

    app = typer.Typer(cls=BoundaryGroup, add_completion=False)

    @app.command("go")
    def go() -> None:
        raise exc

    @app.command("other")
    def other() -> None:
        pass

    return app


@pytest.mark.parametrize(
    "exc",
    [
        click.UsageError("bad usage from the click package"),
        typer._click.exceptions.UsageError("bad usage from typer's click"),
        click.BadParameter("bad parameter from the click package"),
    ],
)
def test_click_and_typer_click_errors_alike(capsys, exc):
    from interp_toolkit.cli.boundary import run

    with pytest.raises(SystemExit) as info:
        run(_toy_app(exc), ["go"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and one_line(err).startswith("error: ") and "bad" in err
    assert run(_toy_app(exc), ["other"]) is None  # success returns


# ------------------------------------------------------------------ text that is not UTF-8


@pytest.mark.parametrize(
    "args",
    [
        ["sample", "{run}", "--prompt", "\udcff\udcfe abc", "--tokens", "2"],
        ["exam", "{run}", "-p", "ab\udcffab", "-t", "a"],
        ["view", "{run}", "-p", "\udcff\udcfe", "--out", "{tmp}/x.html"],
        ["copying", "{run}", "--head", "0.0", "--token", "\udcff"],
    ],
    ids=["sample", "exam", "view", "copying"],
)
def test_bytes_that_are_not_utf8_on_the_command_line_are_one_line(
    capsys, monkeypatch, saved_run, tmp_path, args
):
    """``sample RUN --prompt $'\\xff\\xfe abc'`` (Python reads such bytes as lone surrogates)
    ended in ``UnicodeEncodeError: ... surrogates not allowed`` and the crash reporter then failed
    on argv too: now one line naming the option and the byte, exit 2, nothing written."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    argv = [a.format(run=saved_run, tmp=tmp_path) for a in args]
    err = run_cli(capsys, *argv).one_line_error("which is not UTF-8")
    assert "0xff" in err and "-" in err.split(" holds ")[0], err
    assert not (tmp_path / "x.html").exists()
    assert not list(tmp_path.glob("interp-toolkit-crash-*"))


def test_a_non_utf8_file_name_is_still_a_path(capsys, saved_run, tmp_path):
    """The near miss: a path may hold such bytes (Linux file names are bytes)."""
    out = tmp_path / "h\udcff.json"
    assert run_cli(capsys, "heads", saved_run, "--n-seqs", 4, "--json", out).code == 0
    assert out.is_file()


def test_the_crash_report_writes_an_argv_that_is_not_utf8(capsys, monkeypatch, saved_run, tmp_path):
    """The crash reporter wrote argv strictly as UTF-8 and failed on a surrogate (the report
    then went nowhere): it writes it with errors="replace"."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    _raise_in_sample(monkeypatch, ZeroDivisionError("a bug"))
    code, _, err = run_cli(capsys, "sample", str(saved_run), "--tokens", "3", "--device", "cpu")
    assert code == 1
    from interp_toolkit.cli.boundary import _crash

    with pytest.raises(SystemExit):
        _crash(ZeroDivisionError("a bug"), ["sample", "--out", "x\udcffy"])
    report = sorted(tmp_path.glob("interp-toolkit-crash-*"))[-1].read_text()
    assert "--out x?y" in report and "ZeroDivisionError" in report


def test_standard_output_that_cannot_encode_a_character_escapes_it(monkeypatch, saved_run):
    """``PYTHONIOENCODING=ascii sample RUN --prompt 🙂`` was an internal-bug report: standard
    output and error now write what their encoding cannot as an escape."""
    import io
    import sys

    from interp_toolkit.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding="ascii"))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(err, encoding="ascii"))
    try:
        main(["sample", str(saved_run), "--prompt", "\U0001f642 hi", "--tokens", "2"])
    except SystemExit as exc:
        assert not exc.code, err.getvalue()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    assert b"\\U0001f642" in out.getvalue(), (out.getvalue(), err.getvalue())


def test_the_boundary_keeps_no_module_state_and_no_private_typer_import():
    """Issue 45: no subclass of typer's private vendored click (``typer._click``), and no
    mutable module state in cli/boundary.py and cli/given.py (what a command line gives and
    claims lives in its Invocation, one per command run)."""
    import ast

    from interp_toolkit.cli import boundary, given

    for module in (boundary, given):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = [
            n.module if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        ]
        assert not [m for m in imported if m and "._click" in m], module.__name__
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                value = node.value
                mutable = isinstance(value, (ast.Dict, ast.List, ast.Set)) or (
                    isinstance(value, ast.Call)
                    and getattr(value.func, "id", "") in ("dict", "list", "set")
                )
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                assert not mutable or all(n.isupper() for n in names), (module.__name__, names)


def test_a_deleted_working_folder_is_one_line(capsys, monkeypatch, saved_run):
    """Run from a folder that was deleted: torch's oneMKL died with "Intel oneMKL FATAL ERROR"
    (exit 2, no line of ours)."""

    def gone():
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr("os.getcwd", gone)
    run_cli(capsys, "sample", str(saved_run)).one_line_error("the current folder no longer exists")


def test_a_read_only_file_system_is_said_as_such_even_as_root(monkeypatch, tmp_path):
    """As root on a read-only file system, writing over a run's file was "permission denied ...
    ask its owner" (os.access says no for EROFS too): the writer raises EROFS, which the
    boundary names as the read-only file system (test_disk_path_and_permission_problems...)."""
    import os

    from interp_toolkit.files.io import write_text

    out = tmp_path / "report.html"
    out.write_text("old")
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, m, **k: not (m & os.W_OK and str(p) == str(out)) and real(p, m)
    )
    monkeypatch.setattr("interp_toolkit.files.io._read_only", lambda path: True)
    with pytest.raises(OSError) as exc:
        write_text(out, "new")
    assert exc.value.errno == errno.EROFS and out.read_text() == "old"
    monkeypatch.setattr("interp_toolkit.files.io._read_only", lambda path: False)
    with pytest.raises(OSError) as exc:
        write_text(out, "new")
    assert exc.value.errno == errno.EACCES  # the near miss: a file the user may not write
