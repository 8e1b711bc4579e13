"""An options object's fields declare their command-line flags, once.

An analysis's settings are one frozen dataclass owned beside the analysis (``heads/options.py``,
...); a field the command line sets is declared with :func:`option`: its default, its flags and
its help. :func:`interp_toolkit.cli.app.takes` turns those fields into the command's options (in
field order), and the command, the API (its keywords: :func:`replaced`) and the analysis take the
built object. A new option is one field. This module imports nothing heavy: ``--help`` reads it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from interp_toolkit.errors import UserError

T = TypeVar("T")
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


def replaced(cls: type[T], options: Any, what: str, /, **changes: Any) -> T:
    """``options`` (a ``cls``; None: its defaults) with ``changes`` (the API's keywords) replacing
    its fields, checked as it is built; another type, or a keyword that is no field, is one line
    naming the fields (``what``: whose options, e.g. ``"discovery"``)."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if options is not None and not isinstance(options, cls):
        raise UserError(
            f"options must be a {cls.__name__}, got {type(options).__name__}: e.g. "
            f"{cls.__name__}({names[0]}=...) ({cls.__module__}), or the options as keywords."
        )
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise UserError(
            f"unknown {what} option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)}: the options are {', '.join(names)}."
        )
    return cls(**changes) if options is None else dataclasses.replace(options, **changes)
