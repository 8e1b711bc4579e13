"""No silent wrong answer, and the API raises UserError (issue 33): a model folder whose config
disagrees with its weights, NaN weights, non-finite or mistyped training settings, a prompt
longer than the context and mistyped API arguments are each one UserError line, never a model
analysed with random or NaN weights, a cut prompt or a bare TypeError."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _views_fixtures import make_tiny_run
from cli_helpers import run_cli

from interp_toolkit import UserError, load, scores_on, train, view
from interp_toolkit.runs import hf

ROOT = Path(__file__).resolve().parents[2]


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert msg and "\n" not in msg
    return msg


# ----------------------------------------------------------------------------- GPT-2 folders


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    """A 1-layer GPT-2-architecture folder (2 heads of 8, the full vocabulary), saved with
    transformers (the built-in BPE is used: no tokenizer files)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=50257)
    folder = tmp_path_factory.mktemp("gpt2") / "good"
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    return folder


def _variant(good: Path, dst: Path, config: dict | None = None, weights=None) -> Path:
    """A copy of ``good`` with config.json fields changed and/or its tensors rewritten."""
    from safetensors.torch import load_file, save_file

    dst.mkdir()
    cfg = json.loads((good / "config.json").read_text()) | (config or {})
    (dst / "config.json").write_text(json.dumps(cfg))
    state = load_file(good / "model.safetensors")
    save_file(weights(state) if weights else state, dst / "model.safetensors", {"format": "pt"})
    return dst


@pytest.mark.parametrize(
    "config, weights, needles",
    [
        # more layers than the weights hold: transformers drew layers 1-4 at random
        ({"n_layer": 5}, None, ["48 tensors config.json names are not in the weights"]),
        # a weights file without its attention: the heads would be random
        (None, lambda sd: {k: v for k, v in sd.items() if ".attn." not in k},
         ["4 tensors", "transformer.h.0.attn.c_attn.weight"]),
        # fewer layers than the weights hold: part of the model silently left out
        ({"n_layer": 1}, lambda sd: sd | {k.replace("h.0", "h.1"): v.clone() for k, v in sd.items()
                                         if ".h.0." in k}, ["tensors config.json does not name"]),
        ({"n_positions": 64}, None, ["transformer.wpe.weight is 32x16 there, 64x16 by config"]),
        ({"n_head": 0}, None, ["n_head=0 cannot work"]),  # was a ZeroDivisionError
        ({"n_head": 3}, None, ["n_embd=16 does not split into n_head=3"]),
    ],
)  # fmt: skip
def test_a_config_that_disagrees_with_the_weights_is_refused_before_booting(
    tiny_gpt2, tmp_path, no_boot_no_network, config, weights, needles
):
    folder = _variant(tiny_gpt2, tmp_path / "bad", config, weights)
    with pytest.raises(UserError) as exc:
        hf.load(folder)
    msg = _one_line(exc)
    assert all(n in msg for n in needles), msg
    if "tensors" in msg or "is 32x16" in msg:
        assert "do not match its config.json" in msg and "save_pretrained" in msg


def test_nan_weights_are_refused_at_load_naming_the_tensor(tiny_gpt2, tmp_path, capsys):
    """GPT-2 folders and run folders alike (``exam`` printed ``rank -1, p = nan``, ``heads`` nan
    scores, ``sample`` crashed in multinomial)."""
    nan = _variant(
        tiny_gpt2,
        tmp_path / "nan",
        weights=lambda sd: sd | {"transformer.h.0.ln_1.weight": torch.full((16,), math.nan)},
    )
    with pytest.raises(UserError) as exc:
        hf.load(nan)
    msg = _one_line(exc)
    assert "NaN or infinite weights (transformer.h.0.ln_1.weight)" in msg, msg

    from safetensors.torch import load_file, save_file

    run = make_tiny_run(tmp_path / "run")
    state = load_file(run / "model.safetensors")
    state["blocks.1.attn.k.weight"][0, 0] = math.inf
    save_file(state, run / "model.safetensors")
    with pytest.raises(UserError, match=r"NaN or infinite weights \(blocks\.1\.attn\.k\.weight\)"):
        load(run)
    for command in ("exam", "heads", "sample"):
        err = run_cli(capsys, command, run).one_line_error("blocks.1.attn.k.weight")
        assert "model.safetensors" in err


