"""Running the command line in-process, as the tests of every command do."""

from __future__ import annotations


def run_main(argv: list[str]) -> int | str | None:
    """``interp-toolkit ARGV`` in this process: its exit code (0 when it returns)."""
    from interp_toolkit.cli import main

    try:
        main(argv)
    except SystemExit as exc:
        return exc.code
    return 0
