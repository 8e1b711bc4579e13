"""GPT-2 through TransformerLens 4.3: load real (or locally built) weights, find its heads.

What a spec can be (:func:`is_gpt2_spec`):

- a hub name: ``gpt2``, ``gpt2-medium``, ``gpt2-large``, ``gpt2-xl``, ``distilgpt2`` (or the
  ``openai-community/…`` / ``distilbert/…`` ids). It is read from the Hugging Face cache
  (``HF_HOME`` / ``HF_HUB_CACHE``) when it is there. Without a cached copy it is downloaded only
  when the Hub can be reached; offline the user gets one line saying how to supply the weights,
  not a 20-second retry loop and a traceback.
- a folder written by ``transformers`` ``save_pretrained`` (``config.json`` with ``model_type``
  ``gpt2`` plus weights). Tokenizer files are optional: TL 4.3 would silently give an empty
  tokenizer, so without them we hand it our offline GPT-2 BPE (:func:`offline_gpt2_tokenizer`).
  Our own run folders also hold a ``config.json``; they carry ``format_version`` and are not
  GPT-2 specs.

:func:`load` returns a ``TransformerBridge`` in compatibility mode (LayerNorm folded, weights
centred: HookedTransformer-equivalent numerics). :func:`discover` runs the same head discovery
as for toy models on repeated random tokens with BOS, in batches, and picks the strongest
previous-token and induction heads for the attention-pattern view.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from safetensors import SafetensorError
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.io import hub_offline
from interp_toolkit.targets import Target
from interp_toolkit.tokenizer import EOT_ID, GPT2_VOCAB_SIZE, GPT2Codec, gpt2_bpe_files

# Hub names and the repository ids they may be cached under (new id first, legacy id second).
HUB_NAMES: dict[str, tuple[str, ...]] = {
    "gpt2": ("openai-community/gpt2", "gpt2"),
    "gpt2-medium": ("openai-community/gpt2-medium", "gpt2-medium"),
    "gpt2-large": ("openai-community/gpt2-large", "gpt2-large"),
    "gpt2-xl": ("openai-community/gpt2-xl", "gpt2-xl"),
    "distilgpt2": ("distilbert/distilgpt2", "distilgpt2"),
}
_REPO_TO_NAME = {repo.lower(): name for name, repos in HUB_NAMES.items() for repo in repos}
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
HELLO_WORLD_IDS = [15496, 995]  # GPT-2 BPE of "Hello world"
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _known_names() -> str:
    return ", ".join(HUB_NAMES)


def _supply_hint(name: str) -> str:
    return (
        f'download it where there is a network (python -c "from transformers import '
        f"AutoModelForCausalLM as M, AutoTokenizer as T; "
        f"M.from_pretrained('{name}').save_pretrained('{name}-local'); "
        f"T.from_pretrained('{name}').save_pretrained('{name}-local')\"), copy the folder here "
        f"and pass its path instead of '{name}', or point HF_HOME at a Hugging Face cache that "
        f"holds it"
    )


# --------------------------------------------------------------------------- spec resolution


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def _is_hf_folder(path: Path) -> bool:
    """A folder whose config.json is a Hugging Face config, not one of our run folders."""
    if not path.is_dir():
        return False
    cfg = path / "config.json"
    if not cfg.is_file():
        # An HF-style folder that lost its config.json is still meant as a model folder.
        return any((path / f).is_file() for f in WEIGHT_FILES)
    data = _read_json(cfg)
    if not isinstance(data, dict):
        # Unreadable config.json: HF-only files say it was meant as an HF folder.
        hf_only = (
            "tokenizer_config.json",
            "generation_config.json",
            "merges.txt",
            *WEIGHT_FILES[1:],
        )
        return any((path / f).is_file() for f in hf_only)
    return "format_version" not in data


def _looks_like_model_name(spec: str) -> bool:
    s = spec.lower()
    return (
        s in HUB_NAMES
        or s in _REPO_TO_NAME
        or s.startswith(("gpt", "distilgpt", "openai-community/"))
    )


def is_gpt2_spec(spec: str | os.PathLike[str]) -> bool:
    """True for a GPT-2 hub name (or a name that looks like one) or a Hugging Face model folder.

    Run folders (``config.json`` with ``format_version``) are not GPT-2 specs. A name that
    looks like a GPT-2 name but is unknown is claimed too, so :func:`load_target` can say
    which names exist instead of "no such run folder".
    """
    path = Path(spec)
    if path.exists():
        return _is_hf_folder(path)
    s = str(spec)
    if _looks_like_model_name(s):
        return True
    return bool(_REPO_ID.match(s)) and _cached_snapshot(s) is not None


# --------------------------------------------------------------------------- hub cache


def _cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of ``repo_id`` in the HF cache, or None; never touches the network."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id, local_files_only=True, cache_dir=_hub_cache_dir())
    except Exception:  # LocalEntryNotFoundError, bad repo id, unreadable cache…
        return None
    folder = Path(folder)
    return folder if (folder / "config.json").is_file() else None


@dataclass(frozen=True)
class Source:
    """Where a spec's weights come from: a local folder or (online only) a hub id to download."""

    label: str
    folder: Path | None = None
    hub_id: str | None = None


