"""A run's own files are read back checked (issue 47): stages.json, metrics.jsonl and
samples.json against a schema, ranges and the run they belong to; vocab.json, the weights and the
corpus against the digests config.json records at training; anything that is not a plain file
named for what it is. Each case is one line (exit 2), or a damaged metrics line named and
skipped, never an answer read from another run's or a damaged file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli

from interp_toolkit import train

STAGES = ["--draws", "3", "--burn-in", "1", "--rows", "4", "--batches", "2", "--nbeta", "1",
          "--step-size", "0.001"]  # fmt: skip


def _train(folder: Path, text: str, seed: int) -> Path:
    corpus = folder / f"corpus-{seed}.txt"
    corpus.write_text(text * 200)
    out = folder / f"run-{seed}"
    train(out, layers=1, steps=8, d_model=32, d_head=8, n_ctx=16, vocab_size=32, batch_size=4,
          corpus=str(corpus), quiet=True, seed=seed, log_every=1, score_every=4)  # fmt: skip
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny trained runs (other seeds, other corpora: other vocabularies), each with its
    stages.json (a few SGLD draws) and samples.json."""
    from interp_toolkit.cli import main
    from interp_toolkit.runs.folder import save_samples

    folder = tmp_path_factory.mktemp("records")
    made = []
    for seed, text in ((0, " the cat sat on the mat. the dog ran after the cat.\n"),
                       (1, "def f(x):\n    return x + 1\nprint(f(2))\n")):  # fmt: skip
        run = _train(folder, text, seed)
        with pytest.raises(SystemExit) as exc:
            main(["stages", str(run), *STAGES, "--json", str(folder / f"s{seed}.json")])
            raise SystemExit(0)
        assert not exc.value.code
        save_samples(run, [{"prompt": " the", "text": " cat"}])
        made.append(run)
    return made


@pytest.fixture
def run_a(runs, tmp_path):
    """A copy of the first run (each test may damage its own)."""
    return Path(shutil.copytree(runs[0], tmp_path / "a"))


def _one_line(capsys, *args, match: str, code: int = 2) -> str:
    return run_cli(capsys, *args).one_line_error(match, code)


@pytest.mark.parametrize(
    "name, command, match",
    [
        ("stages.json", ["stages", "{a}", "--reuse"], "belongs to another run"),
        ("metrics.jsonl", ["report", "{a}", "--out", "{tmp}/r.html"], "belongs to another run"),
        ("samples.json", ["report", "{a}", "--out", "{tmp}/r.html"], "belongs to another run"),
        ("vocab.json", ["sample", "{a}", "--tokens", "3"], "is not the file"),
        ("model.safetensors", ["sample", "{a}", "--tokens", "3"], "is not the file"),
    ],
)
def test_another_runs_file_copied_in_is_refused(
    runs, run_a, tmp_path, capsys, name, command, match
):
    """Another run's stages.json was reported as this run's ("a42: LLC at 4 kept
    checkpoints"), its metrics drawn by `report`, its vocab.json decoded this model's ids
    ("def mainspecviron|self...")."""
    shutil.copy(runs[1] / name, run_a / name)
    argv = [a.format(a=run_a, tmp=tmp_path) for a in command]
    err = _one_line(capsys, *argv, match=match)
    assert name in err and any(w in err for w in ("again", "restore", "retrain", "rewrite")), err
    assert not (tmp_path / "r.html").exists()


def _mutate(change):
    def apply(data):
        change(data)
        return data

    return apply


def _checkpoint(i, **fields):
    return _mutate(lambda d: d["checkpoints"][i].update(fields))


