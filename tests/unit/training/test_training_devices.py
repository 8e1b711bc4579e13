"""Devices and precision of a training run: recorded in config.json, checkpoints on the CPU, and
bf16 autocast on the CPU (bf16 matmuls inside the step, float32 weights, loss and head scoring)."""

import json

import pytest
import torch
from safetensors.torch import load_file

from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runs.folder import RunPaths, load_run, read_metrics
from interp_toolkit.text.stream import DataConfig
from interp_toolkit.training import TrainSettings, train_model


def _tiny(tmp_path, n_layers=1):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("def f(x, y):\n    return x * y + 1\n" * 200)
    model_cfg = ModelConfig(n_layers=n_layers, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=1)
    return model_cfg, DataConfig(corpus=str(corpus), vocab_size=32, repeat_fraction=0.5)


KW = dict(batch_size=4, log_every=1, score_every=2, checkpoint_every=2)


def test_precision_and_device_are_recorded_and_checkpoints_load_anywhere(tmp_path):
    out = tmp_path / "run"
    model_cfg, data_cfg = _tiny(tmp_path)
    kw = dict(KW, precision="bf16")
    train_model(
        out, model_cfg, data_cfg, TrainSettings(steps=2, **kw), device="cpu", progress=False
    )
    settings = json.loads((out / "config.json").read_text())["settings"]
    assert settings["train"]["precision"] == "bf16"  # what was asked for
    # what applied: bf16 autocast applies on the CPU; TF32 is a CUDA matmul mode, ignored here
    assert settings["runtime"] == {
        "device": "cpu",
        "processes": 1,
        "precision": {"bf16_autocast": True, "tf32": False},
    }
    optimizer = torch.load(RunPaths(out).checkpoint_optimizer(2), weights_only=True)
    tensors = [v for s in optimizer["state"].values() for v in s.values() if torch.is_tensor(v)]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    res = train_model(
        out, model_cfg, data_cfg, TrainSettings(steps=3, **kw), resume=True, progress=False
    )
    assert res.steps_done == 3 and next(res.run.model.parameters()).device.type == "cpu"
    toks = torch.randint(0, res.run.codec.d_vocab, (2, 16))
    with torch.no_grad():
        assert torch.equal(load_run(out, device="cpu").model(toks), res.run.model(toks))


def _dtypes_seen(tmp_path, precision):
    """Train 4 steps (scored at 2 and 4) recording the dtypes inside: q projections and logits
    in training steps and in the head scoring, the step's loss, and the weights' and optimizer
    state's dtypes at every step."""
    model_cfg, data_cfg = _tiny(tmp_path, n_layers=2)
    seen = {"train": set(), "scoring": set(), "loss": set(), "weights": set(), "adam": set()}

    def record(module, _inputs, output):
        seen["train" if module.training else "scoring"].add(output.dtype)

    def hook_once(info):
        if not seen["train"] and not seen["scoring"]:
            for m in (info.model.blocks[0].attn.q, info.model.unembed):
                m.register_forward_hook(record)

    def after_step(info):
        hook_once(info)
        seen["loss"].add(info.loss_tensor.dtype)
        seen["weights"] |= {p.dtype for p in info.model.parameters()}

    res = train_model(
        tmp_path / precision,
        model_cfg,
        data_cfg,
        TrainSettings(steps=4, precision=precision, **KW),
        device="cpu",
        progress=False,
        callbacks=[after_step],
    )
    state = torch.load(RunPaths(res.run.path).checkpoint_optimizer(4), weights_only=True)
    seen["adam"] = {v.dtype for s in state["state"].values() for k, v in s.items() if k != "step"}
    return seen


def test_bf16_on_the_cpu_multiplies_in_bf16_and_keeps_float32_weights_loss_and_scoring(
    tmp_path,
):
    """Inside a bf16 training step the q projection and the logits come out of bf16 matmuls;
    the weights, Adam's moments and the loss stay float32; the head scoring between steps reads
    the model in exact float32. The fp32 run is the control: nothing in it is bf16."""
    bf16 = _dtypes_seen(tmp_path, "bf16")
    assert bf16["train"] == {torch.bfloat16}  # steps 2-4 (the hooks go on after step 1)
    assert bf16["scoring"] == {torch.float32}
    assert bf16["loss"] == bf16["weights"] == bf16["adam"] == {torch.float32}
    fp32 = _dtypes_seen(tmp_path, "fp32")
    assert fp32["train"] == fp32["scoring"] == fp32["loss"] == {torch.float32}


def test_bf16_learns_like_fp32(tmp_path):
    """The same seed's loss under bf16 follows fp32's within bf16 rounding over 12 steps (and
    falls). A bf16 copy of the weights kept across steps (an autocast block around the whole loop
    caches the step-1 casts) leaves the loss flat: the gap grows past the tolerance."""
    model_cfg, data_cfg = _tiny(tmp_path, n_layers=2)
    curves = {}
    for precision in ("fp32", "bf16"):
        res = train_model(
            tmp_path / precision,
            model_cfg,
            data_cfg,
            TrainSettings(steps=12, lr=1e-2, precision=precision, **KW),
            device="cpu",
            progress=False,
        )
        curves[precision] = [r["loss"] for r in read_metrics(res.run.path)]
    fp32, bf16 = curves["fp32"], curves["bf16"]
    assert fp32[-1] < fp32[0] - 0.3  # it learns (the control)
    assert max(abs(a - b) for a, b in zip(fp32, bf16, strict=True)) < 0.05, curves


@pytest.mark.parametrize("precision", ["bf16"])
def test_resume_under_bf16_is_bit_identical(tmp_path, precision):
    model_cfg, data_cfg = _tiny(tmp_path, n_layers=2)
    settings = TrainSettings(steps=5, precision=precision, **KW)
    train_model(tmp_path / "a", model_cfg, data_cfg, settings, device="cpu", progress=False)

    def crash(info):
        if info.step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(
            tmp_path / "b", model_cfg, data_cfg, settings, progress=False, callbacks=[crash]
        )
    res = train_model(tmp_path / "b", model_cfg, data_cfg, settings, resume=True, progress=False)
    assert res.steps_done == 5
    a = load_file(str(tmp_path / "a" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    timing = ("elapsed_s", "tokens_per_s")  # all else (losses, head scores) bit-identical
    rows_a, rows_b = (
        [{k: v for k, v in r.items() if k not in timing} for r in read_metrics(tmp_path / n)]
        for n in "ab"
    )
    assert rows_a == rows_b
