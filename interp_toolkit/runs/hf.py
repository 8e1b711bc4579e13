"""Any causal LM TransformerLens 4.3 boots, from a ``save_pretrained`` folder or the hub cache.

Which model a spec names and where its files are is :mod:`.hub`. Before anything is booted a
folder is checked (:func:`check_folder`): its ``config.json`` names an architecture
TransformerLens's bridge boots as a causal LM (else one line naming it and the list), every
weight the config names is in the weights file with its shape (nothing would be drawn at
random), and the memory the load needs fits what the machine has (:func:`check_memory`). After
the boot: the model's own tokenizer (a GPT-2 folder without tokenizer files gets our offline
GPT-2 BPE), attention hooks in every layer, and no NaN or infinite weight. ``dtype`` is ``fp32``
or ``bf16`` (:data:`DTYPES`). :func:`load` returns the bridge in compatibility mode (LayerNorm or
RMSNorm folded, weights centred: what weight-reading analyses want) unless ``compat=False``.
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
from interp_toolkit.runs.spec import DTYPE_NAMES
from interp_toolkit.runs.target import Target
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import available_memory
from interp_toolkit.text.codecs import GPT2_VOCAB_SIZE, Codec, GPT2Codec, TokenizerCodec
from interp_toolkit.text.codecs import gpt2_bpe_files as _bpe_files

HELLO_WORLD_IDS = [15496, 995]  # GPT-2 BPE of "Hello world"
DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16), strict=True))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
#: The memory a load is estimated to need (:func:`memory_estimate`): the interpreter with torch,
#: transformers and TransformerLens imported, and per byte of weights what the load holds at its
#: peak (the weights once; compatibility mode processes a copy: GPT-2 small went from 0.63 to
#: 2.5 GiB, about 4 bytes held per byte of weights). benchmarks/hf_heads_cost.py compares the
#: estimate with the measured peak.
BASE_BYTES = 600 * 2**20
HELD_PER_WEIGHT_BYTE = {False: 1.0, True: 4.0}


def causal_architectures() -> list[str]:
    """The architectures TransformerLens 4.3's bridge boots that are causal language models."""
    from transformer_lens.factories import architecture_adapter_factory

    return sorted(
        a
        for a in architecture_adapter_factory.SUPPORTED_ARCHITECTURES
        if a.endswith(("ForCausalLM", "LMHeadModel"))
    )


# --------------------------------------------------------------------------- folder checks


def _has_tokenizer_files(folder: Path) -> bool:
    return any((folder / f).is_file() for f in TOKENIZER_FILES)


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
    "n_layer",
    "num_hidden_layers",
    "n_head",
    "num_attention_heads",
    "num_key_value_heads",
    "n_embd",
    "hidden_size",
    "head_dim",
    "n_positions",
    "max_position_embeddings",
    "vocab_size",
)


