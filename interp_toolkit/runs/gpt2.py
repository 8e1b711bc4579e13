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
import json
import logging
import os
import re
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
from interp_toolkit.runs.hub import WEIGHT_FILES, Source, read_json_or_none, resolve
from interp_toolkit.runs.target import Target
from interp_toolkit.runtime import validate
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
    cfg = read_json_or_none(cfg_path)
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
    check_config(folder, cfg)
    return cfg


# --------------------------------------------------------------------------- config against weights
#
# transformers loads a folder whose config names tensors the weights file lacks by drawing them
# at random (a warning at most): ``n_layer: 5`` over the weights of one layer analyses four
# random layers, and a file missing its attention weights analyses random heads. An analysis of
# a model that is partly random is a silent wrong answer, so a folder is refused unless every
# tensor its config names is in its weights with the config's shape (and no layer of the weights
# is left out by the config). Only the files' headers are read (safetensors, sharded or not; a
# pytorch_model.bin is mapped, not read); the config's shapes come from the model built on the
# meta device (no memory). A file that cannot be read is left to the loader, which names it.

#: config.json's sizes, each a whole number >= 1 (transformers' default where one is left out).
SIZES = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024}
#: Buffers older checkpoints saved that are not weights (the causal mask).
_IGNORED = re.compile(r"(^|\.)h\.\d+\.(attn|crossattention)\.(bias|masked_bias)$")


def check_config(folder: Path, cfg: dict[str, Any]) -> None:
    """The sizes config.json gives must make a model (``n_head: 0`` used to crash)."""
    where = folder / "config.json"
    sizes = {name: cfg.get(name, default) for name, default in SIZES.items()}
    for name, value in sizes.items():
        if not validate.is_whole(value) or value < 1:
            raise UserError(
                f"{where}: {name}={value!r} cannot work (a whole number, 1 or more): correct it "
                "to the model's, or save the model again with save_pretrained."
            )
    if sizes["n_embd"] % sizes["n_head"]:
        raise UserError(
            f"{where}: n_embd={sizes['n_embd']} does not split into n_head={sizes['n_head']} "
            "heads: "
            "correct it to the model's, or save the model again with save_pretrained."
        )


def check_weights(folder: Path, cfg: dict[str, Any]) -> None:
    """Every tensor the config names is in the weights with its shape (see the module doc)."""
    found = _file_shapes(folder)
    if found is None:
        return  # unreadable or absent: the loader says so
    expected, prefix = _config_shapes(cfg)
    found = {(k if k in expected or f"{prefix}{k}" not in expected else f"{prefix}{k}"): v
             for k, v in found.items()}  # fmt: skip
    missing = [k for k in expected if k not in found]
    wrong = [f"{k} is {_dims(found[k])} there, {_dims(v)} by config.json"
             for k, v in expected.items() if k in found and tuple(found[k]) != v]  # fmt: skip
    extra = [k for k in found if k not in expected and not _IGNORED.search(k)]
    if not (missing or wrong or extra):
        return
    fix = (
        "correct config.json (n_layer, n_head, n_embd, n_positions, vocab_size) to the weights' "
        "model, or save the model again with save_pretrained so both files come from one model."
    )
    if wrong:
        problem = f"tensor shapes differ ({_few(wrong)})"
    elif missing:
        problem = (
            f"{len(missing)} tensors config.json names are not in the weights ({_few(missing)})"
        )
    else:
        problem = f"the weights hold {len(extra)} tensors config.json does not name ({_few(extra)})"
    raise UserError(
        f"the weights in {folder} do not match its config.json: {problem}, so part of the "
        f"model would be random: {fix}"
    )


def _few(items: list[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _dims(shape: Any) -> str:
    return "x".join(map(str, shape)) or "a scalar"


def _config_shapes(cfg: dict[str, Any]) -> tuple[dict[str, tuple[int, ...]], str]:
    """The parameter shapes the config makes (tied weights once), and the base model's prefix."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    try:
        config = GPT2Config.from_dict(cfg)
        with torch.device("meta"):
            model = GPT2LMHeadModel(config)
    except Exception as exc:  # a config transformers cannot build a model from
        raise UserError(
            f"config.json cannot make a GPT-2 model ({type(exc).__name__}: {exc}): save the "
            "model again with save_pretrained."
        ) from None
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}  # tied: once
    persistent = model.state_dict().keys()
    shapes |= {n: tuple(b.shape) for n, b in model.named_buffers() if n in persistent}
    return shapes, f"{model.base_model_prefix}."


def _file_shapes(folder: Path) -> dict[str, tuple[int, ...]] | None:
    """Tensor name -> shape of the folder's weights (the file transformers would load), or None."""
    try:
        if (folder / "model.safetensors").is_file():
            return _safetensors_shapes(folder / "model.safetensors")
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            out: dict[str, tuple[int, ...]] = {}
            for shard in sorted(shards):
                out |= _safetensors_shapes(folder / shard)
            return out
        if (folder / "pytorch_model.bin").is_file():
            import torch

            state = torch.load(
                folder / "pytorch_model.bin", map_location="cpu", mmap=True, weights_only=True
            )
            return {k: tuple(v.shape) for k, v in state.items()}
    except Exception:  # damaged or unreadable: the loader names it
        return None
    return None


def _safetensors_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118


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
        check_weights(folder, check_folder(folder))  # no tensor drawn at random: refused first
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
