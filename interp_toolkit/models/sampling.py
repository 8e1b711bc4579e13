"""Sampling text from a trained model (temperature, top-k, seeded), whole or streamed.

:func:`sample_ids` checks its arguments at once and returns a generator of the new token ids, so
a caller can print the text as it comes (:func:`decode_stream`) and stop at any point (Ctrl-C):
the command line streams, and nothing bounds ``n_tokens`` but the user's patience.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.text.codecs import Codec

#: Ids held back at most while their text ends inside a character (a byte-level BPE may split one).
MAX_PENDING = 8


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
    ids = sample_ids(
        model, codec, prompt, n_tokens=n_tokens, temperature=temperature, top_k=top_k, seed=seed
    )
    return prompt + codec.decode(list(ids))


def sample_ids(
    model: TransformerBridge,
    codec: Codec,
    prompt: str = "",
    *,
    n_tokens: int = 40,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> Iterator[int]:
    """The ids :func:`sample` decodes, one at a time (arguments checked before the first)."""
    n_tokens = validate.count(n_tokens, "n_tokens", least=0)
    temperature = validate.temperature(temperature)
    seed = validate.seed(seed)
    top_k = validate.count(top_k, "top_k", optional=True)
    n_ctx = int(model.cfg.n_ctx)
    ids = [codec.bos_id] + codec.encode(prompt)
    if len(ids) > n_ctx:
        raise UserError(
            f"the prompt is {len(ids) - 1} tokens but the model's context is {n_ctx} (with BOS): shorten the prompt."
        )
    validate.in_vocab(ids, int(model.cfg.d_vocab), "prompt")
    return _draws(model, codec, ids, n_tokens, temperature, top_k, seed)


def _draws(
    model: TransformerBridge,
    codec: Codec,
    ids: list[int],
    n_tokens: int,
    temperature: float,
    top_k: int | None,
    seed: int,
) -> Iterator[int]:
    n_ctx = int(model.cfg.n_ctx)
    gen = rng(seed, "sampling")
    device = next(model.parameters()).device
    ids = list(ids)
    with torch.no_grad():
        for _ in range(n_tokens):
            window = torch.tensor([ids[-n_ctx:]], device=device)
            logits = model(window)[0, -1].double().cpu()  # seeded draws on the CPU: any device
            if codec.unk_id is not None:
                logits[codec.unk_id] = -float("inf")
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                # float64, shifted so the largest is 0: any temperature > 0 divides without NaN
                logits = (logits - logits.max()) / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                    logits = logits.masked_fill(logits < kth, -float("inf"))
                nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            ids.append(nxt)
            yield nxt


def decode_stream(codec: Codec, ids: Iterable[int]) -> Iterator[str]:
    """Text pieces as ``ids`` arrive, joined equal to ``codec.decode(ids)`` for text that ends
    whole: a piece ending inside a character waits for the ids that complete it (at most
    :data:`MAX_PENDING`)."""
    pending: list[int] = []
    for i in ids:
        pending.append(i)
        text = codec.decode(pending)
        if not text.endswith("\ufffd") or len(pending) >= MAX_PENDING:
            pending = []
            yield text
    if pending:
        yield codec.decode(pending)
