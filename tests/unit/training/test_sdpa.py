"""Fused attention in training steps (interp_toolkit.training.sdpa): same results, exact patterns
whenever anything hooks them, TransformerLens's forward restored afterwards."""

import pytest
import torch

from interp_toolkit.training import sdpa


@pytest.fixture
def tokens(tiny_cfg):
    return torch.randint(
        0, tiny_cfg.d_vocab, (3, tiny_cfg.n_ctx), generator=torch.Generator().manual_seed(0)
    )


@pytest.fixture
def sdpa_calls(monkeypatch):
    calls = []
    real = sdpa.F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sdpa.F, "scaled_dot_product_attention", counted)
    return calls


def _loss_and_grads(model, tokens):
    model.zero_grad()
    loss = model(tokens, return_type="loss")
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_fused_steps_match_the_explicit_softmax(tiny_model, tokens, sdpa_calls):
    tiny_model.train()
    loss, grads = _loss_and_grads(tiny_model, tokens)
    with sdpa.fused_attention(tiny_model):
        fused_loss, fused_grads = _loss_and_grads(tiny_model, tokens)
    assert len(sdpa_calls) == tiny_model.cfg.n_layers  # the fused path really ran
    # float32 rounding only: a wrong scale or a missing causal mask moves these by > 1e-2
    torch.testing.assert_close(fused_loss, loss, rtol=0, atol=1e-5)
    for name, g in grads.items():
        torch.testing.assert_close(fused_grads[name], g, rtol=1e-4, atol=1e-6)


def test_hooked_patterns_stay_exact(tiny_model, tokens, sdpa_calls):
    def patterns():
        seen = []
        hooks = [
            (f"blocks.{i}.attn.hook_pattern", lambda t, hook: seen.append(t.detach().clone()))
            for i in range(tiny_model.cfg.n_layers)
        ]
        with torch.no_grad():
            logits = tiny_model.run_with_hooks(tokens, fwd_hooks=hooks)
        return logits, seen

    want_logits, want = patterns()
    with sdpa.fused_attention(tiny_model):
        got_logits, got = patterns()
    assert sdpa_calls == []  # every hooked layer ran TransformerLens's own forward
    assert len(got) == len(want) == tiny_model.cfg.n_layers
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch.equal(got_logits, want_logits)


def test_the_native_forward_is_restored(tiny_model, tokens, sdpa_calls):
    natives = [block.attn.original_component for block in tiny_model.blocks]
    with sdpa.fused_attention(tiny_model):
        assert all("forward" in vars(n) for n in natives)
    assert all("forward" not in vars(n) for n in natives)
    with torch.no_grad():
        tiny_model(tokens)
    assert sdpa_calls == []


def test_under_bf16_autocast_steps_run_in_bf16_and_read_patterns_stay_float32(
    tiny_model, tokens, sdpa_calls
):
    """bf16 autocast on the CPU: an unhooked layer's attention runs its matmuls in bf16 (not
    torch's slow bf16 SDPA); a layer whose pattern a hook reads runs TransformerLens's forward in
    float32, so the pattern read (layer 0: its input is the float32 embedding) equals the float32
    one bit for bit (under autocast its softmax would see bf16 scores)."""
    seen = []
    hooks = [("blocks.0.attn.hook_pattern", lambda t, hook: seen.append(t.detach().clone()))]
    with torch.no_grad():
        tiny_model.run_with_hooks(tokens, fwd_hooks=hooks)
    want = seen.pop()
    z_dtypes = []
    z_hook = ("blocks.1.attn.hook_z", lambda t, hook: z_dtypes.append(t.dtype))
    with sdpa.fused_attention(tiny_model), torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            tiny_model.run_with_hooks(tokens, fwd_hooks=[*hooks, z_hook])
    assert sdpa_calls == [] and z_dtypes == [torch.bfloat16]  # layer 1: bf16 matmuls
    assert seen[0].dtype == torch.float32 and torch.equal(seen[0], want)


