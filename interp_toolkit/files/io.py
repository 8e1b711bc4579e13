"""Safe files: the one output writer, readable-or-say-why reads, and a lock on a folder.

The writer (:func:`write_bytes`, :func:`write_text`, :func:`write_json`, :func:`write_with`)
writes every file the toolkit writes, and looks at what a path is before it writes
(:func:`output_target`):

- ``-`` is standard output;
- a regular file or a new path is written atomically: a temporary file in the same folder,
  fsync'ed, renamed over the name (and the folder fsync'ed), so it appears whole or not at all.
  A new file gets the umask's mode; a replaced one keeps its mode. An existing file this user
  may not write is a permission error, as for ``>`` in a shell (root may write anything);
- a symlink is followed: its target is written atomically as above (a dangling link creates
  its target) and the link stays a link;
- a character device, a FIFO or a socket is written directly, never renamed over: ``/dev/null``
  swallows the bytes, ``/dev/full`` is a "no space" error naming it, a FIFO receives the bytes
  (waiting for a reader, as the shell does), ``/dev/stdout`` is standard output;
- a folder, a block device, a symlink loop or a name too long is a
  :class:`~interp_toolkit.errors.UserError` (one line, exit 2) before anything is written.

A failed write leaves no temporary file behind, and an ``OSError`` from it names the file it
was writing (a full disk says which file did not fit).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.files.paths import (  # noqa: F401  (the writer's public names)
    STDOUT,
    OutputTarget,
    check_output,
    output_target,
    path_kind,
    write_stream,
)

#: The lock file of a folder being written (a run folder, a study folder).
LOCK_NAME = ".lock"


def file_mode() -> int:
    """The mode a new file gets under the current umask (0644 under umask 022)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside the regular file ``path``; rename it into place (fsync'ed)
    only if the block succeeds. Callers write through :func:`write_with`, which also handles
    devices, FIFOs and symlinks.

    The file gets the umask's mode (an existing file's, when it replaces one) after the block
    (writers such as safetensors reset it), and the temporary file is removed whatever happens."""
    path = Path(path)
    mode = file_mode()
    try:
        st = os.stat(path)
        if not os.access(path, os.W_OK):
            code = errno.EROFS if _read_only(path) else errno.EACCES  # as root, EROFS is why
            raise OSError(code, os.strerror(code), str(path))
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a bounded prefix: the temporary name stays within the file system's limit
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        exc.filename = str(path)
        raise
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, mode)  # mkstemp makes 0600, and so do some writers
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        exc.filename = str(path)
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _fsync_dir(folder: Path) -> None:
    with suppress(OSError):  # some file systems cannot sync a folder; the rename is atomic
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


#: Every path written whole by this process, in order (the CLI's interrupt line names those of
#: the command that was stopped).
WRITTEN: list[Path] = []


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` (see the module doc: atomically, or in place for a stream)."""
    target = output_target(path)
    if target.kind == "file":
        with atomic_path(target.path) as tmp:
            tmp.write_bytes(data)
    else:
        write_stream(target, data)
    WRITTEN.append(Path(path))
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` (a writer that takes a file name: safetensors, savefig) and
    move the result to ``path`` atomically, or copy it into a stream."""
    target = output_target(path)
    if target.kind == "file":
        with atomic_path(target.path) as tmp:
            writer(tmp)
    else:
        with tempfile.TemporaryDirectory(prefix="interp-toolkit-") as folder:
            tmp = Path(folder) / "out"
            writer(tmp)
            write_stream(target, tmp.read_bytes())
    WRITTEN.append(Path(path))
    return Path(path)


def check_readable(path: str | os.PathLike[str], fix: str = "") -> Path:
    """``path`` if it is a file (or a link to one) this process can open for reading; a
    UserError saying what it is otherwise (a folder, a FIFO, a device, a dangling link: named
    as such, never "missing" or "damaged"; a permission problem is a permission problem).
    ``fix``: what to do about a path that is not a file."""
    path = Path(path)
    kind = path_kind(path)
    if kind not in ("a file", "missing"):
        raise UserError(
            f"{path} is {kind}, not a file: {fix or 'remove it, or give the path of a file.'}"
        )
    try:
        os.close(os.open(path, os.O_RDONLY))
    except PermissionError:
        raise UserError(
            f"cannot read {path}: permission denied; ask its owner to make it readable "
            f"(chmod a+r {path}) or work on a copy."
        ) from None
    return path


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes (hex, first 16 digits: which file this is, not a seal)."""
    import hashlib

    h = hashlib.sha256()
    with open(check_readable(path), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def read_json(path: str | os.PathLike[str], what: str, fix: str) -> Any:
    """The JSON in ``path``; a damaged file is a UserError naming the file, ``what`` it is and the ``fix``."""
    path = check_readable(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8 text"
        raise UserError(f"{what} {path} is damaged ({reason}): {fix}") from None


def check_writable_dir(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Create ``path`` if needed and check we can write into it; raise UserError otherwise."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {path} is not writable (it is a file): choose a folder.")
    if path.is_symlink() and not path.exists():
        raise UserError(
            f"{what} {path} is a symlink to {os.readlink(path)}, which does not exist: create "
            "that folder first, or give another path."
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path, prefix=".probe.").close()
    except OSError as exc:
        raise UserError(
            f"{what} {path} is not writable ({exc.strerror}): choose a folder you can write to."
        ) from None
    return path


@contextmanager
def tidy_folders(path: str | os.PathLike[str]) -> Iterator[None]:
    """Whatever the block does, the folders of ``path`` (it and its parents) that did not exist
    before it and are empty after it are removed (deepest first): a command that fails or is
    stopped before writing anything leaves no folder behind."""
    missing, p = [], Path(path)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    try:
        yield
    finally:
        for folder in missing:  # deepest first; stops at the first that is not empty
            try:
                folder.rmdir()
            except OSError:
                break


@contextmanager
def folder_lock(folder: str | os.PathLike[str], what: str = "folder") -> Iterator[str | None]:
    """Hold ``FOLDER/.lock`` (an advisory ``flock`` holding our PID) while the block runs.

    Another process holding it is a UserError naming its PID. The kernel drops a lock whose
    process died (Ctrl-C, ``kill -9``, a crash), so a stale lock file never blocks: it is taken
    over, and the PID it names comes back as the value of the ``with`` (None when there was
    none) so the caller can say so. The lock file is removed when the block ends."""
    import fcntl

    path = Path(folder) / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, file_mode())
        except IsADirectoryError:
            raise UserError(
                f"{path} is a folder, not the lock file of the {what}: move it away (or rmdir "
                "it if empty) and run the command again."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = _read_pid(path)
            raise UserError(
                f"{what} {folder} is in use by another process (PID {holder or '?'}): wait for it "
                f"to finish or stop it (kill {holder or 'PID'}); two writers cannot share a folder."
            ) from None
        try:  # the file we locked must still be the one at `path` (a releaser may have removed it)
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    stale = _read_pid(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield stale
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)


def _read_pid(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if text.isascii() and text.isdigit() else None


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
