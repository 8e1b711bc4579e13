"""The ``stages`` command's settings in one frozen value, checked once when it is built (the
fields with flags are its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import option
from interp_toolkit.stats.thresholds import BANDWIDTH, MIN_SWING

_CAL = "Default: the one calibrated for the run's preset (docs/stages.md, 'Settings')."
SGLD = ("step_size", "gamma", "nbeta", "chains", "draws", "burn_in")


@dataclass(frozen=True)
class StagesOptions:
    """The SGLD settings given (None: the run's preset's calibrated one), the batches the LLC
    reads, the checkpoints, the seed, ``reuse`` (the rule again on the kept LLC) and the rule's
    settings (``bandwidth``, ``min_swing``: ``stats/thresholds.py`` BANDWIDTH, MIN_SWING)."""

    step_size: float | None = option(None, "--step-size", help=f"SGLD step size ε. {_CAL}")
    gamma: float | None = option(None, "--gamma", help=f"Localisation strength γ. {_CAL}")
    nbeta: float | None = option(None, "--nbeta", help=f"Inverse temperature nβ. {_CAL}")
    chains: int | None = option(
        None, "--chains", help=f"SGLD chains per checkpoint (2 or more). {_CAL}"
    )
    draws: int | None = option(None, "--draws", help=f"Draws per chain, after the burn-in. {_CAL}")
    burn_in: int | None = option(None, "--burn-in", help=f"Burn-in steps per chain. {_CAL}")
    n_batches: int = option(
        4, "--batches", help="Training batches the LLC reads (the run's first steps')."
    )
    rows: int = option(16, "--rows", help="Rows of each batch (spread over the batch).")
    max_step: int | None = option(
        None, "--max-step", help="Only the kept checkpoints up to this step."
    )
    seed: int = option(0, "--seed", help="Seed of the SGLD noise.")
    reuse: bool = option(
        False,
        "--reuse",
        help="Read the LLC kept in RUN/stages.json and apply the rule again "
        "(no SGLD: the stages, routes and rule settings are redone).",
    )
    bandwidth: float = option(
        BANDWIDTH, "--bandwidth", help="The rule's smoothing width, in natural-log steps."
    )
    min_swing: float = option(
        MIN_SWING,
        "--min-swing",
        help="The rule's floor: a boundary's swings, as a share of the range.",
    )

    def __post_init__(self) -> None:
        from interp_toolkit.development.llc import SGLDSettings

        replace(SGLDSettings(), **self.sgld, seed=self.seed).validate()
        for name, value in (("--batches", self.n_batches), ("--rows", self.rows)):
            if value < 1:
                raise UserError(f"{name}={value} cannot work: use a whole number, 1 or more.")
        if not self.bandwidth > 0 or not 0 <= self.min_swing < 1:
            raise UserError(
                f"--bandwidth {self.bandwidth} --min-swing {self.min_swing} cannot work: use a "
                "bandwidth above 0 and a floor from 0 to below 1."
            )
        if self.reuse and (self.sgld or self.max_step is not None):
            raise UserError(
                "--reuse reads the estimates RUN/stages.json keeps: drop the SGLD and --max-step "
                "flags, or run without --reuse to estimate again."
            )

    @property
    def sgld(self) -> dict[str, Any]:
        """The SGLD settings given (the rest are calibrated for the run's preset)."""
        return {k: getattr(self, k) for k in SGLD if getattr(self, k) is not None}

    @property
    def rule(self) -> dict[str, float]:
        return {"bandwidth": self.bandwidth, "min_swing": self.min_swing}
