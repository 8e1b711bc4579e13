"""The ``probe`` command's settings in one frozen value, checked when it is built (the fields are
its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import REQUIRED, option


@dataclass(frozen=True)
class ProbeOptions:
    """What ``probe`` reads (each field's help says what it is)."""

    feature: str = option(
        REQUIRED, "--feature", help="token | prev_token | prev2_token | position | in_repeat"
    )
    data: str | None = option(
        None,
        "--data",
        help="text: held-out windows of the training corpus (default; stdlib for GPT-2) | "
        "repeats: random tokens with one repeated segment (in_repeat's data)",
    )
    ablate: list[str] | None = option(
        None, "--ablate", help="Mean-ablate this head (L.H, repeatable) while reading the stream."
    )
    n_seqs: int | None = option(
        None, "--n-seqs", help="Rows to probe (default: 8,192 positions in all)."
    )
    seq_len: int | None = option(
        None, "--seq-len", help="Tokens per row (default: the context, at most 128)."
    )
    seed: int = option(0, "--seed", help="Seed of the row split, control labels and data.")

    def __post_init__(self) -> None:
        from interp_toolkit.probing.probes import DATA_KINDS, check_feature

        check_feature(self.feature)
        if self.data is not None and self.data not in DATA_KINDS:
            raise UserError(f"--data {self.data!r} is unknown: use {' or '.join(DATA_KINDS)}.")
