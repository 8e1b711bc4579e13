"""Bad input to the core commands: one line naming the problem and the fix, exit code 2, nothing
written. Every option is checked at the boundary against the range it needs (the option table of
``interp_toolkit.cli.boundary``), before any file is touched; an option given twice is refused."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import typer
from cli_helpers import run_cli

from interp_toolkit.cli import app
from interp_toolkit.models.build import build_model
from interp_toolkit.runs.folder import save_run
from interp_toolkit.runtime.devices import resolve_device
from interp_toolkit.text.codecs import EOT_ID, CompactVocab


@pytest.fixture
def tiny_run(tmp_path, tiny_cfg):
    codec = CompactVocab([EOT_ID, *range(1, tiny_cfg.d_vocab - 1)])
    cfg = tiny_cfg.replace(d_vocab=codec.d_vocab)
    return save_run(tmp_path / "run", build_model(cfg), codec, cfg)


@pytest.mark.parametrize(
    "args, match",
    [
        (["--preset", "gpu"], "unknown preset 'gpu'"),
        (["--layers", "0"], "--layers 0 cannot work"),
        (["--n-ctx", "2"], "n_ctx=2 cannot work"),
        (["--d-model", "130"], "d_model=130 cannot work with 4 heads"),
        (["--corpus", "/no/such/corpus"], "existing path"),
        (["--corpus", "hf:Skylion007/openwebtext"], "offline"),
    ],
)
def test_train_bad_input(capsys, tmp_path, monkeypatch, args, match):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    run_cli(capsys, "train", "--out", str(out), "--quiet", *args).one_line_error(match)
    assert not out.exists()


def test_train_empty_corpus_and_folder_without_text(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_text("")
    train = ("train", "--quiet", "--corpus")
    run_cli(capsys, *train, tmp_path / "empty", "--out", tmp_path / "r1").one_line_error("is empty")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "a.dat").write_bytes(b"\x00")
    run_cli(capsys, *train, tmp_path / "bin", "--out", tmp_path / "r2").one_line_error(
        "no text files"
    )
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_a_corpus_of_binary_bytes_is_refused_and_a_binary_file_in_a_folder_skipped(
    capsys, tmp_path, monkeypatch
):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was built on a corpus that is not text")

    monkeypatch.setattr("interp_toolkit.training.trainer.build_model", no_model)
    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    noise = tmp_path / "noise.txt"  # a text suffix, random bytes inside
    noise.write_bytes(bytes(range(256)) * 64)
    run_cli(capsys, "train", "--quiet", "--corpus", noise, "--out", tmp_path / "r").one_line_error(
        "is not text (a NUL byte at offset 0"
    )
    assert not (tmp_path / "r").exists()
    from interp_toolkit.text.corpora import corpus_source, not_text

    utf8_noise = tmp_path / "latin.txt"  # no NUL, but mostly not UTF-8
    utf8_noise.write_bytes(bytes(range(128, 256)) * 64)
    assert "not UTF-8" in not_text(utf8_noise)
    assert not_text(Path(json.__file__)) is None  # real text passes
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.txt").write_text("words and more words\n")
    (folder / "b.txt").write_bytes(noise.read_bytes())
    _, docs = corpus_source(str(folder)).read()
    assert [d.name for d in docs] == ["a.txt"]
    assert "skipping" in capsys.readouterr().err


def test_resume_without_checkpoint(capsys, tiny_run):
    run_cli(capsys, "train", "--out", str(tiny_run), "--resume", "--quiet").one_line_error(
        "no checkpoint"
    )


def test_sample_errors(capsys, tmp_path, tiny_run):
    run_cli(capsys, "sample", str(tmp_path / "missing")).one_line_error("does not exist")
    run_cli(capsys, "sample", str(tiny_run), "--prompt", "x " * 100).one_line_error(
        "shorten the prompt"
    )
    cfg = json.loads((tiny_run / "config.json").read_text())
    cfg["format_version"] = 99
    (tiny_run / "config.json").write_text(json.dumps(cfg))
    run_cli(capsys, "sample", str(tiny_run)).one_line_error("another version")


def test_corrupt_weights(capsys, tiny_run):
    data = (tiny_run / "model.safetensors").read_bytes()
    (tiny_run / "model.safetensors").write_bytes(data[:100])
    run_cli(capsys, "sample", str(tiny_run)).one_line_error("corrupt")
    (tiny_run / "model.safetensors").write_bytes(b"\x80\x04pickle")
    run_cli(capsys, "sample", str(tiny_run)).one_line_error("corrupt")


def test_sampling_is_lazy_and_streamed(capsys, tiny_run, monkeypatch):
    """``sample_ids`` runs the model once per id taken (a huge --tokens starts at once), and the
    command prints each piece as it comes: Ctrl-C after 3 tokens keeps their text, exit 130."""
    from interp_toolkit.models import sampling
    from interp_toolkit.runs.folder import load_run

    run = load_run(tiny_run)
    calls = []
    run.model.register_forward_hook(lambda *a: calls.append(1))
    ids = sampling.sample_ids(run.model, run.codec, "ab", n_tokens=10**18, seed=1)
    first = [next(ids) for _ in range(3)]
    assert len(calls) == 3
    whole = sampling.sample(run.model, run.codec, "ab", n_tokens=3, seed=1)
    assert whole == "ab" + run.codec.decode(first)

    real = sampling._draws

    def three_then_ctrl_c(*args):
        gen = real(*args)
        for _ in range(3):
            yield next(gen)
        raise KeyboardInterrupt

    monkeypatch.setattr(sampling, "_draws", three_then_ctrl_c)
    code, out, err = run_cli(
        capsys, "sample", tiny_run, "--prompt", "ab", "--seed", "1", "--tokens", "1000000"
    )
    assert code == 130 and out == whole + "\n"
    warned, stopped = err.strip().splitlines()  # "ab" is <unk> to the tiny vocabulary: said
    assert warned.startswith("warning: 100% of the prompt's tokens are <unk> to this model")
    assert stopped == "interrupted: stopped after 3 of 1000000 tokens (the text so far is above)."


def test_sample_is_seeded(capsys, tiny_run):
    outs = [
        run_cli(capsys, "sample", tiny_run, "--prompt", "def", "--tokens", "8", "--seed", "3").out
        for _ in range(2)
    ]
    assert outs[0] == outs[1] and outs[0].startswith("def")


HELP = """
import sys
from interp_toolkit.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print("LOADED", *sorted(m for m in ("torch", "transformer_lens") if m in sys.modules))
"""


def test_help_lists_every_command_and_loads_no_model_library():
    """``interp-toolkit --help`` in a fresh process lists every registered command with the
    first line of its help, and loads neither torch nor TransformerLens (what keeps it fast: a
    stopwatch under load would prove nothing)."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-c", HELP], capture_output=True, text=True, check=True, env=env
    )
    assert proc.stdout.rstrip().splitlines()[-1] == "LOADED", proc.stdout[-300:]
    commands = {n: c for n, c in typer.main.get_command(app).commands.items() if not c.hidden}
    panel = proc.stdout.split("Commands")[1]
    listed = re.findall(r"^│ (\S+) {2,}(.*?)\s*│$", panel, flags=re.M)
    assert [name for name, _ in listed] == list(commands)
    for name, text in listed:
        first = commands[name].help.split("\n")[0].strip()
        assert first.startswith(text.strip()), (name, text, first)


