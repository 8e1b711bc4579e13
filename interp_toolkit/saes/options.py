"""The ``sae`` command's settings in one frozen value, checked when it is built (the fields are
its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

from dataclasses import dataclass

from interp_toolkit.errors import UserError
from interp_toolkit.runtime import validate
from interp_toolkit.runtime.options import REQUIRED, option
from interp_toolkit.saes.config import ARCH_NAMES


@dataclass(frozen=True)
class SAEOptions:
    """The SAE ``sae`` trains (each field's help says what it is)."""

    hook: str = option(
        REQUIRED,
        "--hook",
        help="blocks.L.attn.hook_z (all heads), blocks.L.hook_resid_pre / hook_resid_post, or "
        "blocks.L.mlp.hook_post (MLP runs).",
    )
    arch: str = option(
        "topk", "--arch", help=f"{' | '.join(ARCH_NAMES)} (relu: ReLU + L1; saes/architectures.py)."
    )
    expansion: int = option(8, "--expansion", help="Latents per input dimension.")
    k: int = option(32, "--k", help="Active latents per token (the top-k kinds).")
    tokens: int = option(400_000, "--tokens", help="Training activations in all.")
    seed: int = option(0, "--seed", help="Seed of the init and the data order.", after="json_out")
    resume: bool = option(False, "--resume", help="Continue the SAE in --out.")
    show: int = option(24, "--show", help="Latents drawn on features.html.")
    quiet: bool = option(False, "--quiet", help="No progress bars.")

    def __post_init__(self) -> None:
        for name in ("expansion", "k", "tokens", "show"):  # the API's: whole numbers, one line
            if not validate.is_whole(getattr(self, name)):
                validate.count(getattr(self, name), name)
        if self.tokens < 1 or self.show < 1:
            raise UserError("--tokens and --show must be 1 or more.")