@pytest.mark.parametrize(
    "change, match",
    [
        (_checkpoint(1, llc=1e308), "checkpoints[1].llc is 1e+308"),
        (
            _mutate(lambda d: d["checkpoints"].insert(1, d["checkpoints"][0])),
            "repeats or goes back",
        ),
        (_checkpoint(0, step=1.9), "checkpoints[0].step is 1.9, not a whole number"),
        (_mutate(lambda d: d.update(checkpoints=[])), "checkpoints is [], not a list of 3"),
        (_checkpoint(0, step=0), "checkpoints[0].step is 0, not a whole number from 1"),
        (_checkpoint(0, step=-5), "checkpoints[0].step is -5"),
        (_mutate(lambda d: d.clear()), "the file has no 'run'"),
        (_mutate(lambda d: d.update(stages=None)), "stages is None"),
        (_mutate(lambda d: d["stages"][0].pop("llc")), "stages[0] has no 'llc'"),  # report reads it
    ],
    ids=[
        "llc-1e308",
        "duplicated",
        "step-1.9",
        "empty",
        "step-0",
        "step-neg",
        "{}",
        "null",
        "stage",
    ],
)
def test_damaged_stages_are_one_line_naming_the_file_and_the_fix(run_a, capsys, change, match):
    """Each used to be a wrong number printed (LLC "rises 0.0317 -> 1e+308", boundaries at
    duplicated checkpoints, step 1.9 read as 1) or an internal-bug report (`stages --reuse`,
    `report`, `reproduce`)."""
    file = run_a / "stages.json"
    file.write_text(json.dumps(change(json.loads(file.read_text()))))
    err = _one_line(capsys, "stages", run_a, "--reuse", match=match)
    assert "stages.json is damaged" in err and "again (without --reuse)" in err


def test_a_damaged_stages_json_is_one_line_in_report(run_a, tmp_path, capsys):
    file = run_a / "stages.json"
    file.write_text(json.dumps(_checkpoint(0, step=0)(json.loads(file.read_text()))))
    _one_line(capsys, "report", run_a, "--out", tmp_path / "r.html", match="stages.json is damaged")
    assert not (tmp_path / "r.html").exists()


def test_metrics_rows_that_do_not_fit_the_run_are_named_and_skipped(run_a, tmp_path, capsys):
    """A scored row without `prev_token` was a KeyError in `report`; a 2-layer grid in a 1-layer
    run's metrics gave "induction phase change at step 40"."""
    from interp_toolkit.runs.folder import metrics_damage, read_metrics

    file = run_a / "metrics.jsonl"
    rows = [json.loads(line) for line in file.read_text().splitlines()]
    scored = [i for i, r in enumerate(rows) if "induction" in r]
    del rows[scored[0]]["prev_token"]
    rows[scored[-1]]["induction"] = [[0.9] * 4, [0.9] * 4]  # two layers: the run has one
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    damage = metrics_damage(run_a)
    assert "2 of its" in damage and "has head scores but no 'prev_token' grid" in damage
    assert len(read_metrics(run_a)) == len(rows) - 2
    result = run_cli(capsys, "report", run_a, "--out", tmp_path / "r.html", "--device", "cpu")
    assert result.code == 0 and result.err.strip() == f"warning: {damage}"
    # the 2-layer grid alone, seen by the rows' checker
    rows[scored[0]]["prev_token"] = rows[scored[0]]["induction"]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "is 2 layers x 4 heads; the run has 1 x 4" in metrics_damage(run_a)


def test_a_samples_json_that_is_not_utf8_is_one_line(run_a, tmp_path, capsys):
    (run_a / "samples.json").write_bytes(b'[{"prompt": "\xff"}]')
    err = _one_line(capsys, "report", run_a, "--out", tmp_path / "r.html", match="not UTF-8")
    assert "samples.json" in err


def test_an_edited_corpus_is_not_called_the_runs_own_training_stream(run_a, capsys):
    """After the corpus was edited, `stages` read other batches and still called them "the run's
    own training stream"."""
    corpus = Path(json.loads((run_a / "config.json").read_text())["settings"]["data"]["corpus"])
    saved = corpus.read_text()
    try:
        corpus.write_text(saved.replace("cat", "cow"))
        _one_line(capsys, "stages", run_a, *STAGES, match="has changed since")
    finally:
        corpus.write_text(saved)


def test_stages_says_when_metrics_are_missing(run_a, capsys):
    """With metrics.jsonl missing, stages said "no logged measure moved"."""
    (run_a / "metrics.jsonl").unlink()
    result = run_cli(capsys, "stages", run_a, "--reuse")
    assert result.code == 0 and "metrics.jsonl is missing" in result.err


def test_max_step_below_three_kept_checkpoints_says_how_many_the_run_kept(run_a, capsys):
    """`--max-step 2` said "kept 0 checkpoints ... train it again" of a run that kept 8."""
    err = _one_line(capsys, "stages", run_a, "--max-step", "2", match="--max-step 2 leaves 2 of")
    assert "use --max-step 3 or more" in err


