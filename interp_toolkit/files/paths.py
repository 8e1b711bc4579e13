"""What an output path is, before anything is written to it (:func:`output_target`,
:func:`check_output`), and writing in place to what must not be renamed over: standard output,
a character device, a FIFO, a socket. The writer that uses them is :mod:`interp_toolkit.files.io`.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interp_toolkit.errors import UserError

#: The output path that means standard output.
STDOUT = "-"


@dataclass(frozen=True)
class OutputTarget:
    """Where the bytes for an output path go: ``kind`` ``stdout``, ``file`` (written atomically
    at ``path``, the symlink-resolved target) or ``stream`` (``path`` opened and written in
    place: a character device, a FIFO, a socket (``socket``), or this process's stdout/stderr as
    ``fd``)."""

    kind: Literal["stdout", "file", "stream"]
    path: Path
    fd: int | None = None
    socket: bool = False


def output_target(
    path: str | os.PathLike[str], what: str = "output", example: str = "out.json"
) -> OutputTarget:
    """What ``path`` is, for writing (see the module doc); a UserError naming ``what`` (e.g.
    ``--json``) for a path nothing may be written to (a folder: suggesting ``example`` in it).
    Nothing is created."""
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"{what} must be a path, got {type(path).__name__}: give a file name.")
    if os.fspath(path) == STDOUT:
        return OutputTarget("stdout", Path(STDOUT), 1)
    p = Path(path)
    if not os.fspath(path):
        raise UserError(f"{what} is an empty path: give a file name.")
    try:
        st = os.stat(p)
    except FileNotFoundError:  # a new file (perhaps through a dangling symlink)
        if os.fspath(path).endswith("/"):  # a file named `newdir` is not what `newdir/` meant
            raise UserError(
                f"{what} {os.fspath(path)} ends with a slash, so it names a folder, and {p} does "
                f"not exist: give a file name such as {p / example}."
            ) from None
        return OutputTarget("file", Path(os.path.realpath(p)))
    except OSError as exc:
        raise _path_problem(exc, p, what) from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise UserError(f"{what} {p} is a folder: give a file name such as {p / example}.")
    for fd in (1, 2):  # /dev/stdout, /proc/self/fd/1, or a path the shell redirected to
        try:
            out = os.fstat(fd)
        except OSError:
            continue
        if (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino) and not stat.S_ISCHR(mode):
            return OutputTarget("stream", p, fd)
    if stat.S_ISREG(mode):
        return OutputTarget("file", Path(os.path.realpath(p)))
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return OutputTarget("stream", p, socket=stat.S_ISSOCK(mode))
    kind = "a block device (a disk)" if stat.S_ISBLK(mode) else "not a file"
    raise UserError(f"{what} {p} is {kind}: writing there would destroy it; give a file name.")


def path_kind(path: str | os.PathLike[str]) -> str:
    """What is at ``path``, in words: ``"a file"``, ``"a folder"``, ``"a FIFO"``, ``"a
    character device"``, ``"a block device"``, ``"a socket"``, ``"a symlink to X, which does
    not exist"``, ``"a symlink loop"`` or ``"missing"`` (a link to a device: the device's word,
    with the link named)."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        if p.is_symlink():
            return f"a symlink to {os.readlink(p)}, which does not exist"
        return "missing"
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror})"
    kinds = (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    kind = next((word for test, word in kinds if test(mode)), "not a file")
    if p.is_symlink() and kind != "a file":
        return f"a symlink to {os.readlink(p)} ({kind})"
    return kind


def _path_problem(exc: OSError, p: Path, what: str) -> Exception:
    if exc.errno == errno.ELOOP:
        return UserError(
            f"{what} {p} is a symlink loop (its links point at each other): fix or remove the "
            "link, or give another path."
        )
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(os.fsencode(part)) for part in p.parts), default=0)
        return UserError(
            f"{what}: the path is too long ({len(os.fsencode(p))} bytes, its longest name "
            f"{longest}; the file system allows {_limit('PC_NAME_MAX', 255)} per name and "
            f"{_limit('PC_PATH_MAX', 4096)} in all): give a shorter name."
        )
    if exc.errno == errno.ENOTDIR:
        return UserError(f"{what} {p}: a part of the path is a file, not a folder: fix the path.")
    if exc.filename is None:
        exc.filename = str(p)
    return exc