@pytest.mark.parametrize("args", [["train", "--bogus"], ["heads"], ["bogus"]])
def test_usage_errors_are_one_line(capsys, args):
    run_cli(capsys, *args).one_line_error("--help")


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
        ["copying", "{run}", "--head", "0.0"],
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
    run_cli(capsys, *argv, "--device", "cuda").one_line_error(
        "--device cuda: no CUDA GPU is visible"
    )
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_device_and_precision_names_are_checked(capsys, tmp_path):
    out = tmp_path / "run"
    run_cli(capsys, "train", "--out", str(out), "--quiet", "--device", "gpu").one_line_error(
        "--device gpu: not a device name"
    )
    run_cli(capsys, "train", "--out", str(out), "--quiet", "--precision", "fp8").one_line_error(
        "--precision fp8: unknown: use fp32, tf32, bf16"
    )
    assert not out.exists()


# ---------------------------------------------------------------------------- option ranges

BAD_OPTIONS = [
    (["train", "--out", "{tmp}/new", "--seed", "-5"], "--seed=-5 cannot work"),
    (["train", "--out", "{tmp}/new", "--seed", str(2**70)], "a seed is a whole number from 0"),
    (["train", "--out", "{tmp}/new", "--steps", "-3"], "--steps=-3 cannot work"),
    (["exam", "{run}", "--periods", "--seed", "-1"], "--seed=-1 cannot work"),
    (["heads", "{run}", "--seed", str(2**63)], "--seed=9223372036854775808"),
    (["heads", "{run}", "--n-seqs", "0"], "--n-seqs=0 cannot work"),
    (["heads", "{run}", "--period", "1"], "--period=1 cannot work"),
    (["sample", "{run}", "--temperature", "nan"], "--temperature=nan cannot work"),
    (["sample", "{run}", "--temperature", "inf"], "--temperature=inf cannot work"),
    (["sample", "{run}", "--temperature", "1e309"], "--temperature=inf cannot work"),
    (["sample", "{run}", "--temperature", "-1"], "--temperature=-1.0 cannot work"),
    (["sample", "{run}", "--tokens", "-1"], "--tokens=-1 cannot work"),
    (["sample", "{run}", "--top-k", "0"], "--top-k=0 cannot work"),
    (["probe", "{run}", "--feature", "token", "--seq-len", "0"], "--seq-len=0 cannot work"),
    (
        ["probe", "{run}", "--feature", "token", "--n-seqs", "1"],
        "--n-seqs=1 cannot work: use a whole number, 2",
    ),
    (["neurons", "{run}", "--layer", "-1"], "--layer=-1 cannot work"),
    (["view", "{run}", "-p", "a", "-o", "{tmp}/v.html", "--head", "-2"], "--head=-2"),
    (["reproduce", "--out", "{tmp}/new", "--workers", "0"], "--workers=0 cannot work"),
    (
        ["exam", "{run}", "--json", "{tmp}/a.json", "--json", "{tmp}/b.json"],
        "--json is given twice",
    ),
    (["exam", "{run}", "--json={tmp}/a.json", "--json", "{tmp}/b.json"], "--json is given twice"),
    (["view", "{run}", "-p", "a", "-p", "b", "-o", "{tmp}/v.html"], "-p is given twice"),
    (["train", "--out", "{tmp}/new", "--quiet", "--quiet"], "--quiet is given twice"),
    (
        ["heads", "{run}", "--json", "-", "--csv", "-"],
        "--json and --csv both write to standard output",
    ),
    (
        ["probe", "{run}", "--feature", "token", "--json", "{tmp}/x", "--csv", "{tmp}/x"],
        "both write to",
    ),
    (["exam", "{run}", "--json", "{tmp}/" + "x" * 300], "the path is too long"),
    (["exam", "{run}", "--json", "{tmp}/loop"], "symlink loop"),
    (["exam", "{run}", "--json", "{tmp}"], "is a folder"),
    (["exam", "{run}", "--json", "{tmp}/f.txt/x.json"], "is a file, not a folder"),
    # issue 47: the options added since went around the rules
    (["stages", "{run}", "--reuse", "--bandwidth", "1e-200"], "--bandwidth=1e-200 cannot work"),
    (["stages", "{run}", "--max-step", "0"], "--max-step=0 cannot work"),
    (["stages", "{run}", "--max-step", "-1"], "--max-step=-1 cannot work"),
    (["stages", "{run}", "--step-size", "1e-320"], "no SGLD step moves a weight"),
    (["stages", "{run}@5"], "give the run folder"),
    (["heads", "{run}", "--n-untrained", str(10**12)], "one more model drawn and scored"),
    (["reproduce", "--out", "{tmp}/new", "--seeds", str(10**13)], "each seed is a whole study"),
    (
        ["reproduce", "--out", "{tmp}/new", "--seeds", "2", "--seed", str(2**63 - 1)],
        "would need seeds up to 9223372036854775808",
    ),
]


