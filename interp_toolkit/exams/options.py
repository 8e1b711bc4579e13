"""``exam --periods``' settings in one frozen value, checked when it is built (the fields are its
options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import option


@dataclass(frozen=True)
class PeriodExamOptions:
    """The exams ``exam --periods`` sets (each field's help says what it is)."""

    n_prompts: int = option(  # exams/prompts.py N_PROMPTS: its module imports torch
        200, "--n-prompts", help="Prompts per period and token kind (--periods)."
    )
    seed: int = option(0, "--seed", help="Seed of the period prompts (--periods).")
    kinds: str = option(
        "letters,random", "--kinds", help="Token kinds (--periods): letters, random or both."
    )
    max_period: int | None = option(
        None, "--max-period", help="Longest period (--periods; default: the longest that fits)."
    )
    max_offset: int = option(  # exams/prompts.py MAX_OFFSET: its module imports torch
        64, "--max-offset", help="Longest random prefix before the pattern (--periods)."
    )
    chance_run: str | None = option(
        None,
        "--chance-run",
        help="Another model (e.g. the 1-layer run) to sit the same prompts as a chance level "
        "(--periods).",
    )

    def __post_init__(self) -> None:
        if self.n_prompts < 1:
            raise UserError(f"--n-prompts {self.n_prompts} cannot work: use 1 or more.")
        if self.max_offset < 0:
            raise UserError(f"--max-offset {self.max_offset} cannot work: use 0 or more.")
        if self.max_period is not None and self.max_period < 2:
            raise UserError(f"--max-period {self.max_period} cannot work: use 2 or more.")
        self.token_kinds()

    def token_kinds(self) -> tuple[str, ...]:
        """``kinds`` as a tuple, each a known token kind (one line naming the valid ones)."""
        from interp_toolkit.exams.prompts import TOKEN_KINDS

        kinds = tuple(dict.fromkeys(k.strip() for k in self.kinds.split(",") if k.strip()))
        if not kinds or any(k not in TOKEN_KINDS for k in kinds):
            raise UserError(
                f"--kinds {self.kinds!r}: use a comma-separated list of {', '.join(TOKEN_KINDS)}."
            )
        return kinds

    def exam(self, prepend_bos: bool) -> dict[str, Any]:
        """The keywords of :func:`~interp_toolkit.exams.periods.exam_by_period`."""
        shown = {"kinds": self.token_kinds(), "n_prompts": self.n_prompts, "seed": self.seed}
        shown |= {"prepend_bos": prepend_bos, "max_offset": self.max_offset}
        return shown | ({} if self.max_period is None else {"max_period": self.max_period})
