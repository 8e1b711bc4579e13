"""MLP neurons (units/neurons.py): streaming top-k, promoted tokens, the withdrawn token-group
count on hand-built neurons with known answers, every statistic beside the untrained twin and the
shuffled control, and the ``neurons`` command."""

from __future__ import annotations

import json

import pytest
import torch
from analysis_helpers import tiny_codec
from cli_helpers import run_main

from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.units import neurons


def _mlp_cfg(**kw):
    base = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64, mlp=True)
    return ModelConfig(**{**base, "d_mlp": 24, "normalization": "LN", **kw})


def _clustered_embeddings() -> torch.Tensor:
    """100 token types in 128 dims: types 0-3 near e0 (one group of related tokens), 4-7 near
    e1 (another), every other type on its own axis (unrelated to all)."""
    gen = torch.Generator().manual_seed(0)
    w_e = torch.zeros(100, 128)
    w_e[:4, 0] = 1.0
    w_e[4:8, 1] = 1.0
    for t in range(8, 100):
        w_e[t, t + 20] = 1.0
    return w_e + 0.05 * torch.randn(100, 128, generator=gen)


def test_token_groups_counts_unrelated_token_groups():
    w_e = _clustered_embeddings()
    threshold = neurons.similarity_threshold(w_e)
    assert 0.0 < threshold < 0.9  # the clusters (0.24% of pairs) sit above the 99th percentile
    k = 20
    tokens = torch.tensor(
        [
            [0, 1, 2, 3] * 5,  # one group of four related types: monosemantic
            [0, 1, 4, 5] * 5,  # two groups
            [10, 20, 30, 40] * 5,  # four unrelated types
            [9] * 19 + [50],  # one type, plus a 5% share (< min_share) of another
            [11] * k,  # dead: never fires above 0
        ]
    )
    weights = torch.ones(5, k)
    weights[4] = -0.1
    groups, entropy = neurons.token_groups(tokens, weights, w_e, threshold)
    assert groups.tolist() == [1, 2, 4, 1, 0]
    # entropy counts related types as many: the monosemantic neuron has 2 bits, like 4 types
    assert entropy[0].item() == pytest.approx(2.0) and entropy[2].item() == pytest.approx(2.0)
    assert entropy[4].item() == 0.0


def test_token_groups_weighs_positions_by_activation():
    w_e = _clustered_embeddings()
    threshold = neurons.similarity_threshold(w_e)
    tokens = torch.tensor([[0] * 10 + [40] * 10])
    weights = torch.tensor([[1.0] * 10 + [0.05] * 10])  # type 40 holds 4.8% of the weight
    assert neurons.token_groups(tokens, weights, w_e, threshold)[0].tolist() == [1]
    weights[0, 10:] = 1.0
    assert neurons.token_groups(tokens, weights, w_e, threshold)[0].tolist() == [2]


def test_streaming_top_k_matches_the_full_activations(monkeypatch):
    model = build_model(_mlp_cfg())
    tokens = torch.randint(0, 64, (9, 16), generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(neurons, "CHUNK_BYTES", 4 * 16 * 24 * 2 * 2)  # 2 rows a chunk
    tops = neurons.top_activations(model, tokens, [0, 1], k=5)
    _, cache = model.run_with_cache(tokens)
    for layer in (0, 1):
        full = cache[f"blocks.{layer}.mlp.hook_post"]  # [n, pos, neuron]
        want = full.reshape(-1, 24).topk(5, dim=0).values.T
        got = tops[layer]
        torch.testing.assert_close(got.values, want)
        torch.testing.assert_close(full[got.rows, got.positions, torch.arange(24)[:, None]], want)


def test_promoted_tokens_read_w_out_through_the_unembedding():
    model = build_model(_mlp_cfg(normalization=None))
    blk = model.blocks[1].mlp
    with torch.no_grad():
        model.unembed.original_component.weight[7] = 0.0
        model.unembed.original_component.weight[7, 0] = 5.0  # W_U[:, 7] = 5 e0
        model.unembed.original_component.weight[:, 0][torch.arange(64) != 7] = 0.0
        blk.out.original_component.weight[:, 3] = 0.0
        blk.out.original_component.weight[0, 3] = 1.0  # W_out[3] = e0
    ids, logits = neurons.promoted_tokens(model, 1, m=3)
    assert ids.shape == (24, 3) and ids[3, 0] == 7 and logits[3, 0].item() == pytest.approx(5.0)
    assert logits[3, 1].item() == pytest.approx(0.0)


def test_attention_only_models_have_no_neurons(tiny_model):
    with pytest.raises(neurons.UserError, match="attention-only"):
        neurons.check_layers(tiny_model, [0])
    with pytest.raises(neurons.UserError, match="does not exist"):
        neurons.check_layers(build_model(_mlp_cfg()), [2])


@pytest.fixture
def mlp_text_run(tmp_path, monkeypatch):
    from interp_toolkit.runs.folder import save_run

    monkeypatch.setenv("INTERP_TOOLKIT_CACHE", str(tmp_path / "cache"))
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"{chr(97 + i % 26)}{i % 7} = [{i}, {i * 3}]\n" for i in range(3000)))
    settings = {"data": {"corpus": str(text), "val_fraction": 0.2}}
    cfg = _mlp_cfg()
    return save_run(tmp_path / "run", build_model(cfg), tiny_codec(64), cfg, settings)