@pytest.mark.parametrize(
    "args, match", BAD_OPTIONS, ids=[" ".join(a[:1] + a[2:4]) for a, _ in BAD_OPTIONS]
)
def test_bad_options_are_one_line_before_any_work(
    capsys, tmp_path, tiny_run, monkeypatch, args, match
):
    """Each is refused before the model or the corpus is read (both are made to fail loudly),
    and leaves the folder exactly as it was."""
    (tmp_path / "f.txt").write_text("mine")
    os.symlink(tmp_path / "loop2", tmp_path / "loop")
    os.symlink(tmp_path / "loop", tmp_path / "loop2")

    def no_work(*a, **k):
        raise AssertionError("work started before the options were checked")

    # first: patching it imports study.reproduce, whose imports would keep a patched load_run
    monkeypatch.setattr("interp_toolkit.study.reproduce.reproduce", no_work)
    monkeypatch.setattr("interp_toolkit.runs.targets.load_target", no_work)
    monkeypatch.setattr("interp_toolkit.runs.folder.load_run", no_work)
    monkeypatch.setattr("interp_toolkit.training.train_model", no_work)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [a.format(tmp=tmp_path, run=tiny_run) for a in args]
    run_cli(capsys, *argv).one_line_error(match)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not Path("-").exists()