# ----------------------------------------------------------------------------- run folders


def test_a_run_config_value_of_the_wrong_type_is_a_damaged_file(tmp_path, capsys):
    """``"embed_init_std": "x"`` in config.json was an internal error (a bug report). The other
    wrong types are in :func:`test_api_arguments_of_the_wrong_type_are_the_clis_one_line`: the
    tests' runtime type checker answers first for them here."""
    run = make_tiny_run(tmp_path / "run")
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"]["seed"] = -1
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError) as exc:
        load(run)
    msg = _one_line(exc)
    assert "config.json is damaged" in msg and "seed=-1 cannot work" in msg, msg
    run_cli(capsys, "exam", run).one_line_error("seed=-1")


# ----------------------------------------------------------------------------- training


def _corpus(tmp_path: Path) -> str:
    path = tmp_path / "corpus.txt"
    path.write_text(" the cat sat on the mat. the dog ran after the cat.\n" * 200)
    return str(path)


def _tiny(tmp_path: Path, **changes) -> dict:
    return dict(
        layers=1, steps=8, d_model=32, d_head=8, n_ctx=16, vocab_size=32, batch_size=4,
        corpus=_corpus(tmp_path), quiet=True,
    ) | changes  # fmt: skip


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"lr": math.inf}, "lr=inf cannot work"),  # trained to all-NaN weights
        ({"lr": 1e38}, "lr=1e+38 cannot work"),  # Adam's first step overflowed: RuntimeError
        ({"max_grad_norm": math.nan}, "max_grad_norm=nan cannot work"),  # all-NaN weights
        ({"weight_decay": math.inf}, "weight_decay=inf cannot work"),
        ({"betas": (0.9, 1.0)}, "betas[1]=1.0 cannot work"),
        ({"repeat_fraction": math.nan}, "repeat-fraction nan is not a share"),  # TrainOptions
        ({"val_fraction": math.inf}, "val_fraction=inf cannot work"),
        ({"stop_score": math.nan}, "stop_score=nan cannot work"),
    ],
)
def test_training_refuses_non_finite_settings_before_any_folder(tmp_path, changes, match):
    out = tmp_path / "run"
    with pytest.raises(UserError) as exc:
        train(out, **_tiny(tmp_path, **changes))
    assert match in _one_line(exc)
    assert not out.exists()


def _inject_loss(monkeypatch, change) -> None:
    """Training reads ``change(step, loss)`` for the loss of each step instead of the loss (the
    weights train as they would): a divergence that happens the same way on every CPU, which
    a large learning rate does not (lr=1000 overflowed to NaN on an AMD EPYC, to a finite 1e17
    on an Intel AMX CPU)."""
    from interp_toolkit.training.steplog import StepLog

    real = StepLog.__call__
    monkeypatch.setattr(
        StepLog, "__call__", lambda self, step, loss, opt: real(self, step, change(step, loss), opt)
    )


def _stopped_run(tmp_path, **kw) -> tuple[str, Path]:
    from interp_toolkit.runs.folder import RunPaths, read_metrics, read_weights

    out = tmp_path / "run"
    with pytest.raises(UserError) as exc:
        train(out, **_tiny(tmp_path, log_every=1, checkpoint_every=3, snapshot_log=0, **kw))
    paths = RunPaths(out)
    assert not paths.weights.exists()  # no finished model
    assert all(math.isfinite(row["loss"]) for row in read_metrics(out))
    step = json.loads(paths.checkpoint_state.read_text())["step"]
    read_weights(paths.checkpoint_weights(step))  # finite (read_weights refuses NaNs)
    return _one_line(exc), paths


def test_a_loss_that_becomes_non_finite_stops_training_keeping_the_last_finite_checkpoint(
    tmp_path, monkeypatch
):
    """A NaN loss at step 3 (injected: lr=1000 gave NaN on one CPU and a finite 1e17 on
    another): training used to finish with NaN weights (a run every analysis reads as NaN)."""
    _inject_loss(monkeypatch, lambda step, loss: loss * math.nan if step >= 3 else loss)
    msg, paths = _stopped_run(tmp_path)
    assert "training diverged: the loss became NaN or infinite at step 3" in msg, msg
    assert "last checkpoint (step 1) is kept" in msg and "lower lr" in msg


