"""An options object's fields declare their command-line flags, once.

An analysis's settings are one frozen dataclass owned beside the analysis (``heads/options.py``,
...); a field the command line sets is declared with :func:`option`: its default, its flags and
its help. :func:`interp_toolkit.cli.app.takes` turns those fields into the command's options (in
field order), and the command, the API and the analysis take the built object. A new option is
one field. This module imports nothing heavy: ``--help`` reads it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

FLAGS = "flags"
REQUIRED: Any = dataclasses.MISSING  # the default of an option that must be given


def option(default: Any, *flags: str, help: str, after: str | None = None) -> Any:
    """A dataclass field set by ``flags`` (``default`` :data:`REQUIRED`: it must be given);
    ``after``: this field and the next ones follow the command's own parameter of that name
    (in ``--help``), not its ``options``."""
    metadata = {FLAGS: flags, "help": help} | ({} if after is None else {"after": after})
    return dataclasses.field(default=default, metadata=metadata)


def flagged(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` the command line sets, in their order."""
    return [f for f in dataclasses.fields(cls) if FLAGS in f.metadata]
