"""The one in-process runner of the command line for the tests: ``interp-toolkit ARGV`` through
``cli.main`` (as the console script runs it), with its exit code and what it printed."""

from __future__ import annotations

from typing import Any, NamedTuple


class CliResult(NamedTuple):
    code: int
    out: str
    err: str

    def one_line_error(self, match: str = "", code: int = 2) -> str:
        """The error line, checked: exit ``code``, one line starting ``error:`` holding
        ``match``, no traceback."""
        err = self.err.strip()
        assert self.code == code, (self.code, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("error: ") and match in err, err
        return err


def run_cli(capsys: Any, *args: Any) -> CliResult:
    """Run ``interp-toolkit ARGS`` (each converted with ``str``) here; ``capsys`` (or ``capfd``)
    captures what it prints."""
    from interp_toolkit.cli import main

    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def run_main(argv: list[str]) -> int:
    """``interp-toolkit ARGV`` in this process: its exit code (0 when it returns); output is left
    to pytest's capture."""
    from interp_toolkit.cli import main

    try:
        main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