def _limit(name: str, default: int) -> int:
    try:
        return int(os.pathconf("/", name))
    except (OSError, ValueError):
        return default


def check_output(
    path: str | os.PathLike[str], what: str = "output", example: str = "out.json"
) -> OutputTarget:
    """:func:`output_target`, and for a file: its folder (or the nearest existing one above it,
    which the write would create folders in) must be writable, and so must an existing file.
    Checked before any work; creates nothing."""
    target = output_target(path, what, example)
    if target.socket:
        if (earlier := _held.pop(os.fspath(target.path), None)) is not None:
            earlier.close()
        _held[os.fspath(target.path)] = _connect(target.path, what)  # proven now, written later
    if target.kind != "file":
        return target
    folder = target.path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{what} {path}: {folder} is a file, not a folder: fix the path.")
    try:
        tempfile.NamedTemporaryFile(dir=folder, prefix=".probe.").close()
    except OSError as exc:
        raise UserError(
            f"{what} {path}: cannot write in {folder} ({exc.strerror}): choose a folder you can "
            "write to."
        ) from None
    if target.path.exists() and not os.access(target.path, os.W_OK):
        raise UserError(
            f"{what} {path}: the file exists and is read-only for you: choose another name or "
            f"make it writable (chmod u+w {target.path})."
        )
    return target


def write_stream(target: OutputTarget, data: bytes) -> None:
    """Write ``data`` in place: to an fd of ours, a device, a FIFO or a socket."""
    if target.fd is not None:
        stream = sys.stdout if target.fd == 1 else sys.stderr
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is None:
            stream.write(data.decode("utf-8", errors="replace"))
        else:
            buffer.write(data)
        stream.flush()
        return
    try:
        if target.socket:
            _send(target.path, data)
            return
        fd = _open_stream(target.path)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        exc.filename = str(target.path)
        raise


def _open_stream(path: Path) -> int:
    """An fd writing into the device or FIFO ``path``: a FIFO without a reader is waited for
    (as the shell does; Ctrl-C stops the wait)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ENXIO:
            raise
        print(f"waiting for a reader of {path} (Ctrl-C stops) ...", file=sys.stderr, flush=True)
        return os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    os.set_blocking(fd, True)
    return fd


def inside_inputs(
    target: str | os.PathLike[str],
    what: str,
    inputs: Iterable[str | os.PathLike[str]],
    owns: Iterable[str | os.PathLike[str]] = (),
    example: str = "out.json",
) -> None:
    """A UserError when ``target`` (symlinks followed) is, or lies inside, one of ``inputs``
    (the run folders and files a command reads: writing there could destroy a run's weights,
    config or checkpoints), unless it is, or lies inside, one of ``owns`` (what the command
    itself writes there, e.g. ``RUN/report.html``)."""

    def within(path: Path, place: str | os.PathLike[str]) -> bool:
        base = Path(os.path.realpath(place))
        return path == base or base in path.parents

    real = Path(os.path.realpath(target))
    if any(within(real, own) for own in owns):
        return
    via = "" if real == Path(os.path.abspath(target)) else f" (a link to {real})"
    for spec in inputs:
        if os.fspath(spec) and os.path.exists(spec) and within(real, spec):
            kind = "a folder" if os.path.isdir(spec) else "a file"
            raise UserError(
                f"{what} {os.fspath(target)}{via} is inside {os.fspath(spec)}, {kind} this "
                f"command reads: writing there could destroy its files; write elsewhere, e.g. "
                f"{example}."
            )


#: Unix sockets :func:`check_output` connected to, kept open for the write (a listener that
#: takes one connection gets the data on it, not an empty probe).
_held: dict[str, Any] = {}


def _connect(path: Path, what: str = "") -> Any:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"{what + ' ' if what else ''}{path} is a socket nobody listens on as a stream "
            f"({exc.strerror}): give a file, a FIFO or - for standard output."
        ) from None
    return sock


def _send(path: Path, data: bytes) -> None:
    with _held.pop(os.fspath(path), None) or _connect(path) as sock:
        sock.sendall(data)
