"""Checks of a Hugging Face model folder before anything is booted (:mod:`.hf` loads it).

- :func:`check_folder`, :func:`check_sizes`: ``config.json`` and weights are there, sizes that
  can make a model;
- :func:`hf_config`: an architecture TransformerLens 4.3's bridge boots as a causal LM (else one
  line naming it and the list);
- :func:`check_weights`: every tensor the config names is in the weights with its shape;
- :func:`check_memory`: the load's :func:`memory_estimate` fits what the device has.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from interp_toolkit.errors import UserError
from interp_toolkit.runs.hub import WEIGHT_FILES, read_json_or_none
from interp_toolkit.runs.spec import DTYPE_NAMES
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import available_memory

DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16), strict=True))
#: The memory a load is estimated to need (:func:`memory_estimate`): the interpreter with torch,
#: transformers and TransformerLens imported; the weights file as stored (read whole while
#: loading); the weights again in the asked dtype when that is not the stored one; compatibility
#: mode's processed copies (GPT-2 small went from 0.63 to 2.5 GiB: about three more); and two
#: analysis chunks (``runtime.devices.CPU_BUDGET_BYTES``). benchmarks/hf_heads_cost.py puts the
#: estimate beside the measured peak (docs/models.md).
BASE_BYTES = 600 * 2**20
COMPAT_COPIES = 3
ANALYSIS_BYTES = 2 * 256 * 2**20


def causal_architectures() -> list[str]:
    """The architectures TransformerLens 4.3's bridge boots that are causal language models."""
    from transformer_lens.factories import architecture_adapter_factory

    return sorted(
        a
        for a in architecture_adapter_factory.SUPPORTED_ARCHITECTURES
        if a.endswith(("ForCausalLM", "LMHeadModel"))
    )


# --------------------------------------------------------------------------- folder checks


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
    if not any((folder / f).is_file() for f in WEIGHT_FILES):
        raise UserError(
            f"{folder} has a config.json but no weights (model.safetensors or pytorch_model.bin): "
            "save the model again with save_pretrained."
        )
    check_sizes(folder, cfg)
    return cfg


#: Sizes a config.json may give; each present one must be a whole number >= 1.
SIZE_KEYS = (
    *("n_layer", "num_hidden_layers", "n_head", "num_attention_heads", "num_key_value_heads"),
    *("n_embd", "hidden_size", "head_dim", "n_positions", "max_position_embeddings", "vocab_size"),
)


def check_sizes(folder: Path, cfg: dict[str, Any]) -> None:
    """The sizes config.json gives must make a model (``n_head: 0`` used to crash)."""
    where = folder / "config.json"
    for name in SIZE_KEYS:
        value = cfg.get(name)
        if value is not None and (not validate.is_whole(value) or value < 1):
            raise UserError(
                f"{where}: {name}={value!r} cannot work (a whole number, 1 or more): correct it "
                "to the model's, or save the model again with save_pretrained."
            )
    wkey = "n_embd" if "n_embd" in cfg else "hidden_size"
    hkey = "n_head" if "n_head" in cfg else "num_attention_heads"
    width, heads = cfg.get(wkey), cfg.get(hkey)
    if isinstance(width, int) and isinstance(heads, int) and not cfg.get("head_dim"):
        if width % heads:
            raise UserError(
                f"{where}: {wkey}={width} does not split into {hkey}={heads} heads: correct it "
                "to the model's, or save the model again with save_pretrained."
            )


def hf_config(folder: Path, cfg: dict[str, Any]) -> Any:
    """The folder's ``transformers`` config, checked to be an architecture the bridge boots as a
    causal LM (one line naming it and the list otherwise)."""
    from transformers import AutoConfig

    kind = cfg.get("model_type")
    archs = ",".join(cfg.get("architectures") or []) or f"model_type {kind!r}"
    supported = causal_architectures()
    listed = f"TransformerLens 4.3 boots these {len(supported)}: {', '.join(supported)}"
    try:
        with quiet():
            config = AutoConfig.from_pretrained(str(folder))
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise UserError(
            f"{folder} holds a {archs} model that transformers cannot read "
            f"({first_line(exc)}): pass a causal language model; {listed}."
        ) from None
    from transformer_lens.model_bridge.sources._hf_format import (
        determine_architecture_from_hf_config,
    )

    try:
        arch = determine_architecture_from_hf_config(config)
    except ValueError:
        raise UserError(
            f"{folder} holds a {archs} model, which TransformerLens 4.3 cannot boot: {listed}."
        ) from None
    if arch not in supported:
        raise UserError(
            f"{folder} holds a {arch}, not a causal language model: head discovery, exams and "
            f"circuits read next-token predictions; {listed}."
        )
    return config


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

#: Buffers checkpoints saved that are not weights (causal masks; rotary tables end in inv_freq).
_MASKS = re.compile(r"(attn|attention|crossattention|self_attn)\.(bias|masked_bias)$|inv_freq$")


def meta_model(config: Any, folder: Path) -> torch.nn.Module:
    """The config's model on the meta device (shapes only, no memory)."""
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"), quiet():
            return AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # a config transformers cannot build a model from
        raise UserError(
            f"{folder}/config.json cannot make a {type(config).__name__} model "
            f"({type(exc).__name__}: {first_line(exc)}): save the model again with save_pretrained."
        ) from None


