"""The ``circuit`` command's settings in one frozen value, checked when it is built (the fields
are its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass

from interp_toolkit.causal import ROUTE_PROMPTS
from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import option

TASK_NAMES = ("induction", "previous-token", "ioi", "docstring")  # causal/tasks.py TASKS


@dataclass(frozen=True)
class CircuitOptions:
    """What ``circuit`` finds (each field's help says what it is)."""

    task: str = option(
        "induction", "--task", help=f"The behaviour to explain: {', '.join(TASK_NAMES)}."
    )
    edges: int | None = option(
        None,
        "--edges",
        help="Take the top K edges as the circuit (default: the smallest set recovering 80%, pruned).",
    )
    ig_steps: int = option(
        5, "--ig-steps", help="Integrated-gradient steps (EAP-IG); 1 is plain EAP."
    )
    n_prompts: int = option(
        ROUTE_PROMPTS, "--n-prompts", help="Clean/corrupt prompt pairs (64: the study's circuit)."
    )
    per_position: bool = option(
        False, "--per-position", help="Rank (edge, position) pairs instead of edges."
    )
    seed: int = option(
        0,
        "--seed",
        help="Seed of the prompts and intervals: the study's seed S gives its circuit (the "
        "induction task's prompts are drawn as the study draws them).",
    )

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise UserError(f"--task {self.task!r} is unknown: use one of {', '.join(TASK_NAMES)}.")
        if self.ig_steps < 1:
            raise UserError(
                f"--ig-steps {self.ig_steps} cannot work: use 1 (EAP) or more (EAP-IG)."
            )
        if self.edges is not None and self.edges < 1:
            raise UserError(f"--edges {self.edges} cannot work: use 1 or more.")
        if self.n_prompts < 2:
            raise UserError(f"--n-prompts {self.n_prompts} cannot give an interval: use 2 or more.")
