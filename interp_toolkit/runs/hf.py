"""Any causal LM TransformerLens 4.3 boots, from a ``save_pretrained`` folder or the hub cache.

Which model a spec names and where its files are is :mod:`.hub`. Before anything is booted a
folder is checked (:mod:`.hf_checks`): its ``config.json`` names an architecture
TransformerLens's bridge boots as a causal LM (else one line naming it and the list), every
weight the config names is in the weights file with its shape (nothing would be drawn at
random), and the memory the load needs fits what the machine has. After
the boot: the model's own tokenizer (a GPT-2 folder without tokenizer files gets our offline
GPT-2 BPE), attention hooks in every layer, and no NaN or infinite weight. ``dtype`` is ``fp32``
or ``bf16``. :func:`load` returns the bridge in compatibility mode (LayerNorm or
RMSNorm folded, weights centred: what weight-reading analyses want) unless ``compat=False``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformer_lens import TransformerBridge
from transformers import GPT2Tokenizer, PreTrainedTokenizerBase

from interp_toolkit.errors import UserError
from interp_toolkit.runs.hf_checks import (
    check_folder,
    check_memory,
    check_weights,
    dtype_named,
    first_line,
    hf_config,
    meta_model,
    quiet,
)
from interp_toolkit.runs.hub import Source, hub_cache_dir, resolve
from interp_toolkit.runs.target import Target
from interp_toolkit.runtime import validate
from interp_toolkit.text.codecs import GPT2_VOCAB_SIZE, Codec, GPT2Codec, TokenizerCodec
from interp_toolkit.text.codecs import gpt2_bpe_files as _bpe_files

HELLO_WORLD_IDS = [15496, 995]  # GPT-2 BPE of "Hello world"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


# --------------------------------------------------------------------------- tokenizer


@contextlib.contextmanager
def offline_gpt2_tokenizer() -> Iterator[GPT2Tokenizer]:
    """A ``GPT2Tokenizer`` built from our offline GPT-2 BPE files (valid inside the block).

    TL needs a tokenizer that came from ``from_pretrained`` (it reloads it by ``name_or_path``
    while booting), so the files go to a temporary folder: ``vocab.json`` (= encoder.json) and
    ``merges.txt`` (= vocab.bpe).
    """
    encoder_json, vocab_bpe = _bpe_files()
    with tempfile.TemporaryDirectory(prefix="interp-gpt2-bpe-") as tmp:
        shutil.copyfile(encoder_json, Path(tmp) / "vocab.json")
        shutil.copyfile(vocab_bpe, Path(tmp) / "merges.txt")
        # writes tokenizer_config.json too, as a hub folder has
        GPT2Tokenizer.from_pretrained(tmp).save_pretrained(tmp)
        yield GPT2Tokenizer.from_pretrained(tmp)


def save_gpt2_tokenizer(folder: str | os.PathLike[str]) -> Path:
    """Write the offline GPT-2 BPE tokenizer files into ``folder`` (as save_pretrained would)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with offline_gpt2_tokenizer() as tok:
        tok.save_pretrained(str(folder))
    return folder


def check_tokenizer(model: TransformerBridge, where: str) -> None:
    """The bridge's tokenizer must cover the model's vocabulary (TL 4.3 silently gives an empty
    one for a folder without tokenizer files) and give no id past it (a special token added past
    it, e.g. an unknown-token marker byte-level BPE never emits, may)."""
    tok, d_vocab = model.tokenizer, int(model.cfg.d_vocab)
    n = 0 if tok is None else len(tok)
    special = set(getattr(tok, "all_special_ids", []) or [])
    past = [i for i in range(d_vocab, n) if i not in special]  # added special tokens may pass
    used = [i for i in (tok.bos_token_id, tok.eos_token_id) if i is not None] if n else []
    if n * 2 < d_vocab or past or any(i >= d_vocab for i in used):
        raise UserError(
            f"the tokenizer in {where} gives {n} tokens for a model of {d_vocab} ids: save the "
            "model's own tokenizer there with save_pretrained (or, for GPT-2, delete the "
            "tokenizer files: the built-in GPT-2 BPE is used then)."
        )


def codec_of(model: TransformerBridge) -> Codec:
    """The codec of a booted model: GPT-2's own (offline BPE, the exams and probes GPT-2 always
    had) when its tokenizer is GPT-2's BPE (50,257 tokens, ``"Hello world"`` -> [15496, 995]),
    else its tokenizer's (:class:`TokenizerCodec`)."""
    tok, d_vocab = model.tokenizer, int(model.cfg.d_vocab)
    if tok is not None and len(tok) == d_vocab == GPT2_VOCAB_SIZE:
        if list(tok.encode("Hello world", add_special_tokens=False)) == HELLO_WORLD_IDS:
            return GPT2Codec()
    return TokenizerCodec(tok, d_vocab)


# --------------------------------------------------------------------------- loading


