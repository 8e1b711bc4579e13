"""Shortformer positions (models.install_shortformer): positions enter only queries and keys.

Known answers: a forward written out by hand from the weights; values and the residual stream
that carry no position; the same model through the fused training step, run_with_cache, save/load
and deepcopy."""

import copy
import json
import math

import pytest
import torch

from interp_toolkit.models.build import (
    build_model,
    is_shortformer,
    positional_kind,
)
from interp_toolkit.runs.folder import load_run, save_run
from interp_toolkit.text.codecs import CompactVocab
from interp_toolkit.training import sdpa


@pytest.fixture
def sf_cfg(tiny_cfg):
    return tiny_cfg.replace(positional="shortformer")


@pytest.fixture
def sf_model(sf_cfg):
    return build_model(sf_cfg)


@pytest.fixture
def tokens(tiny_cfg):
    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, tiny_cfg.d_vocab, (3, tiny_cfg.n_ctx), generator=gen)


def _linear(module):
    return module.original_component


def hand_forward(model, tokens, *, positions_in_residual=False):
    """The shortformer forward from the weights (ARENA / HookedTransformer's shortformer):
    queries and keys read ``x + W_pos``, values read ``x``; the residual starts at ``W_E[tok]``.
    ``positions_in_residual=True`` is the standard model instead (the planted negative)."""
    b, s = tokens.shape
    n_heads, d_head = int(model.cfg.n_heads), int(model.cfg.d_head)
    w_pos = model.pos_embed.original_component.weight[:s]
    x = model.embed.original_component.weight[tokens]
    if positions_in_residual:
        x = x + w_pos
    patterns = []
    for block in model.blocks:
        attn = block.attn
        qk_in = x if positions_in_residual else x + w_pos

        def heads(t):
            return t.view(b, s, n_heads, d_head).transpose(1, 2)

        q, k, v = (
            heads(_linear(attn.q)(qk_in)),
            heads(_linear(attn.k)(qk_in)),
            heads(_linear(attn.v)(x)),
        )
        scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        pattern = scores.masked_fill(mask, float("-inf")).softmax(-1)
        patterns.append(pattern)
        x = x + _linear(attn.o)((pattern @ v).transpose(1, 2).reshape(b, s, -1))
    return _linear(model.unembed)(x), patterns


def test_logits_and_patterns_are_the_hand_written_shortformer(sf_model, tokens):
    with torch.no_grad():
        want, want_patterns = hand_forward(sf_model, tokens)
        logits, cache = sf_model.run_with_cache(tokens)
        standard, _ = hand_forward(sf_model, tokens, positions_in_residual=True)
    torch.testing.assert_close(logits, want, rtol=0, atol=1e-5)
    for layer, pattern in enumerate(want_patterns):
        torch.testing.assert_close(cache["pattern", layer], pattern, rtol=0, atol=1e-6)
    # the planted negative: positions in the residual stream give other logits
    assert (standard - want).abs().max() > 1e-2
    assert is_shortformer(sf_model) and positional_kind(sf_model) == "shortformer"


def test_a_standard_model_is_not_a_shortformer(tiny_model, tokens):
    with torch.no_grad():
        want, _ = hand_forward(tiny_model, tokens, positions_in_residual=True)
        torch.testing.assert_close(tiny_model(tokens), want, rtol=0, atol=1e-5)
    assert not is_shortformer(tiny_model) and positional_kind(tiny_model) == "standard"


def test_values_and_residual_carry_no_position(sf_model, tiny_cfg):
    # one token at every position: without positions its residual and values are all the same
    tokens = torch.full((1, tiny_cfg.n_ctx), 5)
    with torch.no_grad():
        _, cache = sf_model.run_with_cache(tokens)
    resid0 = cache["resid_pre", 0][0]
    torch.testing.assert_close(
        resid0, sf_model.embed.original_component.weight[5].expand_as(resid0)
    )
    assert cache["hook_pos_embed"].abs().max() == 0
    v0 = cache["v", 0][0]  # [pos, head, d_head]
    assert (v0 - v0[0]).abs().max() < 1e-6
    q0 = cache["q", 0][0]  # queries do carry the position
    assert (q0 - q0[0]).abs().max() > 1e-2


