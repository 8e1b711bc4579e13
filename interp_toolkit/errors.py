"""The errors a user sees as one line: bad input (:class:`UserError`, exit 2) and a stop on
request (:class:`Interrupted`, exit 128 + the signal number). Everything else that escapes a
command is a bug: the CLI writes its traceback to a file and says where (:mod:`interp_toolkit.cli.boundary`)."""

from __future__ import annotations

import signal


class UserError(Exception):
    """Bad input from the user. The message names the problem and the fix, on one line."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM, with what was kept and how to go on. A ``KeyboardInterrupt``,
    so code that stops on Ctrl-C stops on it; the CLI prints the message and exits 128 + signal."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(" ".join(message.split()))
        self.exit_code = 128 + int(signum)
