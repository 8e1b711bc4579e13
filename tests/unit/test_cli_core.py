"""Bad input to the core commands: one line naming the problem and the fix, exit code 2, nothing written."""

import json
import subprocess
import sys

import pytest
import torch

from interp_toolkit.cli import main
from interp_toolkit.devices import resolve_device
from interp_toolkit.models import build_model
from interp_toolkit.runs import save_run
from interp_toolkit.tokenizer import EOT_ID, CompactVocab


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    err = capsys.readouterr().err.strip()
    return exc.value.code, err


def assert_one_line_error(code, err, match):
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and match in err, err


@pytest.fixture
def tiny_run(tmp_path, tiny_cfg):
    codec = CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])
    cfg = tiny_cfg.replace(d_vocab=codec.d_vocab)
    return save_run(tmp_path / "run", build_model(cfg), codec, cfg)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--preset", "gpu"], "unknown preset 'gpu'"),
        (["--layers", "5"], "--layers 5 is not offered"),
        (["--n-ctx", "2"], "n_ctx=2 cannot work"),
        (["--d-model", "130"], "--d-model 130 cannot work"),
        (["--corpus", "/no/such/corpus"], "existing path"),
        (["--corpus", "hf:Skylion007/openwebtext"], "offline"),
    ],
)
def test_train_bad_input(capsys, tmp_path, monkeypatch, args, match):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    code, err = run_cli(capsys, "train", "--out", str(out), "--quiet", *args)
    assert_one_line_error(code, err, match)
    assert not out.exists()


def test_train_empty_corpus_and_folder_without_text(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("")
    code, err = run_cli(
        capsys,
        "train",
        "--out",
        str(tmp_path / "r1"),
        "--quiet",
        "--corpus",
        str(tmp_path / "empty"),
    )
    assert_one_line_error(code, err, "is empty")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "a.dat").write_bytes(b"\x00")
    code, err = run_cli(
        capsys, "train", "--out", str(tmp_path / "r2"), "--quiet", "--corpus", str(tmp_path / "bin")
    )
    assert_one_line_error(code, err, "no text files")
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_resume_without_checkpoint(capsys, tiny_run):
    code, err = run_cli(capsys, "train", "--out", str(tiny_run), "--resume", "--quiet")
    assert_one_line_error(code, err, "no checkpoint")


def test_sample_errors(capsys, tmp_path, tiny_run):
    code, err = run_cli(capsys, "sample", str(tmp_path / "missing"))
    assert_one_line_error(code, err, "does not exist")
    code, err = run_cli(capsys, "sample", str(tiny_run), "--prompt", "x " * 100)
    assert_one_line_error(code, err, "shorten the prompt")
    cfg = json.loads((tiny_run / "config.json").read_text())
    cfg["format_version"] = 99
    (tiny_run / "config.json").write_text(json.dumps(cfg))
    code, err = run_cli(capsys, "sample", str(tiny_run))
    assert_one_line_error(code, err, "another version")


def test_corrupt_weights(capsys, tiny_run):
    data = (tiny_run / "model.safetensors").read_bytes()
    (tiny_run / "model.safetensors").write_bytes(data[:100])
    code, err = run_cli(capsys, "sample", str(tiny_run))
    assert_one_line_error(code, err, "corrupt")
    (tiny_run / "model.safetensors").write_bytes(b"\x80\x04pickle")
    code, err = run_cli(capsys, "sample", str(tiny_run))
    assert_one_line_error(code, err, "corrupt")


def test_sample_is_seeded(capsys, tiny_run):
    outs = []
    for _ in range(2):
        main(["sample", str(tiny_run), "--prompt", "def", "--tokens", "8", "--seed", "3"])
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("def")


def test_help_is_fast_and_lists_commands():
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, interp_toolkit.cli as c; print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == "False", "importing the CLI must not import torch"


@pytest.mark.parametrize("args", [["train", "--bogus"], ["heads"], ["bogus"]])
def test_usage_errors_are_one_line(capsys, args):
    code, err = run_cli(capsys, *args)
    assert_one_line_error(code, err, "--help")
    assert "Traceback" not in err


no_gpu = pytest.mark.skipif(
    torch.cuda.is_available() or resolve_device("auto").type != "cpu", reason="a GPU is present"
)


@no_gpu
@pytest.mark.parametrize(
    "args",
    [
        ["train", "--out", "{tmp}/new", "--quiet"],
        ["sample", "{run}"],
        ["heads", "{run}"],
        ["exam", "{run}"],
        ["circuits", "{run}", "--head", "0.0"],
        ["view", "{run}", "--prompt", "a b", "--out", "{tmp}/v.html"],
        ["report", "{run}", "--out", "{tmp}/r.html"],
        ["reproduce", "--out", "{tmp}/new"],
        ["sweep", "--out", "{tmp}/new", "--over", "n_ctx", "--values", "8"],
        ["probe", "{run}", "--feature", "prev_token"],
        ["neurons", "{run}", "--layer", "0"],
    ],
)
def test_an_absent_gpu_is_one_line_on_every_model_command(capsys, tmp_path, tiny_run, args):
    before = sorted(tmp_path.rglob("*"))
    argv = [a.format(tmp=tmp_path, run=tiny_run) for a in args]
    code, err = run_cli(capsys, *argv, "--device", "cuda")
    assert_one_line_error(code, err, "--device cuda: no CUDA GPU is visible")
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_device_and_precision_names_are_checked(capsys, tmp_path):
    out = tmp_path / "run"
    code, err = run_cli(capsys, "train", "--out", str(out), "--quiet", "--device", "gpu")
    assert_one_line_error(code, err, "--device gpu: not a device name")
    code, err = run_cli(capsys, "train", "--out", str(out), "--quiet", "--precision", "fp8")
    assert_one_line_error(code, err, "--precision fp8: unknown: use fp32, tf32, bf16")
    assert not out.exists()
