"""The sentences about probes, MLP twins and neurons are functions of the measurements:
hand-made measurements in, and the words change when the numbers do. Also the sections that
carry them, and how a study plans its MLP twins and controls."""

from __future__ import annotations

import dataclasses
import json
from html import escape

from findings_helpers import depth, neurons, rule_count

from interp_toolkit.measures.layers import (
    LatentCount,
    NeuronMeasurement,
    ProbeMeasurement,
    is_decodable,
)
from interp_toolkit.probing.probes import ProbeData, ProbeResult, ProbeRow
from interp_toolkit.reports.layer_findings import (
    block_phrase,
    latent_sentence,
    mlp_findings,
    mlp_sentence,
    neuron_sentence,
    probe_sentence,
)
from interp_toolkit.reports.layers_report import mlp_section, probes_section
from interp_toolkit.stats.thresholds import Thresholds
from interp_toolkit.views.page import render_report

CHANCE = 0.001
HALF = 0.02  # half-width of every made-up interval


def row(b: str, i: int, acc: float, untrained: float | None = 0.04) -> ProbeRow:
    ci = (round(acc - HALF, 4), round(acc + HALF, 4))
    untr_ci = None if untrained is None else (untrained - 0.01, untrained + 0.01)
    return ProbeRow(
        b, f"hook {b}", float(i), acc, ci, 0.5, (0.48, 0.52), round(acc - 0.5, 4), ci,
        untrained, untr_ci, CHANCE, acc, 0.032, 800, 200, 31,
    )  # fmt: skip


def result(accs: dict[str, float], ablated: tuple[str, ...] = (), **kw) -> ProbeResult:
    rows = [row(b, i, acc, **kw) for i, (b, acc) in enumerate(accs.items())]
    return ProbeResult("prev_token", "the token at p-1", DATA, rows, list(ablated), "t[p-1]")


DATA = ProbeData(256, 32, 0.2, 0, 1000, source="repeats")


TRAINED = {"embed": 0.033, "attn 0": 0.903, "attn 1": 0.445}
GONE = {"embed": 0.033, "attn 0": 0.030, "attn 1": 0.043}


def measurement(accs=TRAINED, ablated=GONE, heads=("0.0",), n_layers=2) -> ProbeMeasurement:
    abl = None if ablated is None else result(ablated, heads)
    return ProbeMeasurement("cpu-2l", n_layers, False, result(accs), abl)


def test_decodable_is_the_lower_bound_over_chance_and_the_untrained_model():
    """Decodable: the lower 95% bound >= chance + 0.5 (1 - chance); the page claims it only
    above the untrained model's upper bound. A binary feature (chance 0.5) can pass or fail."""
    r = dataclasses.replace(row("attn 0", 1, 0.8), chance=0.5, untrained=0.5)
    r = dataclasses.replace(r, balanced_ci=(0.75, 0.85), untrained_ci=(0.45, 0.55))
    assert is_decodable(r)  # a binary feature: the lower bound exactly at 0.75 counts
    assert not is_decodable(dataclasses.replace(r, balanced_ci=(0.7499, 0.85)))
    assert not is_decodable(r, Thresholds(decodable=0.6))
    # the untrained model reads it as well: no claim; not measured: no claim either
    assert not is_decodable(dataclasses.replace(r, untrained_ci=(0.7, 0.75)))
    assert not is_decodable(dataclasses.replace(r, untrained=None, untrained_ci=None))
    # the old rule (accuracy >= majority + 0.5) could never pass a binary feature of majority 0.75
    assert is_decodable(dataclasses.replace(r, majority=0.75, accuracy=0.8))


def test_probe_sentence_says_where_the_previous_token_appears_and_what_ablation_leaves():
    s = probe_sentence(measurement())
    assert "is not decodable beyond the untrained model in the embedding (0.033 [0.013, 0.053]" in s
    assert "first is after attn 0 (0.903 [0.883, 0.923]; untrained 0.040 [0.030, 0.050])" in s
    assert "previous-token head 0.0 mean-ablated it is 0.030 [0.010, 0.050] after attn 0" in s
    assert "decodable beyond the untrained model at no boundary (chance 0.001" in s
    assert s.endswith("and above the untrained model's upper bound).")
    # the ablation leaves it there: the sentence says so
    kept = probe_sentence(measurement(ablated={**GONE, "attn 0": 0.8}, heads=("0.0", "0.2")))
    assert "heads 0.0, 0.2 mean-ablated it is 0.800 [0.780, 0.820] after attn 0" in kept
    assert "still decodable beyond it after attn 0" in kept
    # a stricter threshold, and the same numbers read otherwise
    strict = probe_sentence(measurement(), Thresholds(decodable=0.9))
    assert "at no layer boundary (best after attn 0: 0.903 [0.883, 0.923]" in strict
    # first decodable later; decodable from the start
    later = probe_sentence(measurement(accs={**TRAINED, "attn 0": 0.3, "attn 1": 0.7}))
    assert "first is after attn 1 (0.700 [0.680, 0.720]" in later
    early = probe_sentence(measurement(accs={**TRAINED, "embed": 0.9}, ablated=None))
    assert "is decodable beyond the untrained model in the embedding (0.900" in early
    assert "first" not in early
    # an untrained model that reads it as well: the page makes no claim
    both = ProbeMeasurement("m", 2, False, result(TRAINED, untrained=0.9), None)
    assert "is decodable beyond an untrained model of the same architecture at no layer" in (
        probe_sentence(both)
    )


def test_probe_sentence_without_heads_to_ablate():
    none = probe_sentence(measurement(accs={k: 0.033 for k in TRAINED}, ablated=None))
    assert "at no layer boundary (best in the embedding: 0.033 [0.013, 0.053]; untrained" in none
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
    assert "route by path K-composition" in s
    earlier = mlp_sentence(dataclasses.replace(mlp, induction_step=300), twin)
    assert "50 steps earlier than attention-only (step 350)" in earlier
    same = mlp_sentence(dataclasses.replace(mlp, induction_step=350), twin)
    assert "at step 350, the same step as attention-only (step 350)" in same
    never = mlp_sentence(
        dataclasses.replace(mlp, induction_heads=(), induction_step=None, steps=1100), twin
    )
    assert "no induction head (best head 1.2 scores 0.91)" in never
    assert "no head's induction score passed 0.4 in 1100 steps" in never
    one = mlp_sentence(depth(1, name="cpu-1l-mlp"), depth(1))
    assert "1 layer with MLPs (cpu-1l-mlp): no induction head" in one
    assert "(attention-only twin: none)" in one and "route" not in one
    assert "passes 0 of 30 period exams" in one


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
    good = LatentCount(1, rule_count(150, 200), rule_count(20, 200), 200, 1000)
    s = latent_sentence("m", info, good)
    assert "30 of 100 live (30%) neurons (untrained twin 20 of 100 live (20%))" in s
    assert "and 150 of 200 live (75%) latents" in s and "beat the neurons" in s
    same = LatentCount(1, rule_count(62, 200), rule_count(60, 200), 200, 1000)
    assert "do not beat the neurons" in latent_sentence("m", info, same)
    twin = LatentCount(1, rule_count(150, 200), rule_count(150, 200), 200, 1000)
    assert "do not beat the untrained twin's latents" in latent_sentence("m", info, twin)


def test_sections_carry_the_sentences_and_the_json_is_plain():
    probe = measurement()
    mlp = depth(2, name="cpu-2l-mlp", induction_step=900)
    latents = (LatentCount(1, rule_count(150, 200), rule_count(20, 200), 200, 1000),)
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
    from interp_toolkit.training.presets import get_preset

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
