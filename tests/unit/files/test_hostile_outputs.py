"""Issue 33's hostile command lines, in-process on tiny saved runs: a run's own files are never an
output, an empty path is refused, every output is proven writable before any work, standard
output under ``--json -`` / ``--out -`` holds that document alone, and bad input is a usage
error (one line, exit 2), never "internal error"."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
from pathlib import Path

import pytest
from analysis_helpers import tiny_codec, tiny_mlp_text_run
from cli_helpers import run_cli

from interp_toolkit.models.build import build_model


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def run(tmp_path, tiny_cfg):
    from interp_toolkit.runs.folder import save_run

    return save_run(tmp_path / "run", build_model(tiny_cfg), tiny_codec(tiny_cfg.d_vocab), tiny_cfg)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory):
    """A 2-layer MLP run with a text corpus: every command with a --json option runs on it."""
    tmp = tmp_path_factory.mktemp("mlp")
    patch = pytest.MonkeyPatch()
    patch.setenv("INTERP_TOOLKIT_CACHE", str(tmp / "cache"))
    yield tiny_mlp_text_run(tmp, repeat_fraction=None)
    patch.undo()


# ----------------------------------------------------------- a run's own files are never an output


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{run}", "--out", "{run}/model.safetensors"],
        ["report", "{run}", "--out", "{run}/config.json"],
        ["heads", "{run}", "--json", "{run}/model.safetensors"],
        ["heads", "{run}", "--json", "{run}/config.json"],
        ["heads", "{run}", "--csv", "{run}/checkpoints/new.csv"],
        ["circuit", "{run}", "--json", "{link}"],
        ["exam", "{run}", "--periods", "--chance-run", "{run}", "--json", "{run}/vocab.json"],
        ["sae", "{run}", "--hook", "blocks.0.attn.hook_z", "--out", "{run}"],
    ],
    ids=["report-weights", "report-config", "heads-weights", "heads-config", "heads-csv-new",
         "circuit-symlink", "exam-vocab", "sae-folder"],
)  # fmt: skip
def test_a_run_file_is_never_an_output(run, tmp_path, capsys, argv):
    link = tmp_path / "link.json"
    link.symlink_to(run / "model.safetensors")
    before = _files(run)
    args = [a.format(run=run, link=link) for a in argv]
    run_cli(capsys, *args).one_line_error("this command reads: writing there could destroy")
    assert _files(run) == before and link.is_symlink()
    from interp_toolkit.runs.folder import load_run

    assert load_run(run, device="cpu").model.cfg.n_layers == 2  # the run still loads


def test_what_a_command_writes_into_its_run_stays_allowed(run, capsys, monkeypatch):
    asked = []
    monkeypatch.setattr(
        "interp_toolkit.reports.run_report.build_run_report",
        lambda run_path, out, device: asked.append(out) or out,
    )
    code, _, err = run_cli(capsys, "report", run, "--out", run / "report.html")
    assert code == 0 and asked == [run / "report.html"], err


# ------------------------------------------------------------------------ an empty path is refused


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--out", ""],
        ["train", "--out", "r", "--corpus", ""],
        ["reproduce", "--out", ""],
        ["sweep", "--over", "lr", "--values", "0.001", "--out", ""],
        ["heads", ""],
        ["report", ""],
        ["sample", ""],
        ["copying", "{run}", "--head", "0.0", "--json", ""],
        ["report", "{run}", "--out="],
        ["exam", "{run}", "--periods", "--chance-run", ""],
    ],
)
def test_an_empty_path_is_refused_before_anything(run, tmp_path, monkeypatch, capsys, argv):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _files(run)
    run_cli(capsys, *[a.format(run=run) for a in argv]).one_line_error("is an empty path")
    assert list(work.iterdir()) == [] and _files(run) == before


# ------------------------------------------------------------ every output is checked before work


def test_a_deaf_socket_is_refused_before_the_analysis_and_before_any_output(
    run, tmp_path, monkeypatch, capsys
):
    deaf = tmp_path / "deaf.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(deaf))  # bound, never listening
    sock.close()

    def no_work(*a, **k):
        raise AssertionError("the analysis ran")

    monkeypatch.setattr("interp_toolkit.heads.discovery.discover", no_work)
    out = tmp_path / "h.json"
    result = run_cli(capsys, "heads", run, "--json", out, "--csv", deaf)
    assert "--csv" in result.one_line_error("nobody listens")
    assert not out.exists()


def test_a_listening_socket_gets_the_output_on_the_connection_checked(run, tmp_path, capsys):
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    received: list[bytes] = []

    def serve_once() -> None:  # one connection only: a probe that hung up would lose the data
        conn, _ = server.accept()
        with conn:
            received.append(b"".join(iter(lambda: conn.recv(65536), b"")))

    thread = threading.Thread(target=serve_once, daemon=True)
    thread.start()
    assert run_cli(capsys, "copying", run, "--head", "1.0", "--json", path).code == 0
    thread.join(timeout=60)
    server.close()
    assert json.loads(received[0])["head"] == "1.0"


@pytest.mark.parametrize("values", ["-1", "0.0010000001,0.0010000002"])
def test_sweep_checks_its_values_before_making_its_folder(tmp_path, capsys, values):
    out = tmp_path / "sweep"
    err = run_cli(capsys, "sweep", "--over", "lr", "--values", values, "--out", out)
    err.one_line_error("lr" if values == "-1" else "would share one run folder (lr-0.001)")
    assert not out.exists()


def test_a_trailing_slash_file_destination_is_refused(run, tmp_path, capsys):
    target = tmp_path / "newdir"
    result = run_cli(capsys, "copying", run, "--head", "0.0", "--json", f"{target}/")
    result.one_line_error("ends with a slash, so it names a folder")
    assert not target.exists()


def test_a_dangling_symlink_folder_is_named_as_one(tmp_path, capsys):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "nowhere" / "run")
    result = run_cli(capsys, "train", "--out", link, "--steps", "2", "--quiet")
    result.one_line_error(f"is a symlink to {tmp_path / 'nowhere' / 'run'}, which does not exist")
    assert not (tmp_path / "nowhere").exists()


# -------------------------------------------------------- standard output holds the document alone

COMMANDS_WITH_JSON = {
    "heads": ["--n-seqs", "4"],
    "exam": ["--prompt", "1,2,1,2,1", "--target", ",", "--top-k", "3"],
    "copying": ["--head", "1.0"],
    "circuit": ["--n-prompts", "4", "--ig-steps", "1"],
    "neurons": ["--layer", "1", "--top", "4", "--n-seqs", "8", "--show", "2"],
    "probe": ["--feature", "token", "--n-seqs", "25"],
    "sae": ["--hook", "blocks.1.attn.hook_z", "--tokens", "2048", "--expansion", "2", "--k", "4"],
}
#: Commands whose ``--json -`` is checked elsewhere, on a run they can read (``stages`` needs kept
#: checkpoints, which mlp_run, never trained, has none of: tests/unit/development/test_stages.py).
JSON_CHECKED_ELSEWHERE = {"stages"}


def test_every_command_with_a_json_option_is_checked_below():
    import typer.main

    from interp_toolkit.cli import app

    group = typer.main.get_command(app)
    have = {  # hidden: an earlier name of a command listed here (circuits: copying)
        n
        for n, c in group.commands.items()
        if not c.hidden and any("--json" in p.opts for p in c.params)
    }
    assert have == set(COMMANDS_WITH_JSON) | JSON_CHECKED_ELSEWHERE


@pytest.mark.parametrize("command", sorted(COMMANDS_WITH_JSON))
def test_json_dash_is_json_alone_on_stdout(mlp_run, tmp_path, capsys, command):
    extra = ["--out", tmp_path / "sae", "--show", "2"] if command == "sae" else []
    code, out, err = run_cli(
        capsys, command, mlp_run, *COMMANDS_WITH_JSON[command], *extra, "--json", "-"
    )
    assert code == 0, err
    assert isinstance(json.loads(out), dict)
    if command == "sae":
        assert f"wrote {tmp_path / 'sae'}" in err


def test_exam_periods_json_dash_is_json_alone(mlp_run, capsys):
    code, out, err = run_cli(
        capsys, "exam", mlp_run, "--periods", "--n-prompts", "4", "--json", "-"
    )
    assert code == 0, err
    assert json.loads(out)["periods"]


def test_out_dash_is_the_page_alone_on_stdout(mlp_run, capsys):
    argv = ["circuit", mlp_run, *COMMANDS_WITH_JSON["circuit"], "--out", "-"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert out.startswith("<!DOCTYPE html>") and out.endswith("</html>\n")
    assert "wrote" not in out


# ------------------------------------------------------------------- bad input is a usage error


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["train", "--out", "{tmp}/r", "--steps", str(10**30)], "--steps=1000000000000000000000000000000 cannot work"),
        (["copying", "{run}", "--head", "².0"], "is not of the form L.H"),
        (["probe", "{run}", "--feature", "token", "--ablate", "².0"], "is not of the form L.H"),
        (["sae", "{run}", "--hook", "blocks.².attn.hook_z", "--out", "{tmp}/s"], "is not a block hook"),
        (["sae", "{run}", "--hook", "blocks.0.attn.hook_z", "--k", "100000", "--out", "{tmp}/s"], "this SAE has 256 latents"),
        (["reproduce", "--workers", "1000000", "--out", "{tmp}/st"], "CPU cores; use 1 to"),
    ],
    ids=["steps-overflow", "circuits-unicode-head", "probe-unicode-ablate", "sae-unicode-hook",
         "sae-k-above-latents", "reproduce-workers"],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(run, tmp_path, capsys, argv, match):
    before = _files(run)
    run_cli(capsys, *[a.format(run=run, tmp=tmp_path) for a in argv]).one_line_error(match)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and _files(run) == before


def test_a_zero_padded_hook_layer_is_that_layer(mlp_run, tmp_path, capsys):
    argv = ["sae", mlp_run, "--hook", "blocks.01.attn.hook_z", "--tokens", "2048", "--quiet"]
    code, _, err = run_cli(capsys, *argv, "--expansion", "2", "--k", "4", "--out", tmp_path / "s")
    assert code == 0, err
    cfg = json.loads((tmp_path / "s" / "cfg.json").read_text())
    assert cfg["hook_name"] == "blocks.1.attn.hook_z" and cfg["hook_layer"] == 1


@pytest.mark.parametrize("argv", [["sample", "{run}", "--tokens", "3"], ["heads", "{run}"]])
def test_a_closed_standard_output_is_an_io_problem(run, capsys, monkeypatch, argv):
    monkeypatch.setattr(sys, "stdout", None)  # what Python makes of `>&-`
    result = run_cli(capsys, *[a.format(run=run) for a in argv])
    result.one_line_error("standard output is closed", code=1)


def test_a_file_past_the_size_limit_is_named_with_the_limit(run, tmp_path, capsys, monkeypatch):
    import resource

    def too_big(path, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(path))

    monkeypatch.setattr("interp_toolkit.files.io.write_bytes", too_big)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (65536, resource.RLIM_INFINITY))
    out = tmp_path / "r.html"
    result = run_cli(capsys, "copying", run, "--head", "0.0", "--json", out)
    err = result.one_line_error(f"{out} would pass this process's file-size limit", code=1)
    assert "65536 bytes" in err and "ulimit -f" in err


def test_a_lock_that_is_a_folder_is_named(tmp_path):
    from interp_toolkit.errors import UserError
    from interp_toolkit.files.io import folder_lock

    (tmp_path / ".lock").mkdir()
    with pytest.raises(UserError, match=r"\.lock is a folder, not the lock file of the run folder"):
        with folder_lock(tmp_path, "run folder"):
            pass
    assert (tmp_path / ".lock").is_dir()
