"""Known answers for attention SAEs on the study's trained 2-layer model (slow; fixtures from
conftest.py): an SAE on layer 1's ``hook_z`` has induction latents (decoder mostly the induction
heads, firing on the second copy of repeated text), one on layer 0's has previous-token latents.
The same SAEs trained the same way on the untrained model of the same config find none, with the
trained model's heads given to them: the rules can fail (saes/roles.py). The monosemanticity rule
(units/reading.py) is checked against its controls on the same SAEs: the untrained model's latents
and the shuffled control (each latent's top values on random positions) fail it, the trained
layer-0 latents beat both, and on layer 1 the rule without its lift (the old rule) calls most
latents monosemantic where the rule calls almost none (docs/dictionaries.md has the numbers)."""

from __future__ import annotations

import pytest

from interp_toolkit.heads.discovery import discover_heads
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.probing.data import varied_repeats
from interp_toolkit.saes.options import SAEOptions
from interp_toolkit.saes.pipeline import run_sae
from interp_toolkit.saes.roles import induction_latents, previous_token_latents
from interp_toolkit.stats.thresholds import SECOND_COPY
from interp_toolkit.units.reading import RuleCount, beats

pytestmark = pytest.mark.slow

#: Training activations per SAE (a few seconds of training each on 2 cores).
TOKENS = 262_144
#: Latents each rule must find on the trained model (dictionaries.md lists what was seen).
MIN_FOUND = 2
#: The most an untrained model's latents may be monosemantic (a share of the live ones).
CONTROL_SHARE = 0.02


def _rule(res):
    """(the rule's count, the shuffled control's, the old rule's count: the rule without lift)."""
    old = sum(c.holds for c in res.features.concepts)
    return RuleCount.of(res.features.concepts), RuleCount.of(res.features.shuffled), old


@pytest.fixture(scope="module")
def roles_2l(trained_2l):
    report = discover_heads(
        trained_2l.model,
        trained_2l.codec,
        DiscoveryOptions(n_seqs=64, seed=0),
        model_cfg=trained_2l.model_cfg,
    )
    induction = sorted(h.head for h in report.heads_with_role("induction") if h.layer == 1)
    previous = sorted(h.head for h in report.heads_with_role("previous-token") if h.layer == 0)
    assert induction and previous, report.to_dict()["roles"]
    return {"induction": induction, "previous": previous}


@pytest.fixture(scope="module")
def untrained_2l(trained_2l):
    from interp_toolkit.models.build import build_model

    return build_model(trained_2l.model_cfg)


def _sae(model, run, hook, folder):
    opts = SAEOptions(hook, expansion=8, k=16, tokens=TOKENS, quiet=True)
    return run_sae(model, run.codec, run, folder, opts)


@pytest.fixture(scope="module")
def repeats(trained_2l):
    return varied_repeats(trained_2l.codec, seq_len=trained_2l.model_cfg.n_ctx, n_seqs=256, seed=1)


def test_layer_1_attention_sae_has_induction_latents(
    trained_2l, untrained_2l, roles_2l, repeats, tmp_path
):
    heads = roles_2l["induction"]
    res = _sae(trained_2l.model, trained_2l, "blocks.1.attn.hook_z", tmp_path / "l1")
    found = induction_latents(trained_2l.model, res.sae, res.features, heads, repeats)
    detail = {
        "found": found,
        "evals": res.metrics.evals().to_dict()["model_performance_preservation"],
        "described": [res.features.descriptions[i] for i in found.latents],
    }
    assert len(found.latents) >= MIN_FOUND, detail
    assert min(found.head_share) > found.floor and min(found.second_copy) >= SECOND_COPY, detail
    assert res.metrics.ce_loss_score > 0.5, detail  # the SAE stands in for the layer
    blank = _sae(untrained_2l, trained_2l, "blocks.1.attn.hook_z", tmp_path / "u1")
    none = induction_latents(untrained_2l, blank.sae, blank.features, heads, repeats)
    assert none.latents == (), none
    (mono, shuffled, old), (control, _, _) = _rule(res), _rule(blank)
    rule = {"trained": mono, "shuffled": shuffled, "old rule": old, "untrained": control}
    assert old > 0.5 * mono.live and mono.share < 0.05, rule  # the lift rejects "seen" latents
    assert shuffled.monosemantic == 0 and control.share <= CONTROL_SHARE, rule


def test_layer_0_attention_sae_has_previous_token_latents(
    trained_2l, untrained_2l, roles_2l, tmp_path
):
    heads = roles_2l["previous"]
    res = _sae(trained_2l.model, trained_2l, "blocks.0.attn.hook_z", tmp_path / "l0")
    found = previous_token_latents(res.sae, res.features, heads)
    detail = {"found": found, "described": [res.features.descriptions[i] for i in found.latents]}
    assert len(found.latents) >= MIN_FOUND, detail
    assert all("fires after" in res.features.descriptions[i] for i in found.latents), detail
    blank = _sae(untrained_2l, trained_2l, "blocks.0.attn.hook_z", tmp_path / "u0")
    none = previous_token_latents(blank.sae, blank.features, heads)
    assert none.latents == (), none
    (mono, shuffled, _), (control, control_shuffled, _) = _rule(res), _rule(blank)
    rule = {"trained": mono, "shuffled": shuffled, "untrained": control}
    assert shuffled.monosemantic == 0 and control_shuffled.monosemantic == 0, rule
    assert control.share <= CONTROL_SHARE, rule
    assert beats(mono, control) and beats(mono, shuffled), rule