def test_cpu_bf16_attention_is_causal_attention_up_to_bf16_rounding():
    """_bf16_cpu_attention against float32 SDPA on the same (bf16-valued) inputs: they differ by
    bf16 rounding of the scores and pattern (< 2%); a missing mask or a wrong scale moves the
    output by tens of percent."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=gen).bfloat16() for _ in range(3))
    got = sdpa._bf16_cpu_attention(q, k, v, 8**-0.5)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True
    )
    assert got.dtype == torch.bfloat16
    err = float((got.float() - want).abs().max() / want.abs().max())
    assert err < 0.02, err
    no_mask = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert float((no_mask - want).abs().max() / want.abs().max()) > 0.2  # what 2% must exclude


def test_cpu_bf16_attention_takes_a_bf16_softmax_from_its_threshold_on():
    """From CPU_BF16_SOFTMAX_FROM keys on, the softmax takes the bf16 scores (plain PyTorch under
    autocast; torch's CPU kernel accumulates in float32 and rounds the pattern, which the float32
    softmax rounded too before the value matmul); one key fewer, the scores cast to float32. Both
    are causal attention up to bf16 rounding (a missing mask or scale moves them by > 20%)."""
    n = sdpa.CPU_BF16_SOFTMAX_FROM
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, n, 8, generator=gen).bfloat16() for _ in range(3))
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    scores = (q @ k.transpose(-1, -2)) * 8**-0.5
    bf16_softmax = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
    got = sdpa._bf16_cpu_attention(q, k, v, 8**-0.5)
    assert got.dtype == torch.bfloat16 and torch.equal(got, bf16_softmax)
    short = sdpa._bf16_cpu_attention(q[..., 1:, :], k[..., 1:, :], v[..., 1:, :], 8**-0.5)
    want_short = _exact(q[..., 1:, :], k[..., 1:, :], v[..., 1:, :])
    for out, want in ((got, _exact(q, k, v)), (short, want_short)):
        err = float((out.float() - want).abs().max() / want.abs().max())
        assert err < 0.02, err


def _exact(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True
    )


def test_a_shortformer_adds_its_positions_to_the_projections_input_when_fused(tiny_cfg):
    """Fused, a shortformer's q/k projections read x + positions (its output hooks do not run);
    the step's loss and gradients equal TransformerLens's own forward (the hooks adding
    positions @ W) up to float32 rounding. A user's hook on hook_q sends the layer back
    through the hooks."""
    from interp_toolkit.models import build

    cfg = tiny_cfg.replace(positional="shortformer")
    model = build.build_model(cfg).train()
    tokens = torch.randint(0, 64, (3, 32), generator=torch.Generator().manual_seed(0))
    loss, grads = _loss_and_grads(model, tokens)
    calls = []
    real = build._add_positions
    build_hooks = [block.attn.q.hook_out._forward_hooks for block in model.blocks] + [
        block.attn.k.hook_out._forward_hooks for block in model.blocks
    ]
    assert all(list(h.values()) == [real] for h in build_hooks)
    with sdpa.fused_attention(model):
        for h in build_hooks:  # count the output hooks' calls (the fused path skips them)
            key = next(iter(h))
            h[key] = lambda *a, _r=real: (calls.append(1), _r(*a))[1]
        positions = build.qk_positions(model.blocks[0].attn.q, model.blocks[0].attn.k)
        assert positions is None  # the counting wrappers are "something else"
        for h in build_hooks:
            h[next(iter(h))] = real
        fused_loss, fused_grads = _loss_and_grads(model, tokens)
        assert calls == []
        torch.testing.assert_close(fused_loss, loss, rtol=0, atol=1e-5)
        for name, g in grads.items():
            torch.testing.assert_close(fused_grads[name], g, rtol=1e-4, atol=1e-5)
        seen = []
        hook = ("blocks.1.attn.hook_q", lambda t, hook: seen.append(t.shape))
        with model.hooks(fwd_hooks=[hook]):
            hooked_loss = model(tokens, return_type="loss")
        assert seen and torch.allclose(hooked_loss, loss, atol=1e-5)
