"""Sampling text from a trained model (temperature, top-k, seeded)."""

from __future__ import annotations

import torch
from transformer_lens import TransformerBridge

from interp_toolkit import validate
from interp_toolkit.errors import UserError
from interp_toolkit.tokenizer import Codec


def sample(
    model: TransformerBridge,
    codec: Codec,
    prompt: str = "",
    *,
    n_tokens: int = 40,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> str:
    """Continue ``prompt`` by ``n_tokens`` tokens; returns prompt + continuation as text.

    The prompt starts with ``<|endoftext|>`` (how training windows start documents). Generation
    slides a window of n_ctx tokens. The model runs on its device; the draws are on the CPU, so a
    seed gives the same text on every device (up to float differences in the logits).
    """
    n_ctx = int(model.cfg.n_ctx)
    if n_tokens < 0:
        raise UserError(f"--tokens {n_tokens} must be >= 0.")
    if temperature < 0:
        raise UserError(f"--temperature {temperature} must be >= 0.")
    if top_k is not None and top_k < 1:
        raise UserError(f"--top-k {top_k} must be >= 1.")
    ids = [codec.bos_id] + codec.encode(prompt)
    if len(ids) > n_ctx:
        raise UserError(
            f"the prompt is {len(ids) - 1} tokens but the model's context is {n_ctx} (with BOS): shorten the prompt."
        )
    validate.in_vocab(ids, int(model.cfg.d_vocab), "prompt")
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    out: list[int] = []
    with torch.no_grad():
        for _ in range(n_tokens):
            window = torch.tensor([(ids + out)[-n_ctx:]], device=device)
            logits = model(window)[0, -1].float().cpu()  # seeded draws on the CPU: any device
            if codec.unk_id is not None:
                logits[codec.unk_id] = -float("inf")
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                    logits = logits.masked_fill(logits < kth, -float("inf"))
                nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            out.append(nxt)
    return prompt + codec.decode(out)
