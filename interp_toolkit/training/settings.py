"""Training settings: what a run's config.json records under ``settings``, and how a recorded
config compares with a request (resuming a run, or reusing one in a study)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, from_json
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.devices import precision_named
from interp_toolkit.text.stream import DataConfig

#: Learning rates stop below this: far past any that trains, and below where Adam's first step
#: (lr / (1 - beta1)) overflows float32 and crashes (lr=1e38 used to).
LR_MAX = 1e4

#: The default number of log-spaced snapshots (TrainSettings.snapshot_log).
SNAPSHOT_LOG = 32


def snapshot_schedule(steps: int, n_log: int, every: int | None = None) -> tuple[int, ...]:
    """``n_log`` steps spaced evenly in log(step) from 1 to ``steps`` (rounded; duplicates
    merged, so fewer near step 1), with ``steps`` itself, and every multiple of ``every``."""
    log = {steps} if n_log == 1 else {round(steps ** (i / (n_log - 1))) for i in range(n_log)}
    linear = range(every, steps + 1, every) if every else ()
    return tuple(sorted(s for s in log.union(linear) if 1 <= s <= steps))


@dataclass(frozen=True)
class TrainSettings(Jsonable):
    """Optimisation and bookkeeping. The optimizer is TL's AdamW (Adam when weight_decay is None).

    Checkpoints are written after step 1 (so a run stopped early can always resume), every
    ``checkpoint_every`` steps, at the end, and when a stop signal arrives.

    Snapshots (weights only, ``RUN/snapshots/step_N.safetensors``, kept for analysis as
    ``RUN@N``) are written at :meth:`snapshot_schedule`: the explicit ``snapshot_steps`` when
    given, else ``snapshot_log`` log-spaced steps from 1 to ``steps`` (fewer once rounding
    merges the first ones) plus every ``snapshot_every`` steps; and at an early stop."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float | None = 0.0
    warmup_steps: int = 0
    max_grad_norm: float | None = 1.0
    log_every: int = 10
    score_every: int = 100
    #: The text measures and held-out loss every N steps, a multiple of ``score_every`` (None:
    #: at every scoring). The head scores on the synthetic probe are cheap and taken every
    #: ``score_every`` steps, so the phase change is seen densely; the text measures cost a
    #: forward pass over 256 held-out windows (seconds at context 256).
    text_every: int | None = None
    checkpoint_every: int = 200
    snapshot_steps: tuple[int, ...] = ()
    #: Log-spaced snapshots from step 1 to ``steps`` (0: none); the default schedule when
    #: ``snapshot_steps`` is empty (docs/stages.md: the disk cost per run).
    snapshot_log: int = SNAPSHOT_LOG
    #: Linear snapshots every N steps besides the log-spaced ones (None: every ``score_every``
    #: steps, so each has its logged head scores and held-out loss; 0: none).
    snapshot_every: int | None = None
    seed: int = 0
    threads: int | None = None
    #: Stop early once the best layer>=1 induction score has stayed above ``stop_score`` for
    #: ``stop_after`` steps (default: one more scoring, ``score_every``).
    stop_score: float | None = None
    stop_after: int | None = None
    precision: str = "fp32"  # a devices.PRECISIONS name: fp32, tf32 (CUDA only) or bf16
    #: Flush denormal floats to zero on the CPU (``torch.set_flush_denormal``, process-wide):
    #: small attention-only models on text drift into denormals and then run >2x slower in
    #: float32 (measured on the byte preset, docs/recipes.md §1).
    flush_denormal: bool = False

    def validate(self) -> None:
        """Every setting's type and range (a UserError naming it), before any folder is made:
        a NaN or infinite float would train to NaN weights, a wrong type fail mid-run."""
        for name in ("steps", "batch_size", "log_every", "score_every", "checkpoint_every"):
            validate.count(getattr(self, name), name)
        validate.count(self.text_every, "text_every", optional=True)
        if self.text_every is not None and self.text_every % self.score_every:
            raise UserError(
                f"text_every={self.text_every} cannot work with score_every={self.score_every}: "
                "use a multiple of score_every."
            )
        validate.count(self.warmup_steps, "warmup_steps", 0)
        validate.number(self.lr, "lr", above=0, below=LR_MAX)
        betas = self.betas
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise UserError(f"betas={betas!r} cannot work: use a pair such as (0.9, 0.98).")
        for i, beta in enumerate(betas):
            validate.number(beta, f"betas[{i}]", least=0, below=1)
        validate.number(self.weight_decay, "weight_decay", least=0, optional=True)
        validate.number(self.max_grad_norm, "max_grad_norm", above=0, optional=True)
        snaps = self.snapshot_steps
        if not isinstance(snaps, (tuple, list)):
            raise UserError(f"snapshot_steps={snaps!r} cannot work: use a tuple of steps.")
        for step in snaps:
            validate.count(step, "snapshot_steps")
        validate.count(self.snapshot_log, "snapshot_log", 0)
        validate.count(self.snapshot_every, "snapshot_every", 0, optional=True)
        validate.seed(self.seed)
        validate.count(self.threads, "threads", optional=True)
        validate.number(self.stop_score, "stop_score", optional=True)
        validate.count(self.stop_after, "stop_after", optional=True)
        precision_named(self.precision)
        validate.flag(self.flush_denormal, "flush_denormal")

    def snapshot_schedule(self) -> tuple[int, ...]:
        """The steps whose weights are kept (sorted): ``snapshot_steps`` when given, else the
        log-spaced and linear default (:func:`snapshot_schedule`)."""
        if self.snapshot_steps:
            return tuple(sorted(set(self.snapshot_steps)))
        every = self.score_every if self.snapshot_every is None else self.snapshot_every
        return snapshot_schedule(self.steps, self.snapshot_log, every)


