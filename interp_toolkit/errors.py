"""The errors a user sees as one line: bad input (:class:`UserError`, exit 2) and a stop on
request (:class:`Interrupted`, exit 128 + the signal number). Everything else that escapes a
command is a bug: the CLI writes its traceback to a file and says where (:mod:`interp_toolkit.cli.boundary`)."""

from __future__ import annotations

import signal


class UserError(ValueError, TypeError):
    """Bad input from the user. The message names the problem and the fix, on one line.

    A ``ValueError`` and a ``TypeError`` too, so code that catches either for a bad argument
    (``except ValueError``) still catches it."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT), SIGTERM or SIGHUP, with what was kept and how to go on (an empty message:
    the CLI says which files were written). A ``KeyboardInterrupt``, so code that stops on Ctrl-C
    stops on it; the CLI prints the message and exits 128 + signal."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(" ".join(message.split()))
        self.signum = int(signum)
        self.exit_code = 128 + int(signum)


def signal_of(interrupt: BaseException) -> str:
    """The name of the signal behind an interrupt (``SIGINT`` for a plain ``KeyboardInterrupt``)."""
    return signal.Signals(getattr(interrupt, "signum", signal.SIGINT)).name


class UnknownTokensWarning(UserWarning):
    """A result on text the model's vocabulary could not read in large part (many ``<unk>``):
    the message says the vocabulary and the share unknown."""


class FewQueriesWarning(UserWarning):
    """A score averaged over fewer queries than :data:`~interp_toolkit.api.MIN_QUERIES`: the
    message names the scores and their counts."""
