"""Models with MLPs and LayerNorm (``ModelConfig(mlp=True, normalization="LN")``, ``train
--mlp``): the TransformerLens config, run folders (old ones still load), and every command on a
tiny MLP run folder."""

from __future__ import annotations

import json

import pytest
import torch
from analysis_helpers import tiny_codec
from cli_helpers import run_main

from interp_toolkit.models.build import ModelConfig, build_model, tl_config
from interp_toolkit.runs.folder import load_run, save_run
from interp_toolkit.training.presets import get_preset


def _mlp_cfg(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=32, d_vocab=64)
    return ModelConfig(**{**base, "mlp": True, "d_mlp": 16, "normalization": "LN", **kw})


@pytest.fixture
def mlp_run(tmp_path):
    cfg = _mlp_cfg()
    return save_run(tmp_path / "mlp", build_model(cfg), tiny_codec(cfg.d_vocab), cfg)


def test_mlp_config_builds_the_gpt2_block():
    cfg = _mlp_cfg()
    tl = tl_config(cfg)
    assert (tl.attn_only, tl.d_mlp, tl.act_fn, tl.normalization_type) == (False, 16, "gelu", "LN")
    model = build_model(cfg)
    assert model.blocks[1].mlp.W_out.shape == (16, 32)
    assert tuple(model.W_U.shape) == (32, 64)
    with pytest.raises(Exception, match="act_fn"):
        _mlp_cfg(act_fn="swish").validate()


def test_presets_with_mlp_change_the_architecture_only():
    plain, mlp = get_preset("cpu", 2), get_preset("cpu", 2, mlp=True)
    assert (plain.data, plain.train) == (mlp.data, mlp.train)
    assert mlp.model == plain.model.replace(
        mlp=True, d_mlp=4 * plain.model.d_model, act_fn="gelu", normalization="LN"
    )
    assert not plain.model.mlp and plain.model.normalization is None


def test_mlp_run_reloads_with_identical_logits(mlp_run):
    cfg = json.loads((mlp_run / "config.json").read_text())["model"]
    assert (cfg["mlp"], cfg["d_mlp"], cfg["normalization"]) == (True, 16, "LN")
    run = load_run(mlp_run)
    twin = build_model(_mlp_cfg())
    tokens = torch.randint(0, 64, (3, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(run.model(tokens), twin(tokens))
    assert not torch.equal(twin(tokens), build_model(_mlp_cfg(seed=1))(tokens))


def test_run_folder_without_the_mlp_fields_loads_as_attention_only(tmp_path, tiny_cfg, tiny_model):
    path = save_run(tmp_path / "old", tiny_model, tiny_codec(tiny_cfg.d_vocab), tiny_cfg)
    data = json.loads((path / "config.json").read_text())
    for key in ("mlp", "d_mlp", "act_fn", "normalization"):
        del data["model"][key]
    (path / "config.json").write_text(json.dumps(data))
    run = load_run(path)
    assert run.model_cfg == tiny_cfg and run.model.cfg.attn_only
    tokens = torch.randint(0, 64, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(run.model(tokens), tiny_model(tokens))


def test_every_command_runs_on_an_mlp_run(mlp_run, tmp_path, capsys):
    run = str(mlp_run)
    heads = tmp_path / "heads.json"
    assert (
        run_main(["heads", run, "--n-seqs", "4", "--n-untrained", "2", "--json", str(heads)]) == 0
    )
    data = json.loads(heads.read_text())
    assert len(data["heads"]) == 8 and data["test"]["untrained"]["n_models"] == 2
    exam = tmp_path / "exam.json"
    argv = ["exam", run, "--prompt", "1,2,1,2,1", "--target", ",", "--json", str(exam)]
    assert run_main(argv) == 0
    (result,) = json.loads(exam.read_text())["exams"]
    loaded = load_run(mlp_run)  # the same numbers from the MLP model, computed here
    ids = [loaded.codec.bos_id, *loaded.codec.encode("1,2,1,2,1")]
    with torch.no_grad():
        probs = torch.softmax(loaded.model(torch.tensor([ids]))[0, -1].double(), -1)
    target = loaded.codec.encode(",")[0]
    assert (result["prompt"], result["target"], result["target_id"]) == ("1,2,1,2,1", ",", target)
    assert result["prob"] == pytest.approx(float(probs[target]), abs=1e-5)
    assert result["rank"] == int((probs > probs[target]).sum())
    circ = tmp_path / "circ.json"
    assert run_main(["copying", run, "--head", "1.2", "--token", "!", "--json", str(circ)]) == 0
    assert json.loads(circ.read_text())["head"] == "1.2"
    view = tmp_path / "view.html"
    assert run_main(["view", run, "--prompt", "1,2,1,2", "--out", str(view)]) == 0
    assert "CircuitsVis" in view.read_text()
    probe = tmp_path / "probe.json"
    argv = ["probe", run, "--feature", "in_repeat", "--n-seqs", "25", "--json", str(probe)]
    assert run_main(argv) == 0
    assert [r["boundary"] for r in json.loads(probe.read_text())["rows"]] == [
        "embed",
        "attn 0",
        "mlp 0",
        "attn 1",
        "mlp 1",
    ]
    capsys.readouterr()


def test_circuits_fold_layernorm_on_mlp_models(mlp_run):
    from interp_toolkit.weights.circuits import circuit_model, full_ov

    model = load_run(mlp_run).model
    folded = circuit_model(model)
    assert folded is not model
    ov = full_ov(model, 0, 0).AB
    expect = folded.W_E @ folded.blocks[0].attn.W_V[0] @ folded.blocks[0].attn.W_O[0] @ folded.W_U
    torch.testing.assert_close(ov, expect.detach())