@pytest.mark.parametrize(
    "field, value", [("batch_size", 0), ("seed", -1)], ids=["batch_size-0", "seed-neg"]
)
def test_an_edited_config_value_is_a_damaged_config(run_a, capsys, field, value):
    """`batch_size: 0` was a ZeroDivisionError in `stages`, `train.seed: -1` an internal bug."""
    config = json.loads((run_a / "config.json").read_text())
    config["settings"]["train"][field] = value
    (run_a / "config.json").write_text(json.dumps(config))
    _one_line(capsys, "stages", run_a, *STAGES, match=f"is damaged ({field}={value}")


def test_a_format_version_in_quotes_is_named(run_a, capsys):
    """`format_version: "1"` said "(format '1', this one reads 1)"."""
    config = json.loads((run_a / "config.json").read_text())
    (run_a / "config.json").write_text(json.dumps(config | {"format_version": "1"}))
    _one_line(capsys, "sample", run_a, match="\"format_version\" is '1', not the number 1")


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda p: (p.unlink(), p.mkdir()), "is a folder, not a file"),
        (_fifo, "is a FIFO, not a file"),
        (lambda p: (p.unlink(), p.symlink_to("/dev/zero")), "(a character device), not a file"),
        (lambda p: (p.unlink(), p.symlink_to(p.parent / "gone")), "which does not exist"),
    ],
    ids=["folder", "fifo", "dev-zero", "dangling"],
)
def test_weights_that_are_not_a_file_are_named_for_what_they_are(run_a, capsys, make, what):
    """They were all "missing", with `train --resume` advice (which then hung on the FIFO)."""
    make(run_a / "model.safetensors")
    _one_line(capsys, "sample", run_a, "--tokens", "2", match=what)
    err = _one_line(
        capsys, "train", "--resume", "--out", run_a, "--quiet", match="model.safetensors"
    )
    assert "missing" not in err or "does not exist" in err


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda s: (s / "step_3.safetensors").rename(s / "step_03.safetensors"), "never writes"),
        (
            lambda s: ((s / "step_3.safetensors").unlink(), (s / "step_3.safetensors").mkdir()),
            "is a folder",
        ),  # fmt: skip
        (
            lambda s: (
                (s / "step_3.safetensors").unlink(),
                (s / "step_3.safetensors").symlink_to(s / "gone"),
            ),
            "does not exist",
        ),  # fmt: skip
    ],
    ids=["step_03", "folder", "dangling"],
)
def test_a_snapshot_that_is_not_one_is_named(run_a, capsys, make, what):
    make(run_a / "snapshots")
    err = _one_line(capsys, "heads", f"{run_a}@3", "--n-seqs", "4", match=what)
    assert "snapshots" in err and "rename or remove it" in err


def test_stages_waits_for_no_one_and_a_training_in_the_run_is_named(run_a, capsys):
    """`stages` while `train --restart` rewrote the run was a FileNotFoundError for a snapshot:
    each holds the run folder, so the second is refused naming the first."""
    from interp_toolkit.files.io import folder_lock

    with folder_lock(run_a, "run folder"):
        _one_line(capsys, "stages", run_a, "--reuse", match="is in use by another process")


def test_restart_discards_a_run_that_holds_saes(run_a, capsys):
    """`train --restart` after `sae RUN` said "not a run folder (holds saes)"."""
    (run_a / "saes" / "blocks.0.attn.hook_z-topk-x2-k4").mkdir(parents=True)
    corpus = json.loads((run_a / "config.json").read_text())["settings"]["data"]["corpus"]
    args = ["train", "--restart", "--out", run_a, "--layers", "1", "--steps", "2", "--quiet",
            "--corpus", corpus, "--d-model", "32", "--n-ctx", "16"]  # fmt: skip
    result = run_cli(capsys, *args)
    assert result.code == 0, result.err
    assert "discarding" in result.err and not (run_a / "saes").exists()


def test_a_corpus_that_is_gone_is_said_as_itself_in_report(run_a, tmp_path, capsys):
    """With the run's corpus deleted, the report said "Not measured: the run's corpus has no
    held-out window"."""
    corpus = Path(json.loads((run_a / "config.json").read_text())["settings"]["data"]["corpus"])
    moved = corpus.rename(corpus.with_suffix(".away"))
    try:
        err = _one_line(capsys, "report", run_a, "--out", tmp_path / "r.html", match="corpus")
        assert "existing path" in err and "held-out window" not in err
    finally:
        moved.rename(corpus)