def check_weights(folder: Path, model: torch.nn.Module) -> None:
    """Every tensor the config names is in the weights with its shape (see the note above)."""
    found = _file_shapes(folder)
    if found is None:
        return  # unreadable or absent: the loader says so
    expected = {n: tuple(p.shape) for n, p in model.named_parameters()}  # tied: once
    found, converted = _as_loaded(model, found)
    known = converted | {n for n, _ in model.named_parameters(remove_duplicate=False)}
    known |= {n for n, _ in model.named_buffers(remove_duplicate=False)}
    expected = {k: v for k, v in expected.items() if k not in converted}
    missing = [k for k in expected if k not in found]
    wrong = [
        f"{k} is {_dims(found[k])} there, {_dims(v)} by config.json"
        for k, v in expected.items()
        if k in found and tuple(found[k]) != v
    ]
    extra = [k for k in found if k not in known and not _MASKS.search(k)]
    if not (missing or wrong or extra):
        return
    fix = (
        "correct config.json (layers, heads, widths, vocab_size) to the weights' model, or save "
        "the model again with save_pretrained so both files come from one model."
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


def _as_loaded(
    model: torch.nn.Module, found: dict[str, tuple[int, ...]]
) -> tuple[dict[str, tuple[int, ...]], set[str]]:
    """The file's tensor names as transformers loads them (its renamings, e.g. GPT-NeoX's
    ``embed_out`` -> ``lm_head``, and the base model's prefix), and the names a converter fills
    (fused or split tensors: their shapes are the converter's, not compared)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (
            WeightConverter,
            WeightRenaming,
            rename_source_key,
        )

        transforms = get_model_conversion_mapping(model)
        renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
        converters = [t for t in transforms if isinstance(t, WeightConverter)]
    except Exception:  # another transformers: names as saved, with the prefix rule
        rename_source_key = None
    base, meta = model.base_model_prefix, model.state_dict()
    out: dict[str, tuple[int, ...]] = {}
    converted: set[str] = set()
    for key, shape in found.items():
        if rename_source_key is None:
            name = key if key in meta or f"{base}.{key}" not in meta else f"{base}.{key}"
        else:
            name, pattern = rename_source_key(key, renamings, converters, base, meta)
            if pattern is not None:
                converted.add(name)
        out[name] = shape
    return out, converted


def _few(items: list[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _dims(shape: Any) -> str:
    return "x".join(map(str, shape)) or "a scalar"


def _file_shapes(folder: Path) -> dict[str, tuple[int, ...]] | None:
    """Tensor name -> shape of the folder's weights (the file transformers would load), or None."""
    try:
        if (folder / "model.safetensors").is_file():
            return _safetensors_shapes(folder / "model.safetensors")
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            return {
                k: v for s in sorted(shards) for k, v in _safetensors_shapes(folder / s).items()
            }
        if (folder / "pytorch_model.bin").is_file():
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


# --------------------------------------------------------------------------- memory


def weights_file_bytes(folder: Path) -> int:
    """The bytes of a folder's weights files (one file, or the shards an index names)."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            data = read_json_or_none(folder / index)
            shards = set((data or {}).get("weight_map", {}).values())
            return sum((folder / s).stat().st_size for s in shards if (folder / s).is_file())
    return sum((folder / f).stat().st_size for f in WEIGHT_FILES if (folder / f).is_file())


def memory_estimate(
    n_params: int, dtype: torch.dtype, *, compat: bool, file_bytes: int | None = None
) -> int:
    """Bytes a load of ``n_params`` weights in ``dtype`` is estimated to hold at its peak (see
    :data:`BASE_BYTES`); ``file_bytes``: the weights file as stored (default: in ``dtype``)."""
    weights = n_params * torch.tensor([], dtype=dtype).element_size()
    stored = weights if file_bytes is None else file_bytes
    converted = weights if abs(stored - weights) > 0.1 * max(weights, 1) else 0
    copies = COMPAT_COPIES * weights if compat else 0
    return int(BASE_BYTES + stored + converted + copies + ANALYSIS_BYTES)


def check_memory(
    n_params: int, dtype: torch.dtype, device: torch.device, folder: Path, *, compat: bool
) -> None:
    """Refuse (one line naming both) a load of ``folder`` whose :func:`memory_estimate` exceeds
    the memory ``device`` has available."""
    need = memory_estimate(n_params, dtype, compat=compat, file_bytes=weights_file_bytes(folder))
    have = available_memory(device)
    if have is not None and need > have:
        gib = 2**30
        half = " or --dtype bf16" if dtype == torch.float32 else ""
        name = next(k for k, v in DTYPES.items() if v == dtype)
        raise UserError(
            f"loading {folder} ({n_params / 1e6:,.0f}M parameters in {name}) needs "
            f"about {need / gib:.1f} GiB but {device} has {have / gib:.1f} GiB available: free "
            f"memory, use a machine with more{half}."
        )


def dtype_named(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UserError(f"--dtype {name}: unknown: use {' or '.join(DTYPES)}.")
    return DTYPES[name]


# --------------------------------------------------------------------------- quiet booting


@contextlib.contextmanager
def quiet() -> Iterator[None]:
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


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
