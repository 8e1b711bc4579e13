"""GPT-2 through TransformerLens 4.3: load real (or locally built) weights as a ``TransformerBridge``.

Which model a spec names and where its files are is :mod:`.hub`. Tokenizer files in a folder are
optional: TL 4.3 would silently give an empty tokenizer, so without them we hand it our offline
GPT-2 BPE (:func:`offline_gpt2_tokenizer`). :func:`load` returns a bridge in compatibility mode
(LayerNorm folded, weights centred: HookedTransformer-equivalent numerics) unless
``compat=False``. Head discovery is the generic analysis code (:mod:`interp_toolkit.heads`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformer_lens import TransformerBridge
from transformers import GPT2Tokenizer, PreTrainedTokenizerBase

from interp_toolkit.errors import UserError
from interp_toolkit.runs.target import Target
from interp_toolkit.runs.hub import WEIGHT_FILES, Source, read_json, resolve
from interp_toolkit.text.codecs import GPT2_VOCAB_SIZE, GPT2Codec, gpt2_bpe_files

HELLO_WORLD_IDS = [15496, 995]  # GPT-2 BPE of "Hello world"


# --------------------------------------------------------------------------- folder checks


def _has_tokenizer_files(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (
        (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file()
    )


def check_folder(folder: Path) -> dict[str, Any]:
    """Check a save_pretrained folder before loading it; return its config.json."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise UserError(
            f"{folder} has no config.json: pass a folder saved with transformers "
            "save_pretrained (config.json + model.safetensors)."
        )
    cfg = read_json(cfg_path)
    if not isinstance(cfg, dict):
        raise UserError(f"{cfg_path} is not valid JSON: save the model again with save_pretrained.")
    model_type = cfg.get("model_type")
    if model_type != "gpt2":
        archs = ",".join(cfg.get("architectures") or []) or "unknown architecture"
        raise UserError(
            f"{folder} holds a '{model_type}' model ({archs}), not a GPT-2-like one: head "
            "discovery needs GPT-2's attention hooks; pass a GPT-2 folder or a toy run folder."
        )
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise UserError(
            f"{folder} has a config.json but no weights (model.safetensors or pytorch_model.bin): "
            "save the model again with save_pretrained."
        )
    vocab = cfg.get("vocab_size")
    if not isinstance(vocab, int) or vocab < GPT2_VOCAB_SIZE:
        raise UserError(
            f"{folder}: vocab_size={vocab!r} in config.json is smaller than GPT-2's "
            f"{GPT2_VOCAB_SIZE} BPE tokens: this toolkit reads GPT-2 models with the GPT-2 "
            "tokenizer; pass a model with vocab_size >= 50257."
        )
    return cfg


# --------------------------------------------------------------------------- tokenizer


@contextlib.contextmanager
def offline_gpt2_tokenizer() -> Iterator[GPT2Tokenizer]:
    """A ``GPT2Tokenizer`` built from our offline GPT-2 BPE files (valid inside the block).

    TL needs a tokenizer that came from ``from_pretrained`` (it reloads it by ``name_or_path``
    while booting), so the files go to a temporary folder: ``vocab.json`` (= encoder.json) and
    ``merges.txt`` (= vocab.bpe).
    """
    encoder_json, vocab_bpe = gpt2_bpe_files()
    with tempfile.TemporaryDirectory(prefix="interp-gpt2-bpe-") as tmp:
        shutil.copyfile(encoder_json, Path(tmp) / "vocab.json")
        shutil.copyfile(vocab_bpe, Path(tmp) / "merges.txt")
        tok = GPT2Tokenizer.from_pretrained(tmp)
        tok.save_pretrained(tmp)  # writes tokenizer_config.json, as a hub folder has
        yield GPT2Tokenizer.from_pretrained(tmp)


