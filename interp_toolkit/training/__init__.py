"""Training on TransformerLens's own loop.

- :mod:`.trainer`     ``train_model``: the whole run, top to bottom
- :mod:`.steplog`     the bookkeeping after every step (metrics, checkpoints, early stop)
- :mod:`.loop`        the adapter around TL's ``train`` (its traps and how they are worked around)
- :mod:`.checkpoints` resumable state in ``RUN/checkpoints/``
- :mod:`.metrics`     metrics.jsonl and "the first step with an induction head"
- :mod:`.settings`    ``TrainSettings`` (what config.json records)
"""

from interp_toolkit.training.metrics import first_induction_step
from interp_toolkit.training.settings import TrainSettings
from interp_toolkit.training.steplog import StepInfo
from interp_toolkit.training.trainer import TrainResult, train_model

__all__ = ["StepInfo", "TrainResult", "TrainSettings", "first_induction_step", "train_model"]
