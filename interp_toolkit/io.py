"""Atomic file writes: a file appears whole under its final name, or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; give the file normal permissions
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and move the result to ``path`` atomically."""
    with atomic_path(path) as tmp:
        writer(tmp)
    return Path(path)


def check_writable_dir(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Create ``path`` if needed and check we can write into it; raise UserError otherwise."""
    from interp_toolkit.errors import UserError

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".probe.", delete=True)
        probe.close()
    except OSError as exc:
        raise UserError(
            f"{what} {path} is not writable ({exc.strerror}): choose a folder you can write to."
        ) from None
    return path


def hub_offline(*flags: str, timeout: float = 3.0) -> bool:
    """True when ``HF_HUB_OFFLINE`` (or any of ``flags``) is set, or huggingface.co cannot be
    reached (no network fails in milliseconds here, so callers can say so at once)."""
    import socket

    for name in ("HF_HUB_OFFLINE", *flags):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return False
    except OSError:
        return True