def resolve(spec: str | os.PathLike[str]) -> Source:
    """Turn a spec into a :class:`Source`, or raise a one-line :class:`UserError`."""
    path = Path(spec)
    if path.exists():
        if not path.is_dir():
            raise UserError(
                f"{path} is a file, not a model folder: pass a folder saved with "
                "transformers save_pretrained (config.json + model.safetensors)."
            )
        return Source(label=path.resolve().name, folder=path)
    s = str(spec)
    name = s.lower()
    if name in HUB_NAMES or name in _REPO_TO_NAME:
        name = _REPO_TO_NAME.get(name, name)
        for repo in HUB_NAMES[name]:
            snap = _cached_snapshot(repo)
            if snap is not None:
                return Source(label=name, folder=snap)
        if hub_offline():
            raise UserError(
                f"the weights of '{name}' are not in the Hugging Face cache "
                f"({_hub_cache_dir()}) and the Hub cannot be reached: {_supply_hint(name)}."
            )
        return Source(label=name, hub_id=HUB_NAMES[name][0])
    if _REPO_ID.match(s):
        snap = _cached_snapshot(s)
        if snap is not None:
            return Source(label=s.split("/")[-1], folder=snap)
    raise UserError(
        f"unknown model '{s}': use a GPT-2 name ({_known_names()}) or the path of a folder "
        "saved with transformers save_pretrained."
    )


def _hub_cache_dir() -> str:
    """The HF hub cache, read from the environment now (huggingface_hub reads it at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


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
    cfg = _read_json(cfg_path)
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
def offline_gpt2_tokenizer() -> Iterator[Any]:
    """A ``GPT2Tokenizer`` built from our offline GPT-2 BPE files (valid inside the block).

    TL needs a tokenizer that came from ``from_pretrained`` (it reloads it by ``name_or_path``
    while booting), so the files go to a temporary folder: ``vocab.json`` (= encoder.json) and
    ``merges.txt`` (= vocab.bpe).
    """
    from transformers import GPT2Tokenizer

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


def _boot(name: str, device: str, tokenizer: Any | None) -> TransformerBridge:
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


# --------------------------------------------------------------------------- discovery

#: GPT-2 discovery defaults: 64 rows of ``[BOS] prefix(0..7) seg seg filler`` = 128 tokens.
DEFAULT_PERIOD = 60
DEFAULT_PREFIX_MAX = 7


@dataclass
class GPT2Discovery:
    """Discovery result plus what the attention-pattern view needs.

    ``report``: the analysis ``HeadReport`` (scores, null τ, roles). ``prev_head`` /
    ``induction_head``: the strongest head *labelled* with that role, as ``(layer, head)``, or None
    when discovery labelled none. ``top_prev`` / ``top_induction``: the highest-scoring head of
    each score whatever its label (for a view even when nothing passed τ). ``tokens``: one probe
    row ``[BOS] prefix seg seg filler`` drawn like the discovery batch; ``str_tokens``: its text.
    """

    report: Any
    prev_head: tuple[int, int] | None
    induction_head: tuple[int, int] | None
    top_prev: tuple[int, int]
    top_induction: tuple[int, int]
    tokens: Int[Tensor, " pos"]
    str_tokens: list[str] = field(default_factory=list)

    def view_heads(self) -> dict[str, tuple[int, int]]:
        """Heads to draw: the labelled ones, else the top-scoring ones."""
        return {
            "previous-token": self.prev_head or self.top_prev,
            "induction": self.induction_head or self.top_induction,
        }

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.report.to_dict())
        d["view"] = {
            "previous_token_head": _name(self.prev_head),
            "induction_head": _name(self.induction_head),
            "top_previous_token": _name(self.top_prev),
            "top_induction": _name(self.top_induction),
            "tokens": [int(t) for t in self.tokens.tolist()],
        }
        return d


def _name(lh: tuple[int, int] | None) -> str | None:
    return None if lh is None else f"{lh[0]}.{lh[1]}"


def strongest_head(
    scores: Float[Tensor, "layer head"], roles: list[list[str]] | None = None, role: str = ""
) -> tuple[int, int] | None:
    """The (layer, head) with the highest score, among heads labelled ``role`` when ``roles`` is
    given; None if no head carries the role."""
    best: tuple[int, int] | None = None
    best_score = float("-inf")
    for layer in range(scores.shape[0]):
        for head in range(scores.shape[1]):
            if roles is not None and roles[layer][head] != role:
                continue
            if float(scores[layer, head]) > best_score:
                best, best_score = (layer, head), float(scores[layer, head])
    return best


def probe_row(
    model: TransformerBridge,
    codec: Any,
    *,
    period: int,
    prefix_max: int,
    seed: int = 0,
) -> Int[Tensor, " pos"]:
    """One repeated-random-token row with BOS, drawn exactly like discovery's first row."""
    from interp_toolkit.analysis.batches import default_token_range, repeated_tokens

    low, high = default_token_range(codec)
    high = min(high, int(model.cfg.d_vocab))
    batch = repeated_tokens(
        1,
        period,
        n_repeats=2,
        low=low,
        high=high,
        bos_id=codec.bos_id,
        prefix_max=prefix_max,
        seed=seed,
    )
    return batch.tokens[0]


