"""The ``neurons`` command's settings in one frozen value, checked when it is built (the fields
are its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import REQUIRED, option


@dataclass(frozen=True)
class NeuronOptions:
    """What ``neurons`` reads (each field's help says what it is)."""

    layer: int = option(REQUIRED, "--layer", "-l", help="The MLP layer to read.")
    top: int = option(20, "--top", help="Top-activating positions kept per neuron.")
    neuron: list[int] | None = option(
        None, "--neuron", help="Show this neuron (repeatable; default: the highest-firing)."
    )
    show: int = option(16, "--show", help="How many neurons the table and page show.")
    n_seqs: int | None = option(
        None, "--n-seqs", help="Held-out rows to read (default: 16,384 positions in all)."
    )
    seed: int = option(0, "--seed", help="Seed of the held-out rows and the threshold.")

    def __post_init__(self) -> None:
        if self.top < 1 or self.show < 1:
            raise UserError("--top and --show must be 1 or more.")
