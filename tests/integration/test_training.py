import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from interp_toolkit.errors import UserError
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import load_run, read_metrics
from interp_toolkit.text.stream import DataConfig
from interp_toolkit.training import TrainSettings, train_model


def _tiny(tmp_path, name="run", steps=12, **train_kw):
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        corpus.mkdir()
        for i in range(30):
            (corpus / f"m{i}.py").write_text(f"def f{i}(x, y):\n    return x * y + {i}\n" * 30)
    model_cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=1)
    data_cfg = DataConfig(corpus=str(corpus), vocab_size=64, repeat_fraction=0.5)
    kw = dict(steps=steps, batch_size=8, lr=1e-3, log_every=2, score_every=4, checkpoint_every=4)
    kw.update(train_kw)
    return tmp_path / name, model_cfg, data_cfg, TrainSettings(**kw)


def test_train_writes_a_loadable_run_with_metrics(tmp_path):
    out, m, d, t = _tiny(tmp_path, snapshot_steps=(4, 8))
    res = train_model(out, m, d, t, progress=False)
    assert res.steps_done == 12
    for name in ("config.json", "model.safetensors", "vocab.json", "metrics.jsonl"):
        assert (out / name).is_file()
    assert sorted(p.name for p in (out / "snapshots").iterdir()) == [
        "step_4.safetensors",
        "step_8.safetensors",
    ]
    rows = read_metrics(out)
    assert [r["step"] for r in rows] == [2, 4, 6, 8, 10, 12]
    # a step trains batch * n_ctx predictions (the windows' n_ctx + 1st token is only a target)
    assert [r["tokens"] for r in rows] == [r["step"] * 8 * 16 for r in rows]
    scored = [r for r in rows if "induction" in r]
    assert [r["step"] for r in scored] == [4, 8, 12]
    assert len(scored[0]["induction"]) == 2 and len(scored[0]["induction"][0]) == 4
    # it learns: the held-out loss falls at every scored step (constant if the weights never moved)
    val = [r["val_loss"] for r in scored]
    assert val == sorted(set(val), reverse=True), val
    # a loaded model gives bit-identical logits
    run = load_run(out)
    toks = torch.randint(0, run.codec.d_vocab, (2, 16))
    with torch.no_grad():
        assert torch.equal(run.model(toks), res.run.model(toks))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model"]["d_vocab"] == 64 and cfg["settings"]["train"]["steps"] == 12
    # every position is trained, the last one too (windows of n_ctx + 1 tokens)
    from interp_toolkit.models.build import build_model

    init = build_model(run.model_cfg).pos_embed.original_component.weight
    moved = (run.model.pos_embed.original_component.weight - init).norm(dim=1)
    assert bool((moved > 0).all()), moved


def test_resume_after_interrupt_gives_identical_weights(tmp_path):
    out_a, m, d, t = _tiny(tmp_path, "a")
    train_model(out_a, m, d, t, progress=False)

    out_b = tmp_path / "b"

    def crash(info):
        if info.step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(out_b, m, d, t, progress=False, callbacks=[crash])
    assert not (out_b / "model.safetensors").exists()
    assert json.loads((out_b / "checkpoints" / "state.json").read_text())["step"] == 4
    res = train_model(out_b, m, d, t, resume=True, progress=False)
    assert res.steps_done == 12
    a = load_file(str(out_a / "model.safetensors"))
    b = load_file(str(out_b / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in read_metrics(out_b)] == [r["step"] for r in read_metrics(out_a)]


def test_existing_run_and_missing_checkpoint_are_user_errors(tmp_path):
    out, m, d, t = _tiny(tmp_path, steps=4)
    train_model(out, m, d, t, progress=False)
    with pytest.raises(UserError, match="already holds a run"):
        train_model(out, m, d, t, progress=False)
    (out / "checkpoints" / "state.json").unlink()
    with pytest.raises(UserError, match="no checkpoint"):
        train_model(out, m, d, t, resume=True, progress=False)


@pytest.mark.slow
def test_two_layers_grow_an_induction_head_and_one_layer_does_not(
    trained_2l_result, trained_1l_result
):
    """The study's claim, on the cpu preset: checked on every commit."""
    from interp_toolkit.stats.thresholds import THRESHOLDS
    from interp_toolkit.training import first_induction_step

    floor = THRESHOLDS.induction  # the stop rule's floor, read from its owner
    two, one = trained_2l_result, trained_1l_result
    assert two.first_induction_step is not None, "the 2-layer cpu preset grew no induction head"
    last2 = two.metrics[-1]["induction"]
    assert max(last2[1]) > floor
    assert one.steps_done == two.steps_done
    assert first_induction_step(one.metrics, floor) is None  # a 1-layer model: layer 0 counts
    assert max(max(r["induction"][0]) for r in one.metrics if "induction" in r) < floor


def test_stops_a_fixed_number_of_steps_after_the_induction_score_passes(tmp_path):
    # stop_score -1: every scoring (steps 4, 8, ...) is above it, so the streak starts at step 4
    out, m, d, t = _tiny(tmp_path, "stop", steps=40, stop_score=-1.0, stop_after=8)
    res = train_model(out, m, d, t, progress=False)
    assert (res.steps_done, res.stopped_early) == (12, True)
    # a run interrupted mid-streak re-reads its scorings: it stops at the same step
    out_b, *_ = _tiny(tmp_path, "stop_b")

    def crash(info):
        if info.step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(out_b, m, d, t, progress=False, callbacks=[crash])
    assert train_model(out_b, m, d, t, resume=True, progress=False).steps_done == 12
    # no stop_score: the whole budget
    out_c, *_ = _tiny(tmp_path, "full")
    assert train_model(out_c, m, d, replace(t, stop_score=None), progress=False).steps_done == 40
