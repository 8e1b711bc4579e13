"""The ``train`` command's settings in one frozen value, checked when it is built (the fields
are its options, in this order). Imports no torch: ``--help`` reads it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.runtime.options import option

CHANGES = ("steps", "corpus", "seed", "n_ctx", "d_model", "vocab_size", "repeat_fraction")


@dataclass(frozen=True)
class TrainOptions:
    """The run ``train`` makes: the recipe's changes (None: the preset's), and the folder's fate."""

    layers: int | None = option(
        None,
        "--layers",
        help="Number of layers, any whole number from 1 (default 2; the study trains 1, 2, 3, 8).",
    )
    preset: str | None = option(
        None,
        "--preset",
        help="cpu (minutes on a laptop CPU; the default), text (plain text, no synthetic "
        "windows; see docs/recipes.md) or post (the post's recipe; GPU; earlier named seed).",
    )
    steps: int | None = option(
        None,
        "--steps",
        help="Train exactly this many optimizer steps (default: the preset's budget, stopping "
        "once induction has formed; see --all-steps).",
    )
    all_steps: bool = option(
        False,
        "--all-steps",
        help="Train the preset's whole budget. Without it (and without --steps) a 2+-layer "
        "model stops as a study's does: once its induction score has stayed above the floor "
        "for the preset's after-induction steps (the first line printed says how many).",
    )
    corpus: str | None = option(
        None,
        "--corpus",
        help="stdlib | text file or folder | .parquet/.jsonl/save_to_disk PATH[#COLUMN] | "
        "hf:NAME[:SPLIT] (default: stdlib).",
    )
    seed: int | None = option(None, "--seed", help="Seed for init and data order.")
    n_ctx: int | None = option(None, "--n-ctx", help="Override the context length.")
    d_model: int | None = option(None, "--d-model", help="Override d_model (n_heads * d_head).")
    vocab_size: int | None = option(
        None, "--vocab-size", help="Override the compact vocabulary size."
    )
    repeat_fraction: float | None = option(
        None,
        "--repeat-fraction",
        help="Share of every batch made of repeated-span windows, 0..1 (0 = plain text; "
        "default: the preset's).",
    )
    mlp: bool = option(
        False, "--mlp", help="Add an MLP (4 x d_model GELU neurons) and LayerNorm to every block."
    )
    resume: bool = option(
        False,
        "--resume",
        help="Continue the run in --out from its last checkpoint, as it was configured "
        "(--steps may change its length; other options must match it).",
    )
    restart: bool = option(
        False, "--restart", help="Discard the run in --out (says what goes) and train it anew."
    )
    quiet: bool = option(False, "--quiet", help="No progress output.")
    precision: str | None = option(
        None,
        "--precision",
        help="fp32 (default), tf32 (TF32 matmuls; CUDA only, ignored on CPUs) or bf16 (bf16 "
        "autocast on GPUs and CPUs, float32 weights and loss; + TF32 on CUDA); config.json "
        "records what applied.",
        after="device",
    )

    def __post_init__(self) -> None:
        if isinstance(self.corpus, os.PathLike):  # the API's: recorded in config.json as text
            object.__setattr__(self, "corpus", os.fspath(self.corpus))
        share = self.repeat_fraction
        if share is not None and not 0.0 <= share <= 1.0:
            raise UserError(
                f"--repeat-fraction {share} is not a share: give a number from 0 (plain "
                "text) to 1 (only repeated-span windows)."
            )

    def recipe(self, out: Path, **fields: Any) -> Any:
        """The preset these options make (:func:`~interp_toolkit.training.presets.recipe`: d_head
        and d_mlp follow d_model) for the run folder ``out``; ``fields``: other fields of the
        recipe's model, data or training settings (the API's keywords: ``batch_size=``...)."""
        from interp_toolkit.training.presets import recipe

        changes: dict[str, Any] = {k: getattr(self, k) for k in CHANGES} | fields
        return recipe(
            self.preset,
            self.layers,
            mlp=self.mlp,
            resumed=out if self.resume else None,
            all_steps=self.all_steps,
            precision=self.precision,
            **changes,
        )

    def train(self, out: Path, p: Any, device: str = "auto", resume: bool = False) -> Any:
        """Train the recipe ``p`` (:meth:`recipe`'s) into ``out`` as these options say
        (:func:`~interp_toolkit.training.train_model`; ``resume``: the API's run found there)."""
        from interp_toolkit.training import train_model

        return train_model(
            out,
            p.model,
            p.data,
            p.train,
            resume=resume or self.resume,
            restart=self.restart,
            preset=p.name,
            progress=not self.quiet,
            device=device,
        )
