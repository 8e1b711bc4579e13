"""Property: for any command line, ``interp-toolkit`` exits 0 or 2 and prints no traceback.

Command lines are drawn (hypothesis) from the real commands and options plus tricky values:
numbers out of range, NaN and 1e23, empty strings, an emoji, paths that are missing, files, folders
or a real (tiny) run. Training is stubbed (it would start real work), everything before it runs.
The fast tier draws a few dozen; ``-m slow`` draws many more."""

import contextlib
import io
import os
from concurrent.futures import Future

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp_toolkit.cli import app, main
from interp_toolkit.errors import UserError

COMMANDS = {
    name: sorted({o for p in c.params for o in p.opts if o.startswith("-")})
    for name, c in typer.main.get_command(app).commands.items()
}
VALUES = ["0", "1", "2", "-1", "7", "1.5", "1e23", "nan", "-inf", "", "abc", "1.0", "0.3", "😀"]
PLACES = ["RUN", "MISSING", "FILE", "DIR", "NEW/out.json", "gpt2"]


@st.composite
def command_lines(draw):
    cmd = draw(st.sampled_from([*COMMANDS, "bogus"]))
    options = COMMANDS.get(cmd, []) + ["--help", "--bogus"]
    token = st.one_of(st.sampled_from(options), st.sampled_from(VALUES + PLACES))
    return [cmd, *draw(st.lists(token, max_size=6))]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    from interp_toolkit.models import AttnOnlyConfig, build_model
    from interp_toolkit.runs import save_run
    from interp_toolkit.tokenizer import EOT_ID, CompactVocab

    root = tmp_path_factory.mktemp("fuzz")
    codec = CompactVocab([EOT_ID, *range(1, 15)])
    cfg = AttnOnlyConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=16)
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


def _check(argv, where):
    def no_training(*args, **kwargs):
        raise UserError("(test) training is stubbed here")

    root, names = where
    argv = [names.get(a, a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("interp_toolkit.training.train_model", no_training)
        mp.setattr("interp_toolkit.study_folder.train_model", no_training)
        mp.setattr("interp_toolkit.study_folder.ProcessPoolExecutor", InlinePool)
        os.chdir(root / "dir")
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    main(argv)
                    code = 0
                except SystemExit as exc:
                    code = exc.code or 0
        finally:
            os.chdir(cwd)
    text = out.getvalue() + err.getvalue()
    assert code in (0, 2), f"{argv}: exit {code}\n{text}"
    assert "Traceback" not in text, f"{argv}\n{text}"


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(argv=command_lines())
def test_any_command_line_exits_0_or_2_without_traceback(places, argv):
    _check(argv, places)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(argv=command_lines())
def test_any_command_line_many_more(places, argv):
    _check(argv, places)
