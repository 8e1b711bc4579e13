"""The notebook API (interp_toolkit.load/train/scores_on/view/...): hand-built heads with known
answers, plain data in, one displayable view out, re-runnable training cells."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from _views_fixtures import make_tiny_run
from analysis_helpers import make_offset_head, tiny_codec

import interp_toolkit
from interp_toolkit import UserError, load, scores_on, train, view
from interp_toolkit.models.build import ModelConfig, build_model

ROOT = Path(__file__).resolve().parents[2]
PERIOD = 5
# [BOS] two filler tokens, a 5-token span twice, one filler token: the repeats start at 3.
PROMPT = [0, 40, 41, 10, 11, 12, 13, 14, 10, 11, 12, 13, 14, 42]


@pytest.fixture
def planted():
    """Layer 0: head 2 attends PERIOD-1 back (the induction stripe of this prompt), head 1
    PERIOD back (the duplicate-token stripe); the other heads are random."""
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64, seed=0)
    model = build_model(cfg, codec=tiny_codec(64))
    make_offset_head(model, 0, 2, offset=PERIOD - 1)
    make_offset_head(model, 0, 1, offset=PERIOD)
    return model


def test_scores_on_finds_the_planted_stripes_in_either_reading(planted):
    """PROMPT (filler, a span twice, filler) is not a span followed by itself as a whole: the
    text reading (the span's second copy but its first token); with ``period`` given, the
    period rule. Both find the planted heads."""
    s = scores_on(planted, PROMPT)
    assert s.induction.shape == (2, 4) and s.reading == "text" and s.queries["induction"] == 4
    others = torch.ones(2, 4, dtype=torch.bool)
    others[0, 2] = False
    by_period = scores_on(planted, PROMPT, period=PERIOD)
    assert by_period.reading == "period" and by_period.queries["induction"] == 5
    for r in (s, by_period):
        assert float(r.induction[0, 2]) > 0.95 and float(r.duplicate_token[0, 1]) > 0.95
        assert float(r.induction[others].max()) < 0.5
    # the same on numpy, on a tensor and on a [batch, pos] batch
    for same in (
        scores_on(planted, np.array(PROMPT)),
        scores_on(planted, torch.tensor([PROMPT, PROMPT])),
    ):
        assert torch.allclose(same.induction, s.induction, atol=1e-5)
    # a prompt of another period reads another stripe
    span = [10, 11, 12, 13, 14, 20, 21, 22, 23]
    assert float(scores_on(planted, [0, *span, *span]).induction[0, 2]) < 0.5


def test_scores_on_text_goes_through_the_models_tokenizer(planted):
    text = "Q.R.S.T.Q.R.S.T."
    ids = [0, *[49, 14, 50, 14, 51, 14, 52, 14] * 2]  # BOS, then "Q" "." "R" "." ... twice
    assert planted.to_tokens(text)[0].tolist() == ids
    assert torch.equal(scores_on(planted, text).induction, scores_on(planted, ids).induction)


@pytest.mark.parametrize(
    ("prompt", "period", "match"),
    [
        (PROMPT, 3, "no repeated segment with period 3"),
        (PROMPT, 1, "period=1 cannot work"),
        ([[0, 1, 2, 1, 2, 9, 9], [0, 1, 2, 3, 1, 2, 3]], 2, "no repeated segment with period 2"),
        (np.array([0.5, 1.5]), None, "must be integer token ids"),
        ([0, 99, 0, 99], None, "ids 0..63"),
        ("", None, "empty"),
        (list(range(40)), None, "context is 32"),
    ],
)
def test_scores_on_bad_input_is_one_clear_error(planted, prompt, period, match):
    with pytest.raises(UserError, match=match):
        scores_on(planted, prompt, period=period)


def test_view_is_one_object_with_every_layer(planted):
    v = view(planted, PROMPT)
    assert not isinstance(v, list) and hasattr(v, "_repr_html_")
    html = v._repr_html_()
    assert "Layer 0" in html and "Layer 1" in html
    one = view(planted, np.array(PROMPT), layer=1)._repr_html_()
    assert "Layer 1" in one and "Layer 0" not in one


def test_view_saves_an_offline_page(planted, tmp_path):
    """``view(...).save(path)``: the page ``interp-toolkit view`` writes, with no network."""
    from _views_fixtures import assert_offline

    path = view(planted, PROMPT).save(tmp_path / "v.html", title="mine")
    page = path.read_text(encoding="utf-8")
    assert "<title>mine</title>" in page and "Layer 0" in page and "Layer 1" in page
    assert_offline(page)


def test_load_accepts_what_the_cli_accepts_and_the_api_takes_its_result(tmp_path):
    run = make_tiny_run(tmp_path / "run")
    target = load(run)
    assert target.kind == "toy" and target.model.to_str_tokens("A B")[0] == "<|endoftext|>"
    ids = [0, *[int(t) for t in target.codec.encode(" A B C A B C")]]
    assert scores_on(target, ids).induction.shape == (2, 4)
    with pytest.raises(UserError, match="does not exist"):
        load(tmp_path / "missing")


def _text_corpus(tmp_path: Path) -> str:
    path = tmp_path / "corpus.txt"
    path.write_text(" the cat sat on the mat. the dog ran after the cat.\n" * 200)
    return str(path)


def test_train_exist_ok_load_loads_the_same_run(tmp_path):
    settings = dict(
        steps=3, d_model=32, d_head=8, n_ctx=16, vocab_size=32, batch_size=4,
        corpus=_text_corpus(tmp_path), quiet=True,
    )  # fmt: skip
    out = tmp_path / "run"
    first = train(out, layers=1, exist_ok="load", **settings)
    stamp = out.joinpath("model.safetensors").stat().st_mtime_ns
    again = train(out, layers=1, exist_ok="load", **settings)  # a re-run cell: no training
    assert out.joinpath("model.safetensors").stat().st_mtime_ns == stamp
    a, b = first.model.state_dict(), again.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(UserError, match="already holds a run"):
        train(out, layers=1, exist_ok="error", **settings)
    with pytest.raises(UserError, match="n_layers=1 \\(asked 2\\)"):
        train(out, layers=2, exist_ok="load", **settings)
    longer = train(out, layers=1, exist_ok="resume", **{**settings, "steps": 5})
    assert longer.metrics()[-1]["step"] == 5
    with pytest.raises(UserError, match="exist_ok"):
        train(out, exist_ok="overwrite")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no setting 'colour'"):
        train(out, colour="red")


def test_train_derives_the_head_width_from_d_model_as_the_cli_does(tmp_path):
    """``train(d_model=...)`` without ``d_head`` keeps the preset's heads (``d_head = d_model /
    n_heads``), as ``train --d-model`` does; a width the heads do not divide is one line."""
    run = train(
        tmp_path / "run", layers=1, steps=1, d_model=64, n_ctx=16, vocab_size=32, batch_size=2,
        corpus=_text_corpus(tmp_path), quiet=True,
    )  # fmt: skip
    cfg = run.model.cfg
    assert (cfg.d_model, cfg.n_heads * cfg.d_head) == (64, 64)
    with pytest.raises(UserError, match="cannot work with"):
        train(tmp_path / "odd", layers=1, steps=1, d_model=66, quiet=True)


def test_version_and_exports_are_single_sourced_and_light():
    assert interp_toolkit.__version__ == metadata.version("interp-toolkit")
    import interp_toolkit.api as api
    import interp_toolkit.errors as errors

    expected = {name: getattr(api, name) for name in api.__all__} | {"UserError": errors.UserError}
    assert sorted(interp_toolkit.__all__) == sorted([*expected, "__version__"])
    for name, obj in expected.items():  # each name is the object its module defines, documented
        assert getattr(interp_toolkit, name) is obj and obj.__doc__, name
        assert name in dir(interp_toolkit), name
    with pytest.raises(AttributeError, match="no attribute 'loads'"):
        interp_toolkit.loads  # noqa: B018  (a typo is an AttributeError, not None)
    code = "import sys, interp_toolkit; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False"  # the API loads torch on first use only
    assert (ROOT / "interp_toolkit" / "py.typed").is_file()


def test_sae_takes_the_commands_options_object_or_its_fields_as_keywords(tmp_path, monkeypatch):
    """``sae(m, hook, out, SAEOptions(...), k=...)``: the object's fields reach the trainer, a
    keyword replaces one, ``quiet`` is no progress; an unknown keyword is one line, before
    anything is written (a non-whole count: ``test_no_silent_answers.py``, a plain interpreter)."""
    import interp_toolkit.saes.pipeline as pipeline
    from interp_toolkit import sae
    from interp_toolkit.saes.options import SAEOptions

    got = {}

    def fake(model, codec, source, out, options, **kw):
        got.update(vars(options), **kw)
        raise SystemExit(0)

    monkeypatch.setattr(pipeline, "run_sae", fake)
    run = load(make_tiny_run(tmp_path / "run"))
    opts = SAEOptions(hook="blocks.0.hook_resid_pre", arch="relu", k=4, tokens=1000, quiet=True)
    with pytest.raises(SystemExit):
        sae(run, "blocks.1.attn.hook_z", tmp_path / "s", opts, k=8)
    assert got == {
        "hook": "blocks.1.attn.hook_z", "arch": "relu", "expansion": 8, "k": 8, "tokens": 1000,
        "seed": 0, "resume": False, "show": 24, "quiet": True,
    }  # fmt: skip
    with pytest.raises(UserError, match="unknown sae option colour: the options are hook, arch"):
        sae(run, "blocks.1.attn.hook_z", tmp_path / "t", colour="red")
    assert not (tmp_path / "t").exists()


def test_train_says_that_progress_is_now_quiet(tmp_path):
    with pytest.raises(UserError, match=r"quiet=True \(for progress=False\)"):
        train(tmp_path / "run", progress=False, steps=1)
    assert not (tmp_path / "run").exists()
