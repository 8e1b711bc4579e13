"""Which Hugging Face model a spec names, and where its files are: hub ids, the cache, folders.

What a spec can be (:func:`is_hf_spec`):

- a hub id ``owner/name`` (``EleutherAI/pythia-70m``, ``Qwen/Qwen2-0.5B``, ...), or one of
  GPT-2's short names (``gpt2``, ``gpt2-medium``, ``gpt2-large``, ``gpt2-xl``, ``distilgpt2``).
  It is read from the Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``) when it is there.
  Without a cached copy it is downloaded only when the Hub can be reached; offline the user
  gets one line saying so and how to supply the weights, not a 20-second retry loop and a
  traceback.
- a folder written by ``transformers`` ``save_pretrained`` (``config.json`` plus weights), of
  any architecture; which ones TransformerLens can boot is :mod:`.hf`'s question. Our own run
  folders also hold a ``config.json``; they carry ``format_version`` and are not HF specs.

``owner/name`` that exists as a path is that path; one that does not, whose first part is not
a folder here either, is read as a hub id (so ``heads EleutherAI/pythia-70m`` is never "run
folder ... does not exist"). Nothing here imports torch or TransformerLens.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import hub_offline

#: GPT-2's short names and the repository ids they may be cached under (new id first).
HUB_NAMES: dict[str, tuple[str, ...]] = {
    **{n: (f"openai-community/{n}", n) for n in ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")},
    "distilgpt2": ("distilbert/distilgpt2", "distilgpt2"),
}
_REPO_TO_NAME = {repo.lower(): name for name, repos in HUB_NAMES.items() for repo in repos}
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def supply_hint(name: str) -> str:
    """How to bring hub model ``name`` onto an offline machine."""
    local = name.split("/")[-1] + "-local"
    return (
        f'download it where there is a network (python -c "from transformers import '
        f"AutoModelForCausalLM as M, AutoTokenizer as T; "
        f"M.from_pretrained('{name}').save_pretrained('{local}'); "
        f"T.from_pretrained('{name}').save_pretrained('{local}')\"), copy the folder here "
        f"and pass its path instead of '{name}', or point HF_HOME at a Hugging Face cache that "
        f"holds it"
    )


# --------------------------------------------------------------------------- spec resolution


def read_json_or_none(path: Path) -> Any:
    """The JSON in ``path``, or None when it cannot be read (a probe of what a folder holds; a
    file the user named is read by :func:`interp_toolkit.files.io.read_json`)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def is_hf_folder(path: Path) -> bool:
    """A folder whose config.json is a Hugging Face config, not one of our run folders."""
    if not path.is_dir():
        return False
    cfg = path / "config.json"
    if not cfg.is_file():
        # An HF-style folder that lost its config.json is still meant as a model folder.
        return any((path / f).is_file() for f in WEIGHT_FILES)
    data = read_json_or_none(cfg)
    if not isinstance(data, dict):
        # Unreadable config.json: HF-only files say it was meant as an HF folder.
        hf_only = ("tokenizer_config.json", "generation_config.json", "merges.txt")
        return any((path / f).is_file() for f in (*hf_only, *WEIGHT_FILES[1:]))
    return "format_version" not in data


def is_hf_spec(spec: str | os.PathLike[str]) -> bool:
    """True for a Hugging Face model folder, a hub id ``owner/name`` or a GPT-2 short name.

    Run folders (``config.json`` with ``format_version``) are not HF specs. A name that looks
    like a GPT-2 name but is unknown is claimed too, so :func:`resolve` can say which names
    exist instead of "no such run folder".
    """
    path = Path(spec)
    if path.exists():
        return is_hf_folder(path)
    s = os.fspath(spec)
    if s.lower() in _REPO_TO_NAME or s.lower().startswith(("gpt", "distilgpt")):
        return True  # GPT-2's names (and the repositories they are cached under)
    return bool(_REPO_ID.match(s)) and not Path(s).parent.exists()  # a hub id, no folder here


# --------------------------------------------------------------------------- hub cache


def _cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of ``repo_id`` in the HF cache, or None; never touches the network."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id, local_files_only=True, cache_dir=hub_cache_dir())
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
    s = os.fspath(spec)
    name = s.lower()
    if name in _REPO_TO_NAME:  # a GPT-2 name, or a repository it is cached under
        name = _REPO_TO_NAME[name]
        repos = HUB_NAMES[name]
    elif _REPO_ID.match(s):
        name, repos = s, (s,)
    else:
        raise UserError(
            f"unknown model '{s}': use a hub id (owner/name, e.g. EleutherAI/pythia-70m), a GPT-2 "
            f"name ({', '.join(HUB_NAMES)}) or the path of a folder saved with transformers "
            "save_pretrained."
        )
    label = name.split("/")[-1]
    for snap in map(_cached_snapshot, repos):
        if snap is not None:
            return Source(label=label, folder=snap)
    if hub_offline():
        also = "" if name in HUB_NAMES else f" (nor is {s} a folder here)"
        raise UserError(
            f"the model '{name}' is not in the Hugging Face cache ({hub_cache_dir()}){also} and "
            f"the Hub cannot be reached: {supply_hint(name)}."
        )
    return Source(label=label, hub_id=repos[0])


def hub_cache_dir() -> str:
    """The HF hub cache, read from the environment now (huggingface_hub reads it at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)