def test_statistics_are_read_on_the_model_its_untrained_twin_and_shuffled_activations():
    cfg = _mlp_cfg()
    model = build_model(cfg)
    twin = neurons.untrained_twin(model, cfg)
    assert all(
        torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters(), strict=True)
    )
    tokens = torch.randint(1, 62, (12, 16), generator=torch.Generator().manual_seed(1))
    (info,) = neurons.analyse_neurons(model, tokens, [1], k=6, untrained=twin)
    assert set(info.stats) == {"model", "untrained", "shuffled"}
    s = info.summary().readings["model"]
    assert s.rule.units == 24 and s.token_groups.withdrawn is True
    shuffled = info.stats["shuffled"]
    assert torch.equal(shuffled.top.values, info.model.top.values)  # same values, random places
    assert not torch.equal(
        shuffled.top.rows * 16 + shuffled.top.positions, info.top.rows * 16 + info.top.positions
    )


def test_neurons_command_writes_json_and_an_offline_page(mlp_text_run, tmp_path, capsys):
    out, page = tmp_path / "n.json", tmp_path / "n.html"
    argv = ["neurons", str(mlp_text_run), "--layer", "1", "--top", "8", "--n-seqs", "20"]
    assert run_main([*argv, "--show", "3", "--json", str(out), "--out", str(page)]) == 0
    data = json.loads(out.read_text())
    assert data["summary"]["neurons"] == 24 and len(data["neurons"]) == 24
    assert len(data["neurons"][0]["top"]) == 8 and len(data["shown"]) == 3
    for reading in ("model", "untrained", "shuffled"):
        s = data["summary"][reading]
        assert s["units"] == 24 and s["dead"] + s["monosemantic"] <= 24
    assert data["finding"].startswith("run layer 1: ")
    html = page.read_text()
    assert html.count("CircuitsVis.render(") == 1 and "untrained twin" in html
    assert "monosemantic" in capsys.readouterr().out
    assert run_main([*argv, "--neuron", "99"]) == 2
    assert "does not exist" in capsys.readouterr().err


def _hand_layer() -> neurons.LayerNeurons:
    """Two neurons, k = 2: neuron 0 fires on token 5 (a token concept), neuron 1 is read as
    ``seen`` (value 0: not a token, so never relabelled though token 0 has a label)."""
    from interp_toolkit.units.reading import Concept, TopActivations

    top = TopActivations(
        torch.tensor([[0.123456, 0.1], [0.5, 0.25]]),
        torch.tensor([[0, 1], [2, 3]]),
        torch.tensor([[4, 5], [6, 7]]),
    )
    concepts = [
        Concept("token", 5, 1.0, 0.1, 0.001, True, holds=True),
        Concept("seen", 0, 0.9, 0.5, 0.2, False),
    ]
    stats = neurons.NeuronStats(
        top,
        torch.tensor([[5, 5], [0, 9]]),
        concepts,
        torch.ones(2, dtype=torch.long),
        torch.zeros(2),
        0.3,
    )
    promoted, logits = torch.tensor([[9], [0]]), torch.tensor([[2.000049], [-1.0]])
    return neurons.LayerNeurons(1, {"model": stats}, promoted, logits)


def test_a_neuron_record_writes_its_concept_in_place_and_labels_only_token_concepts():
    labels = {0: "A", 5: "·b", 9: "c"}
    first, second = (r.to_dict() for r in _hand_layer().records(labels))
    assert list(first) == [
        *("neuron", "max_activation", "concept", "value", "share", "base", "p_value", "lift"),
        *("holds", "monosemantic", "dead", "top", "promoted"),
    ]
    assert (first["max_activation"], first["value"], first["concept"]) == (0.1235, "·b", "token")
    assert first["top"][0] == {"row": 0, "pos": 4, "activation": 0.1235, "token": "·b"}
    assert first["promoted"] == [{"token": "c", "logit": 2.0}]
    assert second["value"] == 0 and second["concept"] == "seen"  # not token 0's label "A"
    assert second["promoted"] == [{"token": "A", "logit": -1.0}]


def test_the_neurons_table_reads_the_layer_it_was_given():
    from rich.console import Console

    from interp_toolkit.reports.terminal_units import neurons_view

    layer = _hand_layer()
    shown = neurons_view("toy", layer, {0: "A", 5: "·b", 9: "c"}, [1, 0], "a finding")
    console = Console(width=200, record=True)
    for item in shown:
        console.print(item)
    text = console.export_text()
    assert "toy layer 1: 2 neurons; 1 monosemantic, 0 dead" in text
    assert "fires on ·b" in text and text.index("1.1") < text.index("1.0")  # shown order
    assert "a finding" in text and "(k = 2)" in text


def test_a_layer_summary_is_written_as_the_hand_built_dict_was():
    """LayerSummary's JSON key for key as ``summary()``'s dict (with the study's ``k``); read
    back alike."""
    from interp_toolkit.units.reading import RuleCount

    rule = RuleCount(units=24, dead=4, monosemantic=5, by_kind={"token": 3, "previous": 2})
    groups = neurons.TokenGroups(mean=1.5, two_or_more=7, sim_threshold=0.1234)
    reading = neurons.StatsSummary(rule, groups, 2.25, 0.5)
    summary = neurons.LayerSummary(1, 24, {"model": reading, "shuffled": reading}, k=8)
    one = '{"units": 24, "dead": 4, "monosemantic": 5, "share_of_live": 0.25, "by_concept": '
    one += '{"token": 3, "previous": 2}, "token_groups": {"withdrawn": true, "mean": 1.5, '
    one += '"two_or_more": 7, "sim_threshold": 0.1234}, "entropy_bits_mean": 2.25, '
    one += '"top_token_share_mean": 0.5}'
    old = f'{{"layer": 1, "neurons": 24, "model": {one}, "shuffled": {one}, "k": 8}}'
    assert json.dumps(summary.to_dict()) == old
    assert neurons.LayerSummary.from_dict(json.loads(old)) == summary
