"""GPT-2-architecture test models, built offline (shared by the unit and integration tiers).

Small GPT-2-architecture models are built with ``transformers`` (3 layers x 8 heads, n_embd 64,
the full 50,257-token vocabulary), saved with ``save_pretrained`` plus our offline GPT-2 BPE
tokenizer files, and loaded through the same :func:`interp_toolkit.runs.hf.load` path as
real GPT-2.

The planted model has a previous-token head: layer 0 head 3 reads sinusoidal positional
embeddings, with its query rotated back by one position, so ``q_i . k_j`` peaks at ``j = i - 1``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch

N_LAYER, N_HEAD, N_EMBD, N_CTX = 3, 8, 64, 64
PLANTED = (0, 3)
# Four frequencies whose kernel sum_f cos(w_f d) over d in [-1, 63] peaks at d = 0 (value 4) with
# every other value <= 1.93 (found by random search), so the head attends to q - 1 alone.
FREQS = (0.5536, 0.9404, 2.764, 3.0485)
PEAK_SCORE = 20.0  # attention logit at the previous token; the next best key is >= 10 nats lower


def _gpt2_config(**kw):
    from transformers import GPT2Config

    base = dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, n_positions=N_CTX, vocab_size=50257)
    base.update(kw)
    return GPT2Config(**base)


def plant_previous_token_head(hf, layer0_head: int) -> None:
    """Make layer 0's ``layer0_head`` attend to the previous token through positions alone.

    Positions: dims [0, dh) of ``wpe`` hold (cos w_f p, sin w_f p) pairs and dims [dh, 2dh) their
    negatives (so LayerNorm's mean is 0); token embeddings are zero there. After ln_1 those dims
    are x / std with a position-independent std. The head's keys copy the pairs; its queries
    rotate each pair back by w_f, so ``q_i . k_j ∝ sum_f cos(w_f (i - 1 - j))``.
    """
    cfg = hf.config
    d, dh = cfg.n_embd, cfg.n_embd // cfg.n_head
    nf = dh // 2
    with torch.no_grad():
        tr = hf.transformer
        p = torch.arange(cfg.n_positions, dtype=torch.float32)[:, None]
        w = torch.tensor(FREQS[:nf])[None, :]
        pos = torch.zeros(cfg.n_positions, d)
        pos[:, 0:dh:2] = torch.cos(p * w)
        pos[:, 1:dh:2] = torch.sin(p * w)
        pos[:, dh : 2 * dh] = -pos[:, 0:dh]
        tr.wpe.weight.copy_(pos)
        tr.wte.weight[:, : 2 * dh] = 0.0
        # ln_1: sum of squares over d dims is 2 * nf = dh, so y = x / sqrt(dh / d).
        inv_var = d / dh
        # score(i, j) = c * inv_var * K(i-1-j) / sqrt(dh); K peaks at nf.
        c = PEAK_SCORE * math.sqrt(dh) / (inv_var * nf)
        attn = tr.h[0].attn.c_attn  # Conv1D: out = x @ weight + bias, weight [d, 3d]
        q0, k0 = layer0_head * dh, d + layer0_head * dh
        attn.weight[:, q0 : q0 + dh] = 0.0
        attn.weight[:, k0 : k0 + dh] = 0.0
        attn.bias[q0 : q0 + dh] = 0.0
        attn.bias[k0 : k0 + dh] = 0.0
        for f in range(nf):
            om, r = FREQS[f], 2 * f
            rot = torch.tensor([[math.cos(om), -math.sin(om)], [math.sin(om), math.cos(om)]])
            attn.weight[r : r + 2, q0 + r : q0 + r + 2] = c * rot
            attn.weight[r : r + 2, k0 + r : k0 + r + 2] = torch.eye(2)


def _copy_model_files(src: Path, dst: Path, files=("config.json", "model.safetensors")) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copyfile(src / f, dst / f)
    return dst


def build_gpt2_dirs(root: Path) -> dict[str, Path]:
    """The planted model (with tokenizer), and bad variants of it, in folders under ``root``."""
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(_gpt2_config()).eval()
    plant_previous_token_head(hf, PLANTED[1])
    good = root / "planted"
    hf.save_pretrained(good)
    from interp_toolkit.runs.hf import save_gpt2_tokenizer

    save_gpt2_tokenizer(good)

    dirs = {"good": good}
    dirs["no_tokenizer"] = _copy_model_files(good, root / "no_tokenizer")
    dirs["no_weights"] = _copy_model_files(good, root / "no_weights", ("config.json",))
    dirs["no_config"] = _copy_model_files(good, root / "no_config", ("model.safetensors",))
    mism = _copy_model_files(good, root / "mismatched")
    cfg = json.loads((mism / "config.json").read_text())
    cfg["n_embd"] = 128
    (mism / "config.json").write_text(json.dumps(cfg))
    dirs["mismatched"] = mism
    badtok = _copy_model_files(good, root / "bad_tokenizer")
    (badtok / "vocab.json").write_text(json.dumps({"a": 0, "b": 1, "<|endoftext|>": 2}))
    (badtok / "merges.txt").write_text("#version: 0.2\n")
    dirs["bad_tokenizer"] = badtok
    for name, cfg in (
        ("bert", {"model_type": "bert", "architectures": ["BertForMaskedLM"]}),
        ("unknown_arch", {"model_type": "foo", "architectures": ["FooForCausalLM"]}),
    ):
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        (folder / "model.safetensors").write_bytes(b"")
        dirs[name] = folder
    run = root / "toy_run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"format_version": 1, "model": {}}))
    dirs["toy_run"] = run
    return dirs