def _boot(
    name: str, device: str, dtype: torch.dtype, tokenizer: PreTrainedTokenizerBase | None
) -> TransformerBridge:
    try:
        with quiet():
            return TransformerBridge.boot_transformers(
                name, device=device, dtype=dtype, tokenizer=tokenizer
            )
    except UserError:
        raise
    except RuntimeError as exc:
        if "mismatched" in str(exc) or "size mismatch" in str(exc):
            raise UserError(
                f"the weights in {name} do not match its config.json (tensor shapes differ): "
                "save the model again with save_pretrained so both files come from one model."
            ) from None
        raise UserError(
            f"cannot load {name} ({first_line(exc)}): save it again with save_pretrained."
        ) from None
    except (OSError, ValueError, KeyError, NotImplementedError) as exc:
        raise UserError(
            f"cannot load {name} ({first_line(exc)}): pass a folder saved with transformers "
            "save_pretrained."
        ) from None
    except SafetensorError as exc:  # HeaderTooLarge, truncated files, ...
        raise UserError(
            f"cannot load {name}: its weights are unreadable ({type(exc).__name__}: "
            f"{first_line(exc)}): save the model again with save_pretrained."
        ) from None


def check_attention_hooks(model: TransformerBridge, where: str) -> None:
    """Discovery reads ``blocks.{l}.attn.hook_pattern`` / ``hook_v`` in every layer."""
    names = set(model.hook_dict)
    for layer in range(int(model.cfg.n_layers)):
        for hook in (f"blocks.{layer}.attn.hook_pattern", f"blocks.{layer}.attn.hook_v"):
            if hook not in names:
                raise UserError(
                    f"{where} has no {hook} hook (layer {layer} has no attention TransformerLens "
                    "reads), so its heads cannot be analysed: pass a transformer with attention "
                    "in every layer."
                )


def load(
    name_or_path: str | os.PathLike[str],
    device: str = "cpu",
    *,
    dtype: str = "fp32",
    compat: bool = True,
) -> TransformerBridge:
    """A ``TransformerBridge`` of any causal LM TL boots (eval mode; compatibility mode unless
    ``compat=False``): a hub id (read from the HF cache; downloaded only when online), a GPT-2
    name or a folder saved with ``save_pretrained``. Bad input raises a one-line
    :class:`UserError`."""
    return _load(resolve(name_or_path), device=device, dtype=dtype_named(dtype), compat=compat)


def _download(src: Source) -> Path:
    """The hub snapshot of ``src`` (online only: :func:`.hub.resolve` refused it offline)."""
    from huggingface_hub import snapshot_download

    assert src.hub_id is not None
    try:
        return Path(snapshot_download(src.hub_id, cache_dir=hub_cache_dir()))
    except Exception as exc:  # no such repository, gated, connection lost
        raise UserError(
            f"cannot download {src.hub_id} ({first_line(exc)}): check the id on "
            "huggingface.co, or pass a local folder saved with save_pretrained."
        ) from None


def _load(src: Source, device: str, dtype: torch.dtype, compat: bool) -> TransformerBridge:
    folder = src.folder if src.folder is not None else _download(src)
    cfg = check_folder(folder)
    config = hf_config(folder, cfg)
    shapes = meta_model(config, folder)
    check_weights(folder, shapes)  # no tensor drawn at random: refused first
    n_params = sum(p.numel() for p in shapes.parameters())
    del shapes
    check_memory(n_params, dtype, torch.device(device), folder, compat=compat)
    where = str(folder)
    if any((folder / f).is_file() for f in TOKENIZER_FILES):
        model = _boot(where, device, dtype, None)
    elif cfg.get("model_type") == "gpt2" and cfg.get("vocab_size") == GPT2_VOCAB_SIZE:
        with offline_gpt2_tokenizer() as tok:
            model = _boot(where, device, dtype, tok)
    else:
        raise UserError(
            f"{folder} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): save the model's "
            "tokenizer into it with save_pretrained."
        )
    check_tokenizer(model, where)
    check_attention_hooks(model, where)
    named = {  # the names of the weights file (the bridge wraps each HF module)
        n.replace("._original_component", ""): p for n, p in model.original_model.named_parameters()
    }
    validate.finite_weights(
        named.items(),
        f"the model in {where}",
        "its weights are damaged: save the model again with save_pretrained, from a model "
        "that trained without diverging.",
    )
    if compat:
        with quiet():
            model.enable_compatibility_mode(disable_warnings=True)
    return model.eval()


def load_hf_target(
    spec: str | os.PathLike[str], device: str = "cpu", *, dtype: str = "fp32", compat: bool = True
) -> Target:
    """A :class:`Target` of kind ``hf`` (codec: :func:`codec_of`).

    ``compat=False`` skips ``enable_compatibility_mode()``: attention patterns, hence every head
    score, are the same, and loading GPT-2 small peaks at ~0.8 GiB instead of ~2.5 GiB (TL's
    weight processing copies the weights); weight-based analyses (copying) want ``compat=True``.
    """
    src = resolve(spec)
    model = _load(src, device=device, dtype=dtype_named(dtype), compat=compat)
    source = src.folder or src.hub_id
    return Target(name=src.label, kind="hf", model=model, codec=codec_of(model), source=source)
