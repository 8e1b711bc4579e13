"""The one output writer (``interp_toolkit.files.io``) on every kind of path, as root and as a normal
user: a new or regular file is replaced atomically (no temporary file left, its mode kept), a
symlink writes its target, a FIFO receives the bytes and stays a FIFO, ``/dev/null`` and
``/dev/full`` stay character devices (``/dev/full`` is a "no space" error naming it), a socket
receives the bytes, and a loop, a name too long, a folder or a block device is one UserError line
before anything is written.

The devices are only ever written to (never created, replaced or removed), and every test that
writes to one checks afterwards that it is still a character device. The normal user is
``nobody``: a forked child drops root (``setgid``/``setuid``) and runs the same scenarios."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import check_output, output_target, write_json, write_text, write_with

NOBODY = 65534
DATA = {"answer": 42, "text": "é"}
TEXT = json.dumps(DATA, indent=2) + "\n"


def _is_char_device(path: str) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


def _attempt(fn) -> str:
    try:
        return fn() or "ok"
    except UserError as exc:
        return f"UserError: {exc}"
    except OSError as exc:
        return f"OSError {errno.errorcode.get(exc.errno, exc.errno)} {exc.filename}"


def _read_fifo(path: Path, got: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(path, "rb") as f:
            got.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _serve_once(path: Path, got: list[bytes]) -> threading.Thread:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        got.append(b"".join(chunks))
        server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def scenarios(folder: Path) -> dict[str, object]:
    """Write to each kind of path in ``folder`` as the current user; what happened, by case."""
    seen: dict[str, object] = {"uid": os.geteuid()}
    umask = os.umask(0o022)
    try:
        new = folder / "sub" / "new.json"
        seen["new"] = _attempt(lambda: write_json(new, DATA) and None)
        seen["new_text"] = new.read_text() if new.exists() else None
        seen["new_mode"] = oct(stat.S_IMODE(new.stat().st_mode)) if new.exists() else None

        old = folder / "old.json"
        old.write_text("old")
        old.chmod(0o640)
        inode = old.stat().st_ino
        seen["replace"] = _attempt(lambda: write_json(old, DATA) and None)
        seen["replace_text"] = old.read_text()
        seen["replace_mode"] = oct(stat.S_IMODE(old.stat().st_mode))
        seen["replace_new_inode"] = old.stat().st_ino != inode

        keep = folder / "keep.json"
        keep.write_text("keep")
        (folder / "link.json").symlink_to("keep.json")
        seen["symlink"] = _attempt(lambda: write_json(folder / "link.json", DATA) and None)
        seen["symlink_is_link"] = (folder / "link.json").is_symlink()
        seen["symlink_target_text"] = keep.read_text()

        (folder / "dangling.json").symlink_to("made.json")
        seen["dangling"] = _attempt(lambda: write_json(folder / "dangling.json", DATA) and None)
        seen["dangling_target_text"] = (
            (folder / "made.json").read_text() if (folder / "made.json").exists() else None
        )

        (folder / "loop_a").symlink_to("loop_b")
        (folder / "loop_b").symlink_to("loop_a")
        seen["loop"] = _attempt(lambda: write_json(folder / "loop_a", DATA) and None)
        seen["too_long"] = _attempt(lambda: write_json(folder / ("x" * 300), DATA) and None)
        seen["folder"] = _attempt(lambda: write_json(folder / "sub", DATA) and None)

        fifo = folder / "fifo"
        os.mkfifo(fifo)
        got: list[bytes] = []
        reader = _read_fifo(fifo, got)
        seen["fifo"] = _attempt(lambda: write_json(fifo, DATA) and None)
        reader.join(timeout=60)
        seen["fifo_received"] = got[0].decode() if got else None
        seen["fifo_still_fifo"] = stat.S_ISFIFO(os.stat(fifo).st_mode)

        sock = folder / "sock"
        received: list[bytes] = []
        server = _serve_once(sock, received)
        seen["socket"] = _attempt(lambda: write_with(sock, lambda p: p.write_text(TEXT)) and None)
        server.join(timeout=60)
        seen["socket_received"] = received[0].decode() if received else None
        seen["socket_still_socket"] = stat.S_ISSOCK(os.stat(sock).st_mode)
        (folder / "deaf").touch()
        deaf = folder / "deaf.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(deaf))
        listener.close()  # bound, then closed: nobody listens
        seen["deaf_socket"] = _attempt(lambda: write_json(deaf, DATA) and None)

        seen["dev_null"] = _attempt(lambda: write_json("/dev/null", DATA) and None)
        seen["dev_null_still_char"] = _is_char_device("/dev/null")
        seen["dev_full"] = _attempt(lambda: write_json("/dev/full", DATA) and None)
        seen["dev_full_still_char"] = _is_char_device("/dev/full")

        readonly = folder / "readonly.json"  # made by root, owned by the user, mode 0444
        if readonly.exists():
            seen["readonly"] = _attempt(lambda: write_json(readonly, DATA) and None)
            seen["readonly_text"] = readonly.read_text()
        locked = folder / "locked"  # made by root: 0555
        if locked.exists():
            seen["locked_folder"] = _attempt(lambda: write_json(locked / "x.json", DATA) and None)
            seen["locked_left"] = sorted(os.listdir(locked))
        block = folder / "block"  # made by root: a block device node (loop 200, never set up)
        if block.exists():
            seen["block"] = _attempt(lambda: write_json(block, DATA) and None)
        seen["left"] = sorted(p.name for p in folder.rglob("*.tmp"))
    finally:
        os.umask(umask)
    return seen


@pytest.fixture
def shared_folder():
    """A folder a normal user can write in (pytest's own tmp folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="interp-toolkit-outputs-", dir="/tmp"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _prepare_root_cases(folder: Path, owner: int) -> None:
    readonly = folder / "readonly.json"
    readonly.write_text("read-only")
    readonly.chmod(0o444)
    os.chown(readonly, owner, owner)
    (folder / "locked").mkdir(mode=0o555)
    try:
        os.mknod(folder / "block", 0o666 | stat.S_IFBLK, os.makedev(7, 200))
    except OSError:
        pass  # no CAP_MKNOD here: the block-device case is skipped


def _as_nobody(fn, *args) -> dict[str, object]:
    """``fn(*args)`` in a forked child that dropped root for ``nobody``; its JSON result."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001  (reported to the parent)
            result = {"child_error": repr(exc)}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _check_common(seen: dict[str, object]) -> None:
    assert seen["new"] == "ok" and seen["new_text"] == TEXT and seen["new_mode"] == "0o644"
    assert seen["replace"] == "ok" and seen["replace_text"] == TEXT
    assert seen["replace_mode"] == "0o640" and seen["replace_new_inode"]  # renamed into place
    assert seen["symlink"] == "ok" and seen["symlink_is_link"]
    assert seen["symlink_target_text"] == TEXT
    assert seen["dangling"] == "ok" and seen["dangling_target_text"] == TEXT
    assert str(seen["loop"]).startswith("UserError: output") and "symlink loop" in seen["loop"]
    assert "UserError: output: the path is too long" in str(seen["too_long"])
    assert "is a folder" in str(seen["folder"])
    assert seen["fifo"] == "ok" and seen["fifo_received"] == TEXT and seen["fifo_still_fifo"]
    assert seen["socket"] == "ok" and seen["socket_received"] == TEXT
    assert seen["socket_still_socket"]
    assert "nobody listens" in str(seen["deaf_socket"])
    assert seen["dev_null"] == "ok" and seen["dev_null_still_char"]
    assert seen["dev_full"] == "OSError ENOSPC /dev/full" and seen["dev_full_still_char"]
    if "block" in seen:
        assert "is a block device" in str(seen["block"])
    assert seen["left"] == []


def test_every_kind_of_path_as_root(shared_folder):
    if os.geteuid() != 0:
        pytest.skip("runs as root only (the normal-user case is the next test)")
    _prepare_root_cases(shared_folder, 0)
    seen = scenarios(shared_folder)
    _check_common(seen)
    assert seen["readonly"] == "ok" and seen["readonly_text"] == TEXT  # root writes anything
    assert seen["locked_folder"] == "ok"
    assert _is_char_device("/dev/null") and _is_char_device("/dev/full")


def test_every_kind_of_path_as_a_normal_user(shared_folder):
    if os.geteuid() != 0:  # already a normal user: run here
        seen = scenarios(shared_folder)
    else:
        _prepare_root_cases(shared_folder, NOBODY)
        seen = _as_nobody(scenarios, shared_folder)
    assert "child_error" not in seen, seen
    assert seen["uid"] != 0
    _check_common(seen)
    if "readonly" in seen:  # a read-only file is refused, as `>` in a shell refuses it
        assert seen["readonly"] == f"OSError EACCES {shared_folder / 'readonly.json'}"
        assert seen["readonly_text"] == "read-only"
    if "locked_folder" in seen:
        assert seen["locked_folder"] == f"OSError EACCES {shared_folder / 'locked' / 'x.json'}"
        assert seen["locked_left"] == []
    assert _is_char_device("/dev/null") and _is_char_device("/dev/full")


def test_dash_and_dev_stdout_are_standard_output(capfd, tmp_path):
    write_text("-", "to stdout\n")
    write_text("/dev/stdout", "through the device\n")
    out = capfd.readouterr().out
    assert out == "to stdout\nthrough the device\n"
    assert output_target("-").kind == "stdout" and output_target("/dev/stdout").fd == 1
    assert not (tmp_path / "-").exists() and _is_char_device("/dev/null")


def test_check_output_creates_nothing_and_names_the_option(tmp_path):
    target = check_output(tmp_path / "a" / "b" / "c.json", "--json")
    assert target.kind == "file" and not (tmp_path / "a").exists()
    with pytest.raises(UserError, match=r"^--json .* is a folder: give a file name such as"):
        check_output(tmp_path, "--json")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file, not a folder"):
        check_output(tmp_path / "file" / "c.json", "--csv")
    with pytest.raises(UserError, match="--out is an empty path"):
        output_target("", "--out")
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("old")

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as exc:
        write_with(path, half_then_fail)
    assert exc.value.filename == str(path) and path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
