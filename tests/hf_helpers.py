"""Hugging Face test models of many architectures, built offline with ``transformers``.

- :func:`build_arch_dirs`: a tiny random-weight model of each architecture in
  :data:`ARCHITECTURES` (2 layers, d_model 32-64), saved with ``save_pretrained`` plus a byte-level
  BPE tokenizer trained here (:func:`train_bpe`, 384 ids, every letter with its space one token).
- :func:`build_planted_llama` (rotary positions, grouped-query attention, RMSNorm) and
  :func:`build_planted_gpt2` (learned positions, LayerNorm, one K/V per head): two families with
  known heads, weights set by hand, a word-level tokenizer of 32 tokens (``<bos>``, ``A``..``Z``,
  ``0``..``4``). In each, layer 0 has one previous-token head and layer 1 one induction head
  (K-composition: it matches its query token with the token the previous-token head wrote at each
  key, and copies the key's token to the logits); every other head attends uniformly and writes
  nothing, and the MLPs write nothing.

Residual layout of the planted models (one-hot blocks, so matches are exact): ``TOK`` (the
token), ``PREV`` (the previous token, written by the previous-token head), ``OUT`` (what the
induction head copies; the unembedding reads it), and a position block (GPT-2's sinusoids, or a
constant dimension the rotary previous-token head turns into relative position).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

VOCAB = ["<bos>", *(chr(c) for c in range(ord("A"), ord("Z") + 1)), *"01234"]
V = len(VOCAB)  # 32
N_CTX = 64
#: (layer, head) of the planted heads in both families.
PLANTED_PREV = {"llama": (0, 0), "gpt2": (0, 3)}
PLANTED_INDUCTION = {"llama": (1, 2), "gpt2": (1, 1)}


def _quiet() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


# ----------------------------------------------------------------------------- tokenizers


def save_word_tokenizer(folder: Path) -> None:
    """A word-level tokenizer over :data:`VOCAB` (whitespace-split), saved with save_pretrained."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<bos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins tokens with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<bos>", pad_token="<bos>"
    )
    fast.save_pretrained(str(folder))


def train_bpe(folder: Path, vocab_size: int = 384) -> int:
    """A byte-level BPE trained here on a little Python source and the alphabet (so ``' A'`` ..
    ``' z'`` are single tokens), saved with save_pretrained into ``folder``; returns its size."""
    import inspect
    import json as json_module

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    letters = " ".join(chr(c) for c in [*range(65, 91), *range(97, 123)])
    texts = [inspect.getsource(json_module)] + [letters] * 200
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|bos|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|bos|>", pad_token="<|bos|>"
    )
    fast.save_pretrained(str(folder))
    return len(fast)


# ----------------------------------------------------------------------------- random models


def _configs(vocab: int) -> dict:
    import transformers as T

    small = dict(vocab_size=vocab, max_position_embeddings=N_CTX)
    rope = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    return {
        "gpt2": T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=N_CTX, vocab_size=vocab),
        "gpt_neox": T.GPTNeoXConfig(**rope, rotary_pct=0.5, **small),
        "llama": T.LlamaConfig(**rope, num_key_value_heads=2, **small),
        "mistral": T.MistralConfig(**rope, num_key_value_heads=2, sliding_window=24, **small),
        "qwen2": T.Qwen2Config(**rope, num_key_value_heads=1, **small),
        "gemma2": T.Gemma2Config(
            **rope, num_key_value_heads=2, head_dim=16, sliding_window=24, **small
        ),
        "opt": T.OPTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            word_embed_proj_dim=32,
            **small,
        ),
        "gptj": T.GPTJConfig(
            n_embd=32, n_layer=2, n_head=4, n_positions=N_CTX, rotary_dim=4, vocab_size=vocab
        ),  # fmt: skip
        "phi": T.PhiConfig(**rope, **small),
    }


#: The architectures the tests build (what docs/models.md lists as tested).
ARCHITECTURES = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma2", "opt", "gptj", "phi")


def build_arch_dirs(root: Path) -> dict[str, Path]:
    """One random-weight model folder per architecture (seeded), with the trained BPE."""
    import transformers as T

    _quiet()
    tok_dir = root / "_tokenizer"
    n_tokens = train_bpe(tok_dir)
    dirs = {}
    for name, cfg in _configs(n_tokens).items():
        torch.manual_seed(0)
        model = T.AutoModelForCausalLM.from_config(cfg).eval()
        folder = root / name
        model.save_pretrained(str(folder))
        for f in tok_dir.iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
        dirs[name] = folder
    return dirs