def test_an_option_value_that_looks_like_an_option_is_not_a_repeat(capsys, tiny_run, tmp_path):
    out = tmp_path / "e.json"
    result = run_cli(capsys, "exam", tiny_run, "--prompt", "--json", "--target", "x", "--json", out)
    assert "given twice" not in result.err


# ---------------------------------------------------------------------------- output paths


def test_json_to_devices_fifos_and_symlinks(capsys, tmp_path, tiny_run):
    """``--json /dev/full`` exits 1 naming the device, ``/dev/null`` takes the JSON; both stay
    character devices; a FIFO receives the JSON and stays a FIFO; a symlink writes its target."""
    import stat
    import threading

    cmd = ("copying", tiny_run, "--head", "0.0", "--json")
    run_cli(capsys, *cmd, "/dev/full").one_line_error("/dev/full is full", code=1)
    assert run_cli(capsys, *cmd, "/dev/null").code == 0
    for dev in ("/dev/full", "/dev/null"):
        assert stat.S_ISCHR(os.stat(dev).st_mode), dev
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    result = run_cli(capsys, *cmd, fifo)
    reader.join(timeout=120)
    assert result.code == 0, result.err
    assert json.loads(got[0])["head"] == "0.0" and stat.S_ISFIFO(os.stat(fifo).st_mode)
    (tmp_path / "keep.json").write_text("old")
    (tmp_path / "link.json").symlink_to("keep.json")
    assert run_cli(capsys, *cmd, tmp_path / "link.json").code == 0
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "keep.json").read_text())["head"] == "0.0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "keep.json", "link.json", "run"]


def test_csv_dash_is_csv_alone_on_stdout(capsys, tiny_run, tmp_path):
    result = run_cli(
        capsys,
        "heads",
        tiny_run,
        "--n-seqs",
        "4",
        "--n-untrained",
        "2",
        "--csv",
        "-",
        "--json",
        tmp_path / "h.json",
    )
    assert result.code == 0, result.err
    assert result.out.splitlines()[0].startswith("head,layer,index,role")
    assert f"wrote {tmp_path / 'h.json'}" in result.err and not Path("-").exists()


def test_a_corpus_that_is_a_fifo_is_named_as_one(capsys, tmp_path):
    """`train --corpus FIFO` said "holds no text files" (a FIFO read as a folder)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    err = run_cli(capsys, "train", "--quiet", "--corpus", fifo, "--out", tmp_path / "r")
    assert "is a FIFO" in err.one_line_error("corpus") and not (tmp_path / "r").exists()


def test_run_at_a_step_in_other_digits_is_one_line(capsys, tiny_run):
    """`heads RUN@²` was an int() error (an internal-bug report): '²' is a digit to str.isdigit."""
    run_cli(capsys, "heads", f"{tiny_run}@²").one_line_error("step '²' is not a whole number")


def test_training_records_the_runs_digests_and_machine(tmp_path):
    """config.json records the digests of vocab.json, the corpus's tokens and the weights (what
    the run's files are checked against) and the machine that trained it (issue 48 reads it)."""
    from interp_toolkit import train
    from interp_toolkit.files.io import file_digest

    corpus = tmp_path / "c.txt"
    corpus.write_text(" the cat sat on the mat.\n" * 200)
    out = tmp_path / "r"
    train(out, layers=1, steps=2, d_model=32, d_head=8, n_ctx=16, vocab_size=32, batch_size=4,
          corpus=str(corpus), quiet=True)  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    digests, machine = config["digests"], config["machine"]
    assert digests["vocab"] == file_digest(out / "vocab.json")
    assert digests["weights"] == file_digest(out / "model.safetensors")
    assert len(digests["corpus"]) == 16
    assert machine["cpu"] and machine["torch"].startswith("2.") and machine["threads"] >= 1
    assert set(machine) >= {"cpu_capability", "amx", "onednn_max_isa", "onednn", "uses_amx"}