def settings_dict(
    data_cfg: DataConfig,
    train_cfg: TrainSettings,
    preset: str | None = None,
    runtime: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``settings`` block of config.json; ``runtime``: where the run started (device, number
    of processes, the precision settings that applied there)."""
    return {
        "preset": preset,
        "data": dataclasses.asdict(data_cfg),
        "train": dataclasses.asdict(train_cfg),
        "runtime": runtime or {},
    }


Configs = tuple[ModelConfig, DataConfig, TrainSettings]

#: Fields a request may leave different from a recorded run: the vocabulary size the codec
#: decided (``d_vocab``). The thread count is part of the recipe: float32 kernels split their
#: sums by thread, so 1 and 2 threads train different weights (docs/devices.md).
DERIVED = (("model", "d_vocab"),)


def recorded_preset_name(config: dict[str, Any]) -> str | None:
    """The preset a run's config.json (``config``) records it was trained from, or None."""
    preset = (config.get("settings") or {}).get("preset")
    return preset if isinstance(preset, str) else None


def recorded_configs(config: dict[str, Any], where: Path) -> Configs:
    """The model, data and training configs a run's config.json (``config``, read from
    ``where``) records; a UserError when it lacks them."""
    settings = config.get("settings") or {}
    if not isinstance(settings.get("data"), dict) or not isinstance(settings.get("train"), dict):
        raise UserError(
            f"{where} records no training settings (the model was saved, not trained, here), "
            "so it has no checkpoint to resume from and cannot be reused: choose another "
            "folder, or train anew in it with --restart."
        )
    try:
        configs = (
            ModelConfig.from_dict(config["model"]),
            from_json(DataConfig, settings["data"]),
            TrainSettings.from_dict(settings["train"]),
        )
        for c in configs:  # each value's type and range (an edited "batch_size": 0)
            c.validate()
    except (TypeError, ValueError) as exc:
        field = str(exc).split(" cannot work")[0]
        raise UserError(f"run config {where} is damaged ({field}): restore it.") from None
    return configs


def config_differences(recorded: Configs, requested: Configs, *, steps: bool = True) -> list[str]:
    """``name=recorded (asked requested)`` for every setting that differs (``steps`` too
    unless ``steps=False``), ignoring :data:`DERIVED`."""
    ignore = set(DERIVED) | (set() if steps else {("train", "steps")})
    out: list[str] = []
    for section, old, new in zip(("model", "data", "train"), recorded, requested, strict=True):
        for f in dataclasses.fields(old):
            a, b = getattr(old, f.name), getattr(new, f.name)
            line = f"{f.name}={a!r} (asked {b!r})"
            if (section, f.name) not in ignore and a != b and line not in out:
                out.append(line)
    return out