def test_changing_w_pos_moves_patterns_not_layer0_values(sf_model, tokens):
    with torch.no_grad():
        _, before = sf_model.run_with_cache(tokens)
        sf_model.pos_embed.original_component.weight.mul_(-1.5)
        _, after = sf_model.run_with_cache(tokens)
    assert (after["pattern", 0] - before["pattern", 0]).abs().max() > 1e-2
    torch.testing.assert_close(after["v", 0], before["v", 0], rtol=0, atol=0)
    torch.testing.assert_close(after["resid_pre", 0], before["resid_pre", 0], rtol=0, atol=0)


def _loss_and_grads(model, tokens):
    model.zero_grad()
    loss = model(tokens, return_type="loss")
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_the_fused_training_step_equals_the_exact_one(sf_model, tokens, monkeypatch):
    calls = []
    real = sdpa.F.scaled_dot_product_attention
    monkeypatch.setattr(
        sdpa.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    sf_model.train()
    loss, grads = _loss_and_grads(sf_model, tokens)
    with sdpa.fused_attention(sf_model):
        fused_loss, fused_grads = _loss_and_grads(sf_model, tokens)
    assert len(calls) == sf_model.cfg.n_layers  # the fused path ran
    torch.testing.assert_close(fused_loss, loss, rtol=0, atol=1e-5)
    for name, g in grads.items():
        torch.testing.assert_close(fused_grads[name], g, rtol=1e-4, atol=1e-6)
    pos_grad = grads["pos._original_component.weight"]
    assert pos_grad.abs().max() > 0  # positions learn through queries and keys only


def test_hooks_survive_reset_and_deepcopy_uses_its_own_weights(sf_model, tokens):
    with torch.no_grad():
        want = sf_model(tokens)
        sf_model.reset_hooks(including_permanent=True)
        torch.testing.assert_close(sf_model(tokens), want, rtol=0, atol=0)
        twin = copy.deepcopy(sf_model)
        twin.pos_embed.original_component.weight.mul_(2.0)
        expected_twin, _ = hand_forward(twin, tokens)
        torch.testing.assert_close(twin(tokens), expected_twin, rtol=0, atol=1e-5)
        torch.testing.assert_close(sf_model(tokens), want, rtol=0, atol=0)


def test_save_load_round_trip(sf_model, sf_cfg, tokens, tmp_path):
    codec = CompactVocab(list(range(sf_cfg.d_vocab - 2)) + [50256])
    save_run(tmp_path / "run", sf_model, codec, sf_cfg)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["positional"] == "shortformer"
    loaded = load_run(tmp_path / "run", device="cpu").model
    assert is_shortformer(loaded)
    with torch.no_grad():
        assert torch.equal(loaded(tokens), sf_model(tokens))


def test_folders_without_the_field_load_with_standard_positions(tiny_model, tiny_cfg, tmp_path):
    codec = CompactVocab(list(range(tiny_cfg.d_vocab - 2)) + [50256])
    save_run(tmp_path / "run", tiny_model, codec, tiny_cfg)
    path = tmp_path / "run" / "config.json"
    config = json.loads(path.read_text())
    del config["model"]["positional"]  # written before positional schemes were recorded
    path.write_text(json.dumps(config))
    loaded = load_run(tmp_path / "run", device="cpu").model
    assert not is_shortformer(loaded)
    tokens = torch.randint(0, tiny_cfg.d_vocab, (2, tiny_cfg.n_ctx))
    with torch.no_grad():
        assert torch.equal(loaded(tokens), tiny_model(tokens))


def test_untrained_models_of_a_shortformer_are_shortformers(sf_model):
    from interp_toolkit.heads.untrained import untrained_models

    pool = untrained_models(sf_model, n_models=2)  # no run config: rebuilt from the bridge
    assert pool is not None and "shortformer" in pool.architecture
    assert is_shortformer(pool.make(pool.seeds[0]))