def test_a_loss_that_diverges_to_a_finite_number_stops_training_keeping_the_last_good_checkpoint(
    tmp_path, monkeypatch
):
    """A loss that grows a million-fold from step 3 on and stays finite (what lr=1000 does on
    an Intel AMX CPU: 3.29 -> 5.9e14 -> 1.3e17): training used to finish and write the model
    without a word. It stops after the rule's 3 logged steps past the bound, naming the step
    it went past; the step-3 checkpoint, written while the loss was past, is held back."""
    _inject_loss(monkeypatch, lambda step, loss: loss * 1e6 if step >= 3 else loss)
    msg, paths = _stopped_run(tmp_path, steps=12)
    assert "training diverged: the loss went past" in msg and "at step 3" in msg, msg
    assert "for 3 logged step(s) (loss" in msg and "at step 5;" in msg, msg
    assert "last checkpoint (step 1) is kept" in msg, msg


def test_a_loss_spike_that_recovers_is_no_divergence(tmp_path, monkeypatch):
    """The near miss: the loss past the bound for 2 logged steps (one short of the rule), then
    back: training finishes; the checkpoint of a step past the bound waits for the next."""
    from interp_toolkit.runs.folder import RunPaths

    _inject_loss(monkeypatch, lambda step, loss: loss * 1e6 if step in (3, 4) else loss)
    out = tmp_path / "run"
    train(out, **_tiny(tmp_path, log_every=1, checkpoint_every=3, snapshot_log=0))
    assert RunPaths(out).weights.is_file()


def test_the_divergence_rule_on_logged_losses():
    """The rule itself, on loss sequences: the bound, the streak, the untrained loss."""
    from interp_toolkit.training.guard import LossWatch

    def run(losses, untrained=math.log(64)):
        w = LossWatch(untrained)
        for step, loss in enumerate(losses, 1):
            w.read(step, loss, from_start=step == 1)
        return w

    assert not run([4.0, 3.0, 2.0, 1.0, 0.9, 1.1, 1.3]).past  # training, with noise
    assert run([4.0, 2.0, 1.0, 9.0, 9.0, 9.0]).diverged  # past 4.16 (ln 64 + 1) 3 times
    assert not run([4.0, 2.0, 1.0, 9.0, 9.0, 1.0]).past  # back within it
    assert not run([4.0, 0.3, 1.5, 1.6, 1.5, 1.7]).past  # one easy batch: min+2 nats, not 4x
    assert run([4.0, 0.3, 2.4, 2.4, 2.4]).diverged  # past 0.3 + 2 nats
    big = run([9.0, 8.0, 7.5])  # a large-init start above ln V + 1: its own first loss counts
    assert not big.past and big.untrained == 9.0


# ----------------------------------------------------------------------------- prompts


def test_a_prompt_longer_than_the_context_is_refused_with_the_clis_line(tmp_path, capsys):
    """``view()`` and ``scores_on()`` cut a 900-token prompt to the context silently."""
    run = make_tiny_run(tmp_path / "run")
    target = load(run)
    prompt = " A B" * 450
    cli = run_cli(capsys, "view", run, "--prompt", prompt, "--out", tmp_path / "v.html")
    line = cli.one_line_error("context is 32").removeprefix("error: ")
    for call in (lambda: view(target, prompt), lambda: scores_on(target, prompt)):
        with pytest.raises(UserError) as exc:
            call()
        assert _one_line(exc) == line


def test_unsigned_token_ids_are_read_as_ids(tmp_path):
    """uint64 ids (a numpy default for some pipelines) raised NotImplementedError."""
    import numpy as np

    target = load(make_tiny_run(tmp_path / "run"))
    ids = [0, 5, 6, 7, 5, 6, 7]
    want = scores_on(target, ids).induction
    for arr in (np.array(ids, dtype=np.uint64), torch.tensor(ids, dtype=torch.uint32)):
        assert torch.equal(scores_on(target, arr).induction, want)
    with pytest.raises(UserError, match="outside this model's vocabulary"):
        scores_on(target, np.array([0, 2**64 - 1], dtype=np.uint64))


