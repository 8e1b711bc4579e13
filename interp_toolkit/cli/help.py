"""``--help`` as a reader wants it: docstrings re-flowed (a wrapped source line is not a line
break on screen) and flags shown without typer's ``<bool>`` type."""

from __future__ import annotations

import inspect
from typing import Any

from typer.models import OptionInfo


def unwrap(doc: str | None) -> str | None:
    """``doc`` with each paragraph on one line (paragraphs stay apart); None stays None."""
    if doc is None:
        return None
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def tidy(app: Any) -> None:
    """Re-flow every registered command's help and hide the type of its flags (in place)."""
    for info in [*app.registered_commands, app.registered_callback]:
        if info is None or info.callback is None:
            continue
        if getattr(info, "help", "") is None:
            info.help = unwrap(info.callback.__doc__)
        for param in inspect.signature(info.callback).parameters.values():
            option = param.default
            if isinstance(option, OptionInfo) and isinstance(option.default, bool):
                option.metavar = option.metavar or ""
