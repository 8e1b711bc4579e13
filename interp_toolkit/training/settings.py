"""Training settings: what a run's config.json records under ``settings``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from interp_toolkit.data import DataConfig
from interp_toolkit.devices import precision_named
from interp_toolkit.errors import UserError


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation and bookkeeping. The optimizer is TL's AdamW (Adam when weight_decay is None)."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float | None = 0.0
    warmup_steps: int = 0
    max_grad_norm: float | None = 1.0
    log_every: int = 10
    score_every: int = 100
    checkpoint_every: int = 200
    snapshot_steps: tuple[int, ...] = ()
    seed: int = 0
    threads: int | None = None
    stop_score: float | None = None  # stop early once the best induction score stays above this
    precision: str = "fp32"  # a devices.PRECISIONS name: fp32, tf32 or bf16 (GPUs only)

    def validate(self) -> None:
        for name in ("steps", "batch_size", "log_every", "score_every", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise UserError(f"{name}={getattr(self, name)} must be a positive integer.")
        if not self.lr > 0:
            raise UserError(f"lr={self.lr} must be positive.")
        precision_named(self.precision)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainSettings:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for key in ("snapshot_steps", "betas"):
            if key in kw:
                kw[key] = tuple(kw[key])
        return cls(**kw)


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
