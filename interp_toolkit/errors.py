"""One error type for bad input: the CLI prints its message as one line and exits with code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user. The message names the problem and the fix, on one line."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
