"""interp-toolkit: grow small attention-only transformers, watch induction heads appear, and find
the same circuits (previous-token, duplicate-token and induction heads) in GPT-2.

The notebook API (:mod:`interp_toolkit.api`), importable from here::

    from interp_toolkit import load, train, scores_on, discover, exam, view

- :func:`load`: a run folder, a GPT-2 name or folder -> ``.model`` (a TransformerBridge), ``.codec``
- :func:`train`: train into a run folder (``exist_ok="load"``: re-running the cell loads it)
- :func:`scores_on`: every head's scores on your own prompt or tokens
- :func:`discover`: heads with roles, against a null-model threshold τ
- :func:`exam`: the repeated-pattern exam
- :func:`view`: attention patterns, drawn inline (every layer in one object)
- :func:`sae`: a sparse autoencoder at a hook, with SAELens's metrics and feature pages

The folders underneath, one per question, each reading only those before it (docs/architecture.md):
``runtime``, ``files`` → ``text`` → ``models`` → ``runs`` → ``stats`` → ``heads`` → ``weights`` →
``causal`` → ``exams``, ``probing``, ``units`` → ``saes`` → ``training``, ``development`` →
``measures`` → ``views`` → ``reports`` → ``study`` → ``commands`` → ``cli``. Importing this package is light: the API (torch, TransformerLens) loads on first use (``__getattr__``; the
package imports none of its modules itself, since every module imports it).
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import Any


def _version() -> str:
    """The installed version, read on first use (importlib.metadata costs ~50 ms at start-up)."""
    from importlib import metadata

    try:
        return metadata.version("interp-toolkit")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


__all__ = [
    "UserError",
    "__version__",
    "discover",
    "exam",
    "load",
    "sae",
    "scores_on",
    "train",
    "view",
]

# Without ipywidgets, tqdm.auto falls back to text bars (sparse ones: interp_toolkit.runtime.progress) and
# warns once, whoever imports it first (TransformerLens does): the fallback is fine, so it is quiet.
warnings.filterwarnings("ignore", message="IProgress not found")

_LAZY = {name: "interp_toolkit.api" for name in __all__[2:]} | {
    "UserError": "interp_toolkit.errors"
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'interp_toolkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