def check_sizes(folder: Path, cfg: dict[str, Any]) -> None:
    """The sizes config.json gives must make a model (``n_head: 0`` used to crash)."""
    where = folder / "config.json"
    for name in SIZE_KEYS:
        value = cfg.get(name)
        if name in cfg and value is not None and (not validate.is_whole(value) or value < 1):
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
        with _quiet():
            config = AutoConfig.from_pretrained(str(folder))
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise UserError(
            f"{folder} holds a {archs} model that transformers cannot read "
            f"({_first_line(exc)}): pass a causal language model; {listed}."
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
_MASKS = re.compile(r"(attn|attention|crossattention|self_attn)\.(bias|masked_bias)$")


def meta_model(config: Any, folder: Path) -> torch.nn.Module:
    """The config's model on the meta device (shapes only, no memory)."""
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"), _quiet():
            return AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # a config transformers cannot build a model from
        raise UserError(
            f"{folder}/config.json cannot make a {type(config).__name__} model "
            f"({type(exc).__name__}: {_first_line(exc)}): save the model again with save_pretrained."
        ) from None


def check_weights(folder: Path, model: torch.nn.Module) -> None:
    """Every tensor the config names is in the weights with its shape (see the note above)."""
    found = _file_shapes(folder)
    if found is None:
        return  # unreadable or absent: the loader says so
    expected = {n: tuple(p.shape) for n, p in model.named_parameters()}  # tied: once
    known = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    known |= {n for n, _ in model.named_buffers(remove_duplicate=False)}
    found, converted = _as_loaded(model, found)
    expected = {k: v for k, v in expected.items() if k not in converted}
    missing = [k for k in expected if k not in found]
    wrong = [f"{k} is {_dims(found[k])} there, {_dims(v)} by config.json"
             for k, v in expected.items() if k in found and tuple(found[k]) != v]  # fmt: skip
    extra = [k for k in found if k not in known and k not in converted
             and not _MASKS.search(k) and not k.endswith("inv_freq")]  # fmt: skip
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
    except Exception:  # another transformers: names as saved, with the prefix rule
        transforms = []
        WeightConverter = WeightRenaming = rename_source_key = None  # noqa: N806
    prefix = f"{model.base_model_prefix}."
    meta = model.state_dict()
    out: dict[str, tuple[int, ...]] = {}
    converted: set[str] = set()
    for key, shape in found.items():
        if rename_source_key is None:
            name = key if key in meta or f"{prefix}{key}" not in meta else f"{prefix}{key}"
            out[name] = shape
            continue
        name, pattern = rename_source_key(
            key,
            [t for t in transforms if isinstance(t, WeightRenaming)],
            [t for t in transforms if isinstance(t, WeightConverter)],
            model.base_model_prefix,
            meta,
        )
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
            out: dict[str, tuple[int, ...]] = {}
            for shard in sorted(shards):
                out |= _safetensors_shapes(folder / shard)
            return out
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


def memory_estimate(n_params: int, dtype: torch.dtype, *, compat: bool) -> int:
    """Bytes a load of ``n_params`` weights in ``dtype`` is estimated to hold at its peak
    (:data:`BASE_BYTES` + the weights times :data:`HELD_PER_WEIGHT_BYTE`)."""
    weights = n_params * torch.tensor([], dtype=dtype).element_size()
    return int(BASE_BYTES + weights * HELD_PER_WEIGHT_BYTE[compat])


def check_memory(
    n_params: int, dtype: torch.dtype, device: torch.device, where: str, *, compat: bool
) -> int:
    """Refuse (one line naming both) a load whose :func:`memory_estimate` exceeds the memory
    ``device`` has available; return the estimate."""
    need = memory_estimate(n_params, dtype, compat=compat)
    have = available_memory(device)
    if have is not None and need > have:
        gib = 2**30
        half = " or --dtype bf16" if dtype == torch.float32 else ""
        raise UserError(
            f"loading {where} ({n_params / 1e6:,.0f}M parameters in {_dtype_name(dtype)}) needs "
            f"about {need / gib:.1f} GiB but {device} has {have / gib:.1f} GiB available: free "
            f"memory, use a machine with more{half}."
        )
    return need


def _dtype_name(dtype: torch.dtype) -> str:
    return next(k for k, v in DTYPES.items() if v == dtype)


def dtype_named(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UserError(f"--dtype {name}: unknown: use {' or '.join(DTYPES)}.")
    return DTYPES[name]


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


def is_gpt2_bpe(tok: PreTrainedTokenizerBase | None) -> bool:
    """Whether ``tok`` is GPT-2's BPE (50,257 tokens, ``"Hello world"`` -> [15496, 995])."""
    if tok is None or len(tok) != GPT2_VOCAB_SIZE:
        return False
    return list(tok.encode("Hello world", add_special_tokens=False)) == HELLO_WORLD_IDS


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
    had) when its tokenizer is GPT-2's BPE, else its tokenizer's (:class:`TokenizerCodec`)."""
    if is_gpt2_bpe(model.tokenizer) and int(model.cfg.d_vocab) == GPT2_VOCAB_SIZE:
        return GPT2Codec()
    return TokenizerCodec(model.tokenizer, int(model.cfg.d_vocab))


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
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _boot(
    name: str, device: str, dtype: torch.dtype, tokenizer: PreTrainedTokenizerBase | None
) -> TransformerBridge:
    try:
        with _quiet():
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
            f"cannot load {name} ({_first_line(exc)}): save it again with save_pretrained."
        ) from None
    except (OSError, ValueError, KeyError, NotImplementedError) as exc:
        raise UserError(
            f"cannot load {name} ({_first_line(exc)}): pass a folder saved with transformers "
            "save_pretrained."
        ) from None
    except SafetensorError as exc:  # HeaderTooLarge, truncated files, ...
        raise UserError(
            f"cannot load {name}: its weights are unreadable ({type(exc).__name__}: "
            f"{_first_line(exc)}): save the model again with save_pretrained."
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

    from interp_toolkit.runs.hub import hub_cache_dir

    assert src.hub_id is not None
    try:
        return Path(snapshot_download(src.hub_id, cache_dir=hub_cache_dir()))
    except Exception as exc:  # no such repository, gated, connection lost
        raise UserError(
            f"cannot download {src.hub_id} ({_first_line(exc)}): check the id on "
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
    check_memory(n_params, dtype, torch.device(device), str(folder), compat=compat)
    where = str(folder)
    if _has_tokenizer_files(folder):
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
        with _quiet():
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
    return Target(
        name=src.label,
        kind="hf",
        model=model,
        codec=codec_of(model),
        source=src.folder or src.hub_id,
    )
