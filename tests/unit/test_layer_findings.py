"""The sentences about probes, MLP twins and neurons are functions of the measurements:
hand-made measurements in, and the words change when the numbers do. Also the sections that
carry them, and how a study plans its MLP twins and controls."""

from __future__ import annotations

import dataclasses
import json
from html import escape

import torch
from test_findings import depth

from interp_toolkit.analysis.neurons import LayerNeurons, NeuronStats
from interp_toolkit.analysis.probes import ProbeResult, ProbeRow
from interp_toolkit.analysis.routes import Thresholds
from interp_toolkit.analysis.units import Concept, RuleCount, TopActivations
from interp_toolkit.reports.layer_findings import (
    LatentCount,
    NeuronMeasurement,
    ProbeMeasurement,
    block_phrase,
    is_decodable,
    latent_sentence,
    mlp_findings,
    mlp_sentence,
    neuron_sentence,
    probe_sentence,
)
from interp_toolkit.reports.layers_report import mlp_section, probes_section
from interp_toolkit.views.page import render_report

MAJORITY = 0.032


def result(accs: dict[str, float], ablated: tuple[str, ...] = ()) -> ProbeResult:
    rows = [
        ProbeRow(b, f"hook {b}", float(i), acc, 0.9, round(acc - 0.9, 4), MAJORITY, 800, 200, 31)
        for i, (b, acc) in enumerate(accs.items())
    ]
    return ProbeResult("prev_token", "the token at p-1", {"source": "repeats"}, rows, list(ablated))


TRAINED = {"embed": 0.033, "attn 0": 0.903, "attn 1": 0.445}
GONE = {"embed": 0.033, "attn 0": 0.030, "attn 1": 0.043}


def measurement(accs=TRAINED, ablated=GONE, heads=("0.0",), n_layers=2) -> ProbeMeasurement:
    abl = None if ablated is None else result(ablated, heads)
    return ProbeMeasurement("cpu-2l", n_layers, False, result(accs), abl)


def test_decodable_is_accuracy_over_the_majority_by_the_threshold():
    row = result({"attn 0": MAJORITY + 0.5}).rows[0]
    assert is_decodable(row)  # exactly at the threshold counts
    assert not is_decodable(dataclasses.replace(row, accuracy=MAJORITY + 0.499))
    assert not is_decodable(row, Thresholds(decodable=0.6))


def test_probe_sentence_says_where_the_previous_token_appears_and_what_ablation_leaves():
    s = probe_sentence(measurement())
    assert "is not decodable in the embedding (0.033; majority 0.032)" in s
    assert "first decodable after attn 0 (0.903)" in s
    assert "previous-token head 0.0 mean-ablated it is 0.030 after attn 0" in s
    assert s.endswith("decodable at no boundary (decodable: accuracy ≥ majority + 0.5).")
    # the ablation leaves it there: the sentence says so
    kept = probe_sentence(measurement(ablated={**GONE, "attn 0": 0.8}, heads=("0.0", "0.2")))
    assert "heads 0.0, 0.2 mean-ablated it is 0.800 after attn 0" in kept
    assert "still decodable after attn 0" in kept
    # a stricter threshold, and the same numbers read otherwise
    strict = probe_sentence(measurement(), Thresholds(decodable=0.9))
    assert "decodable at no layer boundary (best 0.903 after attn 0" in strict
    # first decodable later; decodable from the start
    later = probe_sentence(measurement(accs={**TRAINED, "attn 0": 0.3, "attn 1": 0.7}))
    assert "first decodable after attn 1 (0.700)" in later
    early = probe_sentence(measurement(accs={**TRAINED, "embed": 0.9}, ablated=None))
    assert "is decodable in the embedding (0.900" in early and "first" not in early


def test_probe_sentence_without_heads_to_ablate():
    none = probe_sentence(measurement(accs={k: 0.033 for k in TRAINED}, ablated=None))
    assert "decodable at no layer boundary (best 0.033 in the embedding; majority 0.032)" in none
    assert "ablated" not in none
    no_role = probe_sentence(measurement(ablated=None))
    assert "no layer-0 head has the previous-token role, so none was ablated" in no_role


def test_mlp_sentence_compares_with_the_attention_only_twin():
    twin = depth(2)  # induction at step 350
    mlp = depth(2, name="cpu-2l-mlp", induction_heads=("1.1",), induction_step=900, val_loss=1.9)
    s = mlp_sentence(mlp, twin)
    assert s.startswith(
        "2 layers with MLPs (cpu-2l-mlp): induction head 1.1 (attention-only twin: 1.0, 1.2)"
    )
    assert "first passed 0.4 at step 900, 550 steps later than attention-only (step 350)" in s
    assert "held-out loss 1.900 (attention-only 2.300)" in s
    assert "route K-composition" in s
    earlier = mlp_sentence(dataclasses.replace(mlp, induction_step=300), twin)
    assert "50 steps earlier than attention-only (step 350)" in earlier
    same = mlp_sentence(dataclasses.replace(mlp, induction_step=350), twin)
    assert "at step 350, the same step as attention-only (step 350)" in same
    never = mlp_sentence(
        dataclasses.replace(mlp, induction_heads=(), induction_step=None, steps=1100), twin
    )
    assert "no induction head (best 1.2: 0.91)" in never
    assert "no head's induction score passed 0.4 in 1100 steps" in never
    one = mlp_sentence(depth(1, name="cpu-1l-mlp"), depth(1))
    assert "1 layer with MLPs (cpu-1l-mlp): no induction head" in one
    assert "(attention-only twin: none)" in one and "route" not in one
    assert "no period is above chance" in one


