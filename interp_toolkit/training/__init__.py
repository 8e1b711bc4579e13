"""Training on TransformerLens's own loop.

- :mod:`.trainer`     ``train_model``: the whole run, top to bottom
- :mod:`.steplog`     the bookkeeping after every step (metrics, checkpoints, early stop)
- :mod:`.loop`        the adapter around TL's ``train`` (its traps and how they are worked around)
- :mod:`.checkpoints` resumable state in ``RUN/checkpoints/``
- :mod:`.metrics`     metrics.jsonl (the first induction step: :mod:`interp_toolkit.heads.induction`)
- :mod:`.settings`    ``TrainSettings`` (what config.json records)
- :mod:`.options`     ``TrainOptions`` (the ``train`` command's options; no torch)

The names below are imported when first used, so ``--help`` reads :mod:`.options` without torch.
"""

from importlib import import_module
from typing import Any

_OWNERS = {
    "StepInfo": "training.steplog",
    "TrainResult": "training.trainer",
    "TrainSettings": "training.settings",
    "first_induction_step": "heads.induction",
    "train_model": "training.trainer",
}
__all__ = sorted(_OWNERS)


def __getattr__(name: str) -> Any:
    if name not in _OWNERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"interp_toolkit.{_OWNERS[name]}"), name)
