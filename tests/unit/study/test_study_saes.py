"""The study's SAE section (study/layers.py: measure_latents) on a tiny MLP run: the rule on the
model's SAE, on the untrained twin's and under the shuffled control, and the model's SAE's metrics
pooled and per row family (text, synthetic), in study.json's fields and the page's sentence."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from analysis_helpers import tiny_codec
from findings_helpers import neurons

from interp_toolkit.measures.layers import headline_evals as _headline_evals
from interp_toolkit.models.build import ModelConfig, build_model


@pytest.fixture
def mlp_run(tmp_path, monkeypatch):
    from interp_toolkit.runs.folder import load_run, save_run

    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{chr(97 + i % 26)}{i % 7} = [{i}, {i * 3}]\n" for i in range(3000)))
    settings = {"data": {"corpus": str(text), "val_fraction": 0.2, "repeat_fraction": 0.5}}
    base = dict(n_layers=1, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64, mlp=True)
    cfg = ModelConfig(**{**base, "d_mlp": 24, "normalization": "LN"})
    save_run(tmp_path / "run", build_model(cfg), tiny_codec(64), cfg, settings)
    return load_run(tmp_path / "run", device="cpu")


def test_the_study_s_sae_section_has_families_and_both_controls(mlp_run):
    from interp_toolkit.probing.data import neuron_windows
    from interp_toolkit.study.layers import measure_latents
    from interp_toolkit.units.neurons import untrained_twin

    tokens = neuron_windows(mlp_run.codec, 16, mlp_run, seed=0, n_seqs=64)
    twin = untrained_twin(mlp_run.model, mlp_run.model_cfg)
    c = measure_latents(mlp_run, twin, 0, tokens, 0, 8192)
    assert c.shuffled is not None and c.shuffled.monosemantic == 0  # random positions fail
    assert c.shuffled.units == c.model.units == 48
    d = json.loads(json.dumps(c.to_dict()))
    e = d["evals"]
    assert set(e["by_family"]) == {"text", "synthetic"}  # the run's mix is half synthetic
    assert sum(f["tokens"] for f in e["by_family"].values()) == e["tokens"]
    for f in e["by_family"].values():
        assert set(f) == {"l0", "explained_variance", "ce_loss_score", "dead", "tokens"}
        assert 0 < f["l0"] <= 32  # TopK k 32, then ReLU
    assert d["shuffled"]["monosemantic"] == 0 and d["untrained"]["units"] == 48
    assert _headline_evals(c.evals) == e


def test_the_sentence_gives_each_family_beside_the_pooled_number():
    from interp_toolkit.measures.layers import LatentCount
    from interp_toolkit.reports.layer_findings import latent_sentence
    from interp_toolkit.saes.evaluate import SAEEvals
    from interp_toolkit.units.reading import RuleCount

    def ev(ce, fve, n, **families):
        zero = {f.name: 0 if f.type == "int" else 0.0 for f in fields(SAEEvals)}
        given = dict(ce_loss_score=ce, explained_variance=fve, total_tokens_eval=n, l0=4.0)
        return SAEEvals(**{**zero, **given, "density_histogram": None, "by_family": families})

    evals = ev(0.75, 0.6, 100, text=ev(0.96, 0.8, 10), synthetic=ev(0.7, 0.5, 90))
    count = RuleCount(units=200, dead=0, monosemantic=10, by_kind={})
    sae = LatentCount(0, count, count, 200, 1000, shuffled=count, evals=evals)

    s = latent_sentence("m", neurons(model=(30, 100)), sae)
    assert "0.750 / 0.600 over all held-out rows" in s
    assert "(text rows 0.960 / 0.800, synthetic rows 0.700 / 0.500)" in s
    assert "shuffled control 10 of 200 live" in s