def _stats(mono: int, live: int, n: int, k: int, groups: int = 1) -> NeuronStats:
    """``n`` neurons: ``mono`` monosemantic, ``live - mono`` not, the rest dead."""
    top = TopActivations(
        torch.ones(n, k), torch.zeros(n, k, dtype=torch.long), torch.zeros(n, k, dtype=torch.long)
    )
    concepts = [Concept("token", 4, 1.0, 0.01, 1e-9, True)] * mono
    concepts += [Concept("token", 4, 0.5, 0.01, 1e-3, False)] * (live - mono)
    concepts += [Concept("token", -1, 0.0, 0.0, 1.0, False, dead=True)] * (n - live)
    grp = torch.tensor([groups] * live + [0] * (n - live))
    return NeuronStats(top, torch.zeros(n, k, dtype=torch.long), concepts, grp, torch.ones(n), 0.2)


def neurons(model=(60, 100), untrained=(20, 100), shuffled=(0, 100), n=100, k=20) -> LayerNeurons:
    stats = {
        "model": _stats(*model, n, k),
        "untrained": _stats(*untrained, n, k, groups=3),
        "shuffled": _stats(*shuffled, n, k, groups=4),
    }
    return LayerNeurons(1, stats, torch.zeros(n, 3, dtype=torch.long), torch.zeros(n, 3))


def test_neuron_sentence_claims_only_what_beats_both_baselines():
    win = neuron_sentence("cpu-2l-mlp", neurons())
    assert win.startswith("cpu-2l-mlp layer 1: 60 of 100 live (60%) neurons are monosemantic")
    assert "untrained twin 20 of 100 live (20%), shuffled activations 0 of 100 live (0%)" in win
    assert "2+ token groups, the untrained twin 100" in win  # the withdrawn count, re-measured
    lose = neuron_sentence("m", neurons(model=(22, 100)))
    assert "does not beat the untrained twin" in lose and "no claim" in lose
    assert "are monosemantic" not in lose
    odd = neuron_sentence("m", neurons(model=(10, 100), untrained=(0, 100), shuffled=(9, 100)))
    assert "does not beat shuffled activations" in odd


def test_latent_sentence_sets_latents_against_neurons_and_the_untrained_twin():
    info = neurons(model=(30, 100))
    good = LatentCount(1, _count(150, 200), _count(20, 200), 200, 1000)
    s = latent_sentence("m", info, good)
    assert "30 of 100 live (30%) neurons (untrained twin 20 of 100 live (20%))" in s
    assert "and 150 of 200 live (75%) latents" in s and "beat the neurons" in s
    same = LatentCount(1, _count(62, 200), _count(60, 200), 200, 1000)
    assert "do not beat the neurons" in latent_sentence("m", info, same)
    twin = LatentCount(1, _count(150, 200), _count(150, 200), 200, 1000)
    assert "do not beat the untrained twin's latents" in latent_sentence("m", info, twin)


def _count(mono: int, live: int) -> RuleCount:
    return RuleCount(units=live, dead=0, monosemantic=mono, by_kind={})


def test_sections_carry_the_sentences_and_the_json_is_plain():
    probe = measurement()
    mlp = depth(2, name="cpu-2l-mlp", induction_step=900)
    latents = (LatentCount(1, _count(150, 200), _count(20, 200), 200, 1000),)
    layer = NeuronMeasurement("cpu-2l-mlp", (neurons(),), latents)
    html = render_report(
        [
            probes_section([probe]),
            mlp_section([(mlp, depth(2))], [layer], curves={}, block="an MLP of 8 RELU neurons"),
        ]
    )
    for line in [probe_sentence(probe), *mlp_findings([(mlp, depth(2))], [layer])]:
        assert escape(line) in html
    assert "cpu-2l, 0.0 ablated" in html and "Models with MLPs" in html
    d = json.loads(json.dumps([probe.to_dict(), layer.to_dict()]))
    assert d[0]["ablated"]["ablated"] == ["0.0"] and d[1]["layers"][0]["k"] == 20
    assert d[1]["layers"][0]["model"]["monosemantic"] == 60
    assert d[1]["layers"][0]["untrained"]["token_groups"]["two_or_more"] == 100
    assert d[1]["latents"][0]["model"]["monosemantic"] == 150
    assert "SAE latents, untrained twin" in html


def test_block_phrase_reads_the_config():
    from interp_toolkit.presets import get_preset

    assert block_phrase(get_preset("cpu", 2, mlp=True).model) == (
        "an MLP of 512 GELU neurons and pre-norm LayerNorm"
    )
    relu = get_preset("cpu", 1).model.replace(mlp=True, d_mlp=8, act_fn="relu")
    assert block_phrase(relu) == "an MLP of 8 RELU neurons"
    section = mlp_section([(depth(2, name="m"), depth(2))], [], curves={}, block=block_phrase(relu))
    assert section.intro.startswith(
        "Each MLP model is its attention-only twin (same data, seed, "
        "optimiser and stopping rule) with an MLP of 8 RELU neurons in"
    )