def save_gpt2_tokenizer(folder: str | os.PathLike[str]) -> Path:
    """Write the offline GPT-2 BPE tokenizer files into ``folder`` (as save_pretrained would)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with offline_gpt2_tokenizer() as tok:
        tok.save_pretrained(str(folder))
    return folder


def check_tokenizer(model: TransformerBridge, where: str) -> None:
    """The bridge's tokenizer must be GPT-2's BPE; TL 4.3 silently gives an empty one."""
    tok = model.tokenizer
    n = 0 if tok is None else len(tok)
    if n < GPT2_VOCAB_SIZE:
        raise UserError(
            f"the tokenizer files in {where} give {n} tokens, not GPT-2's {GPT2_VOCAB_SIZE}: "
            "delete tokenizer.json/vocab.json/merges.txt there (the built-in GPT-2 BPE is used "
            "then) or save GPT-2's tokenizer with save_pretrained."
        )
    ids = tok.encode("Hello world", add_special_tokens=False)
    if list(ids) != HELLO_WORLD_IDS:
        raise UserError(
            f"the tokenizer in {where} is not GPT-2's BPE ('Hello world' -> {list(ids)}, "
            f"expected {HELLO_WORLD_IDS}): delete its tokenizer files or save GPT-2's tokenizer."
        )


# --------------------------------------------------------------------------- loading


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence transformers' progress bars and TL's chatter while booting."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    tl_logger = logging.getLogger()
    level = tl_logger.level
    tl_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        tl_logger.setLevel(level)
        if bars:
            hf_logging.enable_progress_bar()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _boot(name: str, device: str, tokenizer: PreTrainedTokenizerBase | None) -> TransformerBridge:
    try:
        with _quiet():
            return TransformerBridge.boot_transformers(
                name, device=device, dtype=torch.float32, tokenizer=tokenizer
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
            f"cannot load {name} ({_first_line(exc)}): save it again with save_pretrained."
        ) from None
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(
            f"cannot load {name} ({_first_line(exc)}): pass a folder saved with transformers "
            "save_pretrained, or a GPT-2 name."
        ) from None
    except SafetensorError as exc:  # HeaderTooLarge, truncated files, ...
        raise UserError(
            f"cannot load {name}: its weights are unreadable ({type(exc).__name__}: "
            f"{_first_line(exc)}): save the model again with save_pretrained."
        ) from None


def check_attention_hooks(model: TransformerBridge, where: str) -> None:
    """Discovery caches ``blocks.{l}.attn.hook_pattern`` / ``hook_v``: both must exist."""
    names = set(model.hook_dict)
    for hook in ("blocks.0.attn.hook_pattern", "blocks.0.attn.hook_v"):
        if hook not in names:
            raise UserError(
                f"{where} has no {hook} hook, so its heads cannot be analysed: pass a GPT-2 model."
            )


def load(
    name_or_path: str | os.PathLike[str], device: str = "cpu", *, compat: bool = True
) -> TransformerBridge:
    """A GPT-2 ``TransformerBridge`` (eval mode; compatibility mode unless ``compat=False``).

    ``name_or_path``: a GPT-2 hub name (read from the HF cache; downloaded only when online) or
    a folder saved with ``save_pretrained``. Bad input raises a one-line :class:`UserError`.
    """
    return _load(resolve(name_or_path), device=device, compat=compat)


def _load(src: Source, device: str, compat: bool) -> TransformerBridge:
    if src.folder is not None:
        folder = src.folder
        check_folder(folder)
        where = str(folder)
        if _has_tokenizer_files(folder):
            model = _boot(str(folder), device, None)
        else:
            with offline_gpt2_tokenizer() as tok:
                model = _boot(str(folder), device, tok)
    else:
        assert src.hub_id is not None
        where = src.hub_id
        model = _boot(src.hub_id, device, None)
        if getattr(model.cfg, "original_architecture", None) not in (None, "GPT2LMHeadModel"):
            raise UserError(f"{where} is not a GPT-2 model: pass a GPT-2 name or folder.")
    check_tokenizer(model, where)
    check_attention_hooks(model, where)
    if compat:
        with _quiet():
            model.enable_compatibility_mode()
    return model.eval()


def load_target(
    spec: str | os.PathLike[str], device: str = "cpu", *, compat: bool = True
) -> Target:
    """A :class:`Target` of kind ``gpt2`` (codec: the full GPT-2 vocabulary).

    ``compat=False`` skips ``enable_compatibility_mode()``: attention patterns, hence every head
    score, are the same, and loading GPT-2 small peaks at ~0.8 GiB instead of ~2.5 GiB (TL's
    weight processing copies the weights); weight-based analyses (circuits) want ``compat=True``.
    """
    src = resolve(spec)
    model = _load(src, device=device, compat=compat)
    return Target(
        name=src.label, kind="gpt2", model=model, codec=GPT2Codec(), source=src.folder or src.hub_id
    )