# ----------------------------------------------------------------------------- API arguments

API_TYPES = """
import json, math, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from _views_fixtures import make_tiny_run
from interp_toolkit import discover, exam, load, sae, scores_on, train
from interp_toolkit.errors import UserError
tmp = Path(sys.argv[1])
corpus = tmp / "corpus.txt"
corpus.write_text(" the cat sat on the mat.\\n" * 200)
t = load(make_tiny_run(tmp / "tiny"))
def damaged(field, value):
    run = make_tiny_run(tmp / f"damaged-{field}")
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"][field] = value
    (run / "config.json").write_text(json.dumps(cfg))
    return lambda: load(run)
def tr(**kw):
    return lambda: train(tmp / "out", layers=1, corpus=str(corpus), quiet=True, **kw)
out = {}
for name, call in [
    ("train(steps='5')", tr(steps="5")),
    ("train(steps=5.5)", tr(steps=5.5)),
    ("train(weight_decay=-1)", tr(weight_decay=-1)),
    ("train(betas=(2, 3))", tr(betas=(2, 3))),
    ("train(lr=inf)", tr(lr=math.inf)),
    ("train(corpus=123)", lambda: train(tmp / "out", corpus=123)),
    ("train(embed_init_std='x')", tr(embed_init_std="x")),
    ("train(betas=(0.9,))", tr(betas=(0.9,))),
    ("load(embed_init_std: 'x')", damaged("embed_init_std", "x")),
    ("load(n_layers: 2.5)", damaged("n_layers", 2.5)),
    ("load(mlp: 'no')", damaged("mlp", "no")),
    ("scores_on(period='2')", lambda: scores_on(t, [0, 5, 6, 5, 6], period="2")),
    ("discover(n_seqs='4')", lambda: discover(t, n_seqs="4")),
    ("discover(seed=-1)", lambda: discover(t, seed=-1)),
    ("exam(top_k='3')", lambda: exam(t, top_k="3")),
    ("exam(prompt=123)", lambda: exam(t, prompt=123, target=" A")),
    ("exam(target=5)", lambda: exam(t, prompt=" A B A", target=5)),
    ("sae(out=None)", lambda: sae(t, "blocks.0.attn.hook_z", None)),
    # issue 47: raw exceptions, a folder left behind, a run's own file written over
    ("sae(tokens='1000')", lambda: sae(t, "blocks.0.attn.hook_z", tmp / "s1", tokens="1000")),
    ("sae(expansion=1.5)", lambda: sae(t, "blocks.0.attn.hook_z", tmp / "s2", expansion=1.5)),
    ("sae(out=RUN/config.json)",
     lambda: sae(t, "blocks.0.attn.hook_z", tmp / "tiny" / "config.json")),
    ("scores_on(meta model)", lambda: scores_on(load(make_tiny_run(tmp / "m")).model.to("meta"), " A B")),
    ("scores_on(an object)", lambda: scores_on(type("M", (), {"tokenizer": 1})(), " A B")),
]:
    try:
        call()
        out[name] = "returned"
    except UserError as exc:
        both = isinstance(exc, ValueError) and isinstance(exc, TypeError)
        out[name] = ("UserError: " if both else "UserError (not both): ") + str(exc)
    except Exception as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def test_api_arguments_of_the_wrong_type_are_the_clis_one_line(tmp_path):
    """As a user calls them (a plain interpreter: the tests' runtime type checker would answer
    first). Each was a bare TypeError (or ValueError, RuntimeError), ``discover(seed=-1)`` was
    accepted, and the training cases left a run folder without a model. A UserError is a
    ValueError and a TypeError too, so ``except ValueError`` still catches it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", API_TYPES, str(tmp_path), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = {
        "train(steps='5')": "steps='5' cannot work: use a whole number, 1 or more.",
        "train(steps=5.5)": "steps=5.5 cannot work: use a whole number, 1 or more.",
        "train(weight_decay=-1)": "weight_decay=-1 cannot work: use a finite number >= 0",
        "train(betas=(2, 3))": "betas[0]=2 cannot work: use a finite number >= 0 and < 1.",
        "train(lr=inf)": "lr=inf cannot work: use a finite number > 0",
        "train(corpus=123)": "corpus must be text (str), got int 123",
        "train(embed_init_std='x')": "embed_init_std='x' cannot work",
        "train(betas=(0.9,))": "betas=(0.9,) cannot work: use a pair",
        "load(embed_init_std: 'x')": "damaged (\"model\": embed_init_std='x' cannot work)",
        "load(n_layers: 2.5)": 'damaged ("model": n_layers=2.5 cannot work)',
        "load(mlp: 'no')": "damaged (\"model\": mlp='no' cannot work)",
        "scores_on(period='2')": "period='2' cannot work: use a whole number, 2 or more.",
        "discover(n_seqs='4')": "n_seqs='4' cannot work: use a whole number, 1 or more.",
        "discover(seed=-1)": "seed=-1 cannot work: a seed is a whole number from 0 to",
        "exam(top_k='3')": "top_k='3' cannot work: use a whole number, 1 or more.",
        "exam(prompt=123)": "prompt must be text (str), got int 123",
        "exam(target=5)": "target must be text (str), got int 5",
        "sae(out=None)": "out must be a path (str or pathlib.Path), got NoneType None",
        "sae(tokens='1000')": "tokens='1000' cannot work: use a whole number, 1 or more.",
        "sae(expansion=1.5)": "expansion=1.5 cannot work: use a whole number, 1 or more.",
        "sae(out=RUN/config.json)": "is inside",
        "scores_on(meta model)": "the model's weights are on the meta device",
        "scores_on(an object)": "a M is not a model and has no interp-toolkit vocabulary",
    }
    for name, needle in expected.items():
        assert got[name].startswith("UserError: ") and needle in got[name], (name, got[name])
    assert not (tmp_path / "out").exists()  # every training case refused before its folder
    assert not (tmp_path / "s1").exists() and not (tmp_path / "s2").exists()  # nor an SAE's


