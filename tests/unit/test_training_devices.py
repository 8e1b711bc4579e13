"""Devices and precision of a training run: recorded in config.json, checkpoints on the CPU."""

import json

import torch

from interp_toolkit.data import DataConfig
from interp_toolkit.models import AttnOnlyConfig
from interp_toolkit.runs import RunPaths, load_run
from interp_toolkit.training import TrainSettings, train_model


def test_precision_and_device_are_recorded_and_checkpoints_load_anywhere(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("def f(x, y):\n    return x * y + 1\n" * 200)
    out = tmp_path / "run"
    model_cfg = AttnOnlyConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=16, d_vocab=1)
    data_cfg = DataConfig(corpus=str(corpus), vocab_size=32)
    kw = dict(batch_size=4, log_every=1, score_every=2, checkpoint_every=2, precision="bf16")
    train_model(
        out, model_cfg, data_cfg, TrainSettings(steps=2, **kw), device="cpu", progress=False
    )
    settings = json.loads((out / "config.json").read_text())["settings"]
    assert settings["train"]["precision"] == "bf16"  # what was asked for
    # what applied: bf16 autocast and TF32 are CUDA-only, so on the CPU both are off
    assert settings["runtime"] == {
        "device": "cpu",
        "processes": 1,
        "precision": {"bf16_autocast": False, "tf32": False},
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