def discover(
    model: TransformerBridge,
    codec: Any = None,
    *,
    n_seqs: int = 64,
    period: int | None = None,
    prefix_max: int | None = None,
    seed: int = 0,
    null: str = "shuffled",
    n_null: int = 4,
    quantile: float = 0.95,
    batch_size: int | None = None,
) -> GPT2Discovery:
    """Previous-token and induction heads of a GPT-2 bridge (any GPT-2-architecture model).

    The analysis' :func:`~interp_toolkit.analysis.scores.discover_heads` on ``n_seqs`` rows of
    repeated random GPT-2 tokens with BOS (``<|endoftext|>``); by default period 60 and a random
    prefix of 0..7 tokens, so a row is 128 tokens (shorter models: the analysis' default layout).
    Only ``hook_pattern``/``hook_v`` are hooked, the pass stops before the unembedding and rows
    go through in chunks (``batch_size`` rows, default: ~256 MiB of patterns per chunk), so
    GPT-2 small fits in a few GB. Then picks the strongest previous-token and induction heads
    for the attention-pattern view.
    """
    from interp_toolkit.analysis.batches import default_layout
    from interp_toolkit.analysis.scores import discover_heads

    codec = codec or GPT2Codec()
    n_ctx = int(model.cfg.n_ctx)
    if period is None and prefix_max is None:
        if 1 + DEFAULT_PREFIX_MAX + 2 * DEFAULT_PERIOD <= n_ctx:
            period, prefix_max = DEFAULT_PERIOD, DEFAULT_PREFIX_MAX
        else:
            period, prefix_max = default_layout(n_ctx, has_bos=True)
    elif prefix_max is None:
        prefix_max = 0
    elif period is None:
        period = max(2, (n_ctx - 1 - prefix_max) // 2)
    report = discover_heads(
        model,
        codec,
        n_seqs=n_seqs,
        period=period,
        prefix_max=prefix_max,
        seed=seed,
        null=null,
        n_null=n_null,
        quantile=quantile,
        batch_size=batch_size,
    )
    sc = report.scores
    tokens = probe_row(model, codec, period=int(period), prefix_max=int(prefix_max), seed=seed)
    top_prev = strongest_head(sc.previous_token)
    top_ind = strongest_head(sc.induction)
    assert top_prev is not None and top_ind is not None
    return GPT2Discovery(
        report=report,
        prev_head=strongest_head(sc.previous_token, report.roles, "previous-token"),
        induction_head=strongest_head(sc.induction, report.roles, "induction"),
        top_prev=top_prev,
        top_induction=top_ind,
        tokens=tokens,
        str_tokens=codec.str_tokens(tokens.tolist()),
    )


def attention_patterns(
    model: TransformerBridge, tokens: Int[Tensor, " pos"], heads: list[tuple[int, int]]
) -> Float[Tensor, "n_heads pos pos"]:
    """The attention patterns ``[dest, src]`` of ``heads`` on one row (only those layers hooked)."""
    layers = sorted({layer for layer, _ in heads})
    names = {f"blocks.{layer}.attn.hook_pattern" for layer in layers}
    with torch.no_grad():
        _, cache = model.run_with_cache(
            tokens[None, :].to(next(model.parameters()).device),
            names_filter=lambda n: n in names,
            stop_at_layer=max(layers) + 1,
        )
    return torch.stack([cache["pattern", layer][0, head].float().cpu() for layer, head in heads])


__all__ = [
    "EOT_ID",
    "GPT2Discovery",
    "HUB_NAMES",
    "Source",
    "check_folder",
    "is_gpt2_spec",
    "load",
    "load_target",
    "offline_gpt2_tokenizer",
    "resolve",
    "save_gpt2_tokenizer",
    "attention_patterns",
    "discover",
    "probe_row",
    "strongest_head",
]
