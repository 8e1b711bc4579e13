"""Property: for any command line, ``interp-toolkit`` exits 0 or 2 and prints no traceback.

Command lines are drawn (hypothesis) from the real commands and options plus tricky values:
numbers out of range, NaN and 1e23, empty strings, an emoji, paths that are missing, files, folders
or a real (tiny) run. Draws are derandomized with a fixed budget (the ``ci`` profile of
tests/conftest.py): every run tries the same command lines.

- ``train`` command lines train for real, on a tiny recipe (the cpu preset shrunk to d_model 16,
  3 steps, a 4 kB corpus): exit 0 leaves a finished run, exit 2 leaves the folder as it was.
- ``reproduce`` and ``sweep`` run for real up to their first training, which is stubbed (a study
  trains many models; tests/integration/test_study_runs.py runs them whole).

The fast tier draws a few dozen; ``-m slow`` draws many more."""

import contextlib
import io
import itertools
import os
from concurrent.futures import Future
from pathlib import Path

import pytest
import typer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interp_toolkit.cli import app, main
from interp_toolkit.errors import UserError

COMMANDS = {
    name: sorted({o for p in c.params for o in p.opts if o.startswith("-")})
    for name, c in typer.main.get_command(app).commands.items()
}
TRAIN_FLAGS = {
    o for p in typer.main.get_command(app).commands["train"].params if p.is_flag for o in p.opts
}
VALUES = ["0", "1", "2", "-1", "7", "1.5", "1e23", "nan", "-inf", "", "abc", "1.0", "0.3", "😀"]
PLACES = ["RUN", "MISSING", "FILE", "DIR", "NEW/out.json", "gpt2"]


@st.composite
def command_lines(draw):
    cmd = draw(st.sampled_from([*COMMANDS, "bogus"]))
    options = COMMANDS.get(cmd, []) + ["--help", "--bogus"]
    token = st.one_of(st.sampled_from(options), st.sampled_from(VALUES + PLACES))
    return [cmd, *draw(st.lists(token, max_size=6))]


@st.composite
def train_lines(draw):
    """``train --out OUT`` and options each with a value (or alone, for a flag): OUT a new folder,
    an existing file or folder, or a missing one; values small whole numbers more often than not,
    so that many draws get as far as training."""
    out = draw(st.sampled_from(["NEWRUN", "NEWRUN", "NEWRUN", "FILE", "DIR", "NEW/out.json"]))
    options = [o for o in COMMANDS["train"] if o != "--out"]
    value = st.one_of(st.sampled_from(["1", "2", "3", "7", "16"]), st.sampled_from(VALUES + PLACES))
    argv = ["train", "--out", out]
    for option in draw(st.lists(st.sampled_from(options), max_size=4, unique=True)):
        argv += [option] if option in TRAIN_FLAGS else [option, draw(value)]
    return argv


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    from interp_toolkit.models.build import ModelConfig, build_model
    from interp_toolkit.runs.folder import save_run
    from interp_toolkit.text.codecs import EOT_ID, CompactVocab

    root = tmp_path_factory.mktemp("fuzz")
    codec = CompactVocab([EOT_ID, *range(1, 15)])
    cfg = ModelConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=16)
    save_run(root / "run", build_model(cfg), codec, cfg)
    (root / "file.txt").write_text("some text\n")
    (root / "dir").mkdir()
    return root, {
        "RUN": str(root / "run"),
        "MISSING": str(root / "missing"),
        "FILE": str(root / "file.txt"),
        "DIR": str(root / "dir"),
        "NEW/out.json": str(root / "new" / "out.json"),
    }


class InlinePool:
    """A process pool that runs its jobs here, in this process, so the training stub applies to
    them too (a real pool's spawned workers would import the real ``train_model`` and train)."""

    def __init__(self, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args):
        future = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # the job's error, raised by .result() as a pool would
            future.set_exception(exc)
        return future

    def shutdown(self, **kwargs):
        pass