# ----------------------------------------------------------------------------- planted: Llama


def build_planted_llama(folder: Path, *, prev_shift: int = 1, induction_key: str = "prev") -> Path:
    """A Llama (rotary, 4 query heads sharing 2 K/V heads, RMSNorm) with previous-token head 0.0
    and induction head 1.2 set by hand (module docstring).

    Residual (d_model 128): TOK = 0..31, CONST = 32, PREV = 33..64, OUT = 65..96. Head dims
    128, rope_theta 1e6, so rotary pair f turns by ``w_f = 1e6 ** (-f / 64)`` per position.
    Previous-token head: its query and key read CONST into the 8 fastest pairs, the query turned
    back by one position (``q_f = a R(-w_f) e1``, ``k_f = a e1``), so ``q_i . k_j = a^2 sum_f
    cos(w_f (i - 1 - j))`` peaks at ``j = i - 1``; it copies TOK into PREV. Induction head: its
    query reads TOK and its key PREV, token ``t`` into pair ``32 + t`` (turning less than 0.07
    rad over the context, and one pair per token, so different tokens never match); it copies
    the key's TOK into OUT, which the unembedding reads.

    Near misses (negatives): ``prev_shift=2`` turns the query back two positions (a head on the
    token two back, not the previous one); ``induction_key="tok"`` keys the induction head on the
    key's own token (a head on earlier copies of the current token, not on what followed them).
    """
    import transformers as T

    _quiet()
    d, n_heads, n_kv, hd = 128, 4, 2, 128
    cfg = T.LlamaConfig(
        vocab_size=V,
        hidden_size=d,
        num_hidden_layers=2,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv,
        head_dim=hd,
        intermediate_size=64,
        max_position_embeddings=N_CTX,
        rope_theta=1e6,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = T.LlamaForCausalLM(cfg).eval()
    tok, const, prev, out = 0, 32, 33, 65
    half = hd // 2
    freqs = [1e6 ** (-f / half) for f in range(half)]
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for norm in [model.model.norm] + [
            m for layer in model.model.layers for m in (layer.input_layernorm,
                                                        layer.post_attention_layernorm)
        ]:  # fmt: skip
            norm.weight.fill_(1.0)
        emb = model.model.embed_tokens.weight  # [V, d]
        for t in range(V):
            emb[t, tok + t] = 1.0
            emb[t, const] = 1.0
        s0 = math.sqrt(d / 2)  # RMSNorm's factor on TOK + CONST (mean square 2 / d)
        s1 = math.sqrt(d / 3)  # ... after PREV is written (mean square 3 / d)
        a, b = 12.0, 15.0
        l0, l1 = model.model.layers[0].self_attn, model.model.layers[1].self_attn
        h, kv = PLANTED_PREV["llama"][1], PLANTED_PREV["llama"][1] // (n_heads // n_kv)
        for f in range(8):  # the fastest pairs: (f, f + half)
            w = freqs[f] * prev_shift
            l0.q_proj.weight[h * hd + f, const] = a / s0 * math.cos(w)
            l0.q_proj.weight[h * hd + f + half, const] = -a / s0 * math.sin(w)
            l0.k_proj.weight[kv * hd + f, const] = a / s0
        for t in range(V):
            l0.v_proj.weight[kv * hd + t, tok + t] = 1.0 / s0
            l0.o_proj.weight[prev + t, h * hd + t] = 1.0
        h, kv = PLANTED_INDUCTION["llama"][1], PLANTED_INDUCTION["llama"][1] // (n_heads // n_kv)
        for t in range(V):
            l1.q_proj.weight[h * hd + half // 2 + t, tok + t] = b / s1
            key = prev if induction_key == "prev" else tok
            l1.k_proj.weight[kv * hd + half // 2 + t, key + t] = b / s1
            l1.v_proj.weight[kv * hd + t, tok + t] = 1.0 / s1
            l1.o_proj.weight[out + t, h * hd + t] = 1.0
            model.lm_head.weight[t, out + t] = 3.0
    model.save_pretrained(str(folder))
    save_word_tokenizer(folder)
    return folder


# ----------------------------------------------------------------------------- planted: GPT-2

#: Four frequencies whose kernel sum_f cos(w_f d) over d in [-1, 63] peaks at d = 0 (value 4) with
#: every other value <= 1.93 (tests/gpt2_helpers.py).
FREQS = (0.5536, 0.9404, 2.764, 3.0485)


def _ln_scale(x: torch.Tensor) -> float:
    """1 / std of a residual vector (LayerNorm's factor, eps aside)."""
    return float(1.0 / x.var(unbiased=False).add(1e-5).sqrt())


def build_planted_gpt2(folder: Path) -> Path:
    """A GPT-2 (learned positions, LayerNorm, 4 heads of 32, untied unembedding) with
    previous-token head 0.3 and induction head 1.1 set by hand (module docstring).

    Residual (d_model 128): POS = 0..7 (four sinusoid pairs) and 8..15 (their negatives, so
    LayerNorm's mean is the token's alone), TOK = 16..47, PREV = 48..79, OUT = 80..111. Every
    position's residual has the same mean and spread, so LayerNorm scales them alike: the
    previous-token head's query turns each pair back by one position (``q_i . k_j ∝ sum_f
    cos(w_f (i - 1 - j))``), the induction head matches TOK with PREV one-to-one.
    """
    import transformers as T

    _quiet()
    d, dh = 128, 32
    cfg = T.GPT2Config(
        vocab_size=V,
        n_embd=d,
        n_layer=2,
        n_head=4,
        n_positions=N_CTX,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = T.GPT2LMHeadModel(cfg).eval()
    tok, prev, out = 16, 48, 80
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        tr = model.transformer
        for ln in [tr.ln_f] + [m for blk in tr.h for m in (blk.ln_1, blk.ln_2)]:
            ln.weight.fill_(1.0)
        pos = torch.arange(N_CTX, dtype=torch.float32)[:, None]
        w = torch.tensor(FREQS)[None, :]
        tr.wpe.weight[:, 0:8:2] = torch.cos(pos * w)
        tr.wpe.weight[:, 1:8:2] = torch.sin(pos * w)
        tr.wpe.weight[:, 8:16] = -tr.wpe.weight[:, 0:8]
        for t in range(V):
            tr.wte.weight[t, tok + t] = 1.0
        x0 = tr.wpe.weight[5] + tr.wte.weight[3]
        s0 = _ln_scale(x0)
        mean0 = float(x0.mean())
        # layer 0: previous-token head
        h = PLANTED_PREV["gpt2"][1]
        attn = tr.h[0].attn.c_attn.weight  # [d, 3d]: x @ W -> q | k | v
        q0, k0, v0 = h * dh, d + h * dh, 2 * d + h * dh
        c = 20.0 * math.sqrt(dh) / (s0 * s0 * len(FREQS))
        for f, om in enumerate(FREQS):
            r = 2 * f
            rot = torch.tensor([[math.cos(om), -math.sin(om)], [math.sin(om), math.cos(om)]])
            attn[r : r + 2, q0 + r : q0 + r + 2] = c * rot
            attn[r : r + 2, k0 + r : k0 + r + 2] = torch.eye(2)
        for t in range(V):
            attn[tok + t, v0 + t] = 1.0 / s0
            tr.h[0].attn.c_proj.weight[h * dh + t, prev + t] = 1.0
        # layer 1's input: the token, its predecessor (less the mean LayerNorm took off)
        x1 = x0.clone()
        x1[prev : prev + V] += torch.eye(V)[4] - mean0
        s1 = _ln_scale(x1)
        h = PLANTED_INDUCTION["gpt2"][1]
        attn = tr.h[1].attn.c_attn.weight
        q0, k0, v0 = h * dh, d + h * dh, 2 * d + h * dh
        b = math.sqrt(20.0 * math.sqrt(dh)) / s1
        for t in range(V):
            attn[tok + t, q0 + t] = b
            attn[prev + t, k0 + t] = b
            attn[tok + t, v0 + t] = 1.0 / s1
            tr.h[1].attn.c_proj.weight[h * dh + t, out + t] = 1.0
            model.lm_head.weight[t, out + t] = 3.0
    model.save_pretrained(str(folder))
    save_word_tokenizer(folder)
    return folder


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data))