def test_a_user_error_is_a_value_error_and_a_type_error():
    with pytest.raises(ValueError):
        raise UserError("x")
    with pytest.raises(TypeError):
        raise UserError("x")


def test_api_text_that_is_not_unicode_is_one_line(tmp_path):
    """``exam(m, 'ab\\ud800ab', 'a')`` and ``view(m, 'x\\udcffy')`` raised UnicodeEncodeError."""
    from interp_toolkit import exam

    target = load(make_tiny_run(tmp_path / "run"))
    for call in (
        lambda: exam(target, "ab\ud800ab", "a"),
        lambda: exam(target, "ab ab", "\udcff"),
        lambda: view(target, "x\udcffy"),
        lambda: scores_on(target, "x\udcffy x\udcffy"),
    ):
        with pytest.raises(UserError) as exc:
            call()
        assert "give text in UTF-8" in _one_line(exc)


def test_nan_weights_set_in_memory_are_refused_by_every_api_call(tmp_path):
    """A NaN set in a loaded model's weights gave ``discover()`` NaN scores and ``exam()`` rank
    -1, prob nan."""
    from interp_toolkit import discover, exam

    target = load(make_tiny_run(tmp_path / "run"))
    with torch.no_grad():
        next(target.model.parameters())[0] = math.nan
    for call in (
        lambda: discover(target, n_seqs=4),
        lambda: exam(target),
        lambda: view(target, "a"),
    ):
        with pytest.raises(UserError) as exc:
            call()
        assert "holds NaN or infinite weights" in _one_line(exc)


def test_view_heads_given_as_text_are_the_heads_named(tmp_path):
    """``view(m, 'a b c', heads="0.1")`` read the text as the heads 0, ".", 1 and said "head
    0.0 does not exist"; "L.H" (comma-separated) names those heads."""
    target = load(make_tiny_run(tmp_path / "run"))
    named, listed = view(target, " A B C", heads="0.1"), view(target, " A B C", heads=[(0, 1)])
    assert list(named) == list(listed) == [0]
    with pytest.raises(UserError, match="is not of the form L.H"):
        view(target, " A B C", heads="x")