def _run(argv, cwd):
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code or 0
    finally:
        os.chdir(here)
    return code, out.getvalue() + err.getvalue()


def _check(argv, where):
    def no_training(*args, **kwargs):
        raise UserError("(test) training is stubbed here")

    root, names = where
    argv = [names.get(a, a) for a in argv]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("interp_toolkit.training.train_model", no_training)
        mp.setattr("interp_toolkit.study.folder.train_model", no_training)
        mp.setattr("interp_toolkit.study.jobs.ProcessPoolExecutor", InlinePool)
        code, text = _run(argv, root / "dir")
    assert code in (0, 2), f"{argv}: exit {code}\n{text}"
    assert "Traceback" not in text, f"{argv}\n{text}"


@given(argv=command_lines())
def test_any_command_line_exits_0_or_2_without_traceback(places, argv):
    _check(argv, places)


@pytest.mark.slow
@settings(max_examples=400)
@given(argv=command_lines())
def test_any_command_line_many_more(places, argv):
    _check(argv, places)


# ---------------------------------------------------------------------------- real training

CORPUS = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n" for i in range(120))


@pytest.fixture(scope="module")
def tiny_recipe(tmp_path_factory, places):
    """The cpu preset shrunk so that any drawn train command line trains in seconds."""
    from interp_toolkit.training import presets

    root = tmp_path_factory.mktemp("train-fuzz")
    corpus = root / "corpus.txt"
    corpus.write_text(CORPUS)
    real = presets.get_preset

    def tiny(name, n_layers, *, mlp=False):
        p = real(name, n_layers, mlp=mlp)
        small = dict(d_model=16, n_heads=2, d_head=8, n_ctx=16, steps=3, batch_size=4)
        small |= dict(log_every=1, score_every=2, checkpoint_every=2, threads=1)
        small |= dict(corpus=str(corpus), vocab_size=64)
        if mlp:
            small["d_mlp"] = 64
        return presets.with_overrides(p, **small)

    return root, tiny


_examples = itertools.count()


def _sandbox(root: Path) -> tuple[Path, dict[str, str]]:
    """A fresh folder per example: what --out may name is new each time."""
    box = root / f"example-{next(_examples)}"
    (box / "dir").mkdir(parents=True)
    (box / "file.txt").write_text("some text\n")
    return box, {
        "NEWRUN": str(box / "newrun"),
        "FILE": str(box / "file.txt"),
        "DIR": str(box / "dir"),
        "NEW/out.json": str(box / "new" / "out.json"),
    }


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@settings(max_examples=12)
@example(argv=["train", "--out", "NEWRUN"])  # the tiny recipe as is: trains
@example(argv=["train", "--out", "NEWRUN", "--seed", "-1"])  # refused before the folder
@given(argv=train_lines())
def test_train_command_lines_train_or_change_nothing(places, tiny_recipe, monkeypatch, argv):
    """Exit 0 leaves a finished run in --out; exit 2 leaves every file as it was (nothing
    half-written: no run folder, no config.json without weights)."""
    root, tiny = tiny_recipe
    box, names = _sandbox(root)
    names |= {"RUN": places[1]["RUN"]}
    argv = [names.get(a, a) for a in argv]
    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(root / "cache"))
    monkeypatch.setattr("interp_toolkit.training.presets.get_preset", tiny)
    before = _listing(box)
    code, text = _run(argv, box / "dir")
    assert code in (0, 2), f"{argv}: exit {code}\n{text}"
    assert "Traceback" not in text, f"{argv}\n{text}"
    out = Path(argv[2])
    if code == 0:
        assert (out / "model.safetensors").is_file() and (out / "config.json").is_file(), argv
    else:
        assert _listing(box) == before, f"{argv} wrote files before refusing:\n{text}"
        assert not (box / "newrun").exists(), argv
