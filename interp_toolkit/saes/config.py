"""What a sparse dictionary is (:class:`SAEConfig`, in SAELens's field names) and how it is
trained (:class:`SAETrainConfig`), and the folder an SAE lives in (:class:`SAEPaths`).

SAELens (6.x) cannot be a dependency: it pins ``transformer-lens<4`` and its top-level import
reaches ``HookedTransformer`` (SAELens issue #738). So we write its file layout instead:

::

    SAE/
      cfg.json                   d_in, d_sae, architecture, hook_name, ... (SAELens names; flat,
                                 as SAELens < 6 wrote them, which SAELens 6 still reads)
      sae_weights.safetensors    W_enc [d_in, d_sae], b_enc [d_sae], W_dec [d_sae, d_in],
                                 b_dec [d_in] (+ threshold [d_sae] for a BatchTopK SAE)
      sparsity.safetensors       "sparsity": log10 feature density on the evaluation tokens
      evals.json                 the metrics (evaluate.py), SAELens's names
      features.json              per-latent data (features.py); index.html, features.html
      checkpoints/               state.json, step_N.safetensors, step_N.optimizer.pt (resume)

Architectures (``--arch``) are classes in a registry (:mod:`.architectures`), each with the name
SAELens gives it on disk: ``topk`` (Gao et al. 2024) is ``"topk"`` with ``k``; ``relu`` (ReLU +
L1) is ``"standard"``; ``batchtopk`` (Bussmann et al. 2024) is saved, as SAELens saves it, as
``"jumprelu"`` with a ``threshold`` per latent (its learned global threshold): at inference it
is a JumpReLU, not a top-k. This module imports no torch (the CLI reads it before torch loads):
it reads the registry only inside the functions that need an architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field

#: The built-in architectures' names, the ``--arch`` choices (torch-free, for ``--help``); the
#: registry (:data:`.architectures.BUILTIN`) holds what each one is, and a test keeps them equal.
ARCH_NAMES = ("topk", "batchtopk", "relu")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class SAEConfig:
    """An SAE's shape and where it reads (the fields of SAELens's cfg.json)."""

    d_in: int
    d_sae: int
    arch: str = "topk"  # a registered architecture (architectures.py): topk | batchtopk | relu
    k: int = 32
    hook_name: str = "blocks.0.hook_resid_pre"
    model_name: str = ""
    context_size: int = 0
    dataset_path: str = ""
    hook_head_index: int | None = None
    dtype: str = "float32"
    apply_b_dec_to_input: bool = True
    normalize_activations: str = "none"

    def check_memory(self) -> None:
        """An SAE must fit in this machine's memory: its encoder and decoder (``d_in`` x
        ``d_sae`` float32 each), their gradients and Adam's two moments, 4 copies of each
        (``--expansion 100000000`` ran out of memory half-way, leaving a folder behind)."""
        import os

        need = 4 * 2 * self.d_in * self.d_sae * 4
        try:
            have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return
        if need > have:
            gib = 2**30
            raise UserError(
                f"an SAE of {self.d_sae:,} latents on {self.d_in} inputs needs about "
                f"{need / gib:,.1f} GiB (its encoder and decoder, their gradients and Adam's "
                f"state: 8 x {self.d_in} x {self.d_sae:,} float32s); this machine has "
                f"{have / gib:.1f} GiB: use a smaller --expansion."
            )

    @property
    def hook_layer(self) -> int | None:
        """The block the hook reads (None for a hook outside the blocks, e.g. toy data)."""
        try:
            return hook_layer(self.hook_name)
        except UserError:
            return None

    @property
    def reshape_activations(self) -> str:
        return "hook_z" if self.hook_name.endswith("hook_z") else "none"

    def to_saelens(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """cfg.json: SAELens's fields, then ours under ``interp_toolkit`` (SAELens drops it)."""
        from interp_toolkit.saes.architectures import sae_architecture

        spec = sae_architecture(self.arch)
        out: dict[str, Any] = {
            "architecture": spec.saelens_name,
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            "dtype": self.dtype,
            "device": "cpu",
            "model_name": self.model_name,
            "hook_name": self.hook_name,
            "hook_layer": self.hook_layer,
            "hook_head_index": self.hook_head_index,
            "activation_fn": spec.activation_fn,
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "normalize_activations": self.normalize_activations,
            "reshape_activations": self.reshape_activations,
            "context_size": self.context_size,
            "dataset_path": self.dataset_path,
            "prepend_bos": False,
            "finetuning_scaling_factor": False,
            "sae_lens_training_version": None,
        }
        out |= spec.saelens_fields(self)
        out["interp_toolkit"] = {"format_version": FORMAT_VERSION, "arch": self.arch, "k": self.k}
        out["interp_toolkit"] |= extra or {}
        return out

    @classmethod
    def from_saelens(cls, data: dict[str, Any], where: Path) -> SAEConfig:
        """Read cfg.json (ours, or a flat SAELens one of a registered architecture)."""
        from interp_toolkit.saes.architectures import arch_of_saelens

        try:
            ours = data.get("interp_toolkit", {})
            arch = ours.get("arch") or arch_of_saelens(data["architecture"])
            return cls(
                d_in=int(data["d_in"]),
                d_sae=int(data["d_sae"]),
                arch=arch,
                k=int(ours.get("k", data.get("k", 0))),
                hook_name=str(data.get("hook_name") or data["metadata"]["hook_name"]),
                model_name=str(data.get("model_name", "")),
                context_size=int(data.get("context_size") or 0),
                dataset_path=str(data.get("dataset_path", "")),
                hook_head_index=data.get("hook_head_index"),
                dtype=str(data.get("dtype", "float32")),
                apply_b_dec_to_input=bool(data.get("apply_b_dec_to_input", True)),
                normalize_activations=str(data.get("normalize_activations") or "none"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(
                f"SAE config {where} is damaged or not an SAE config ({type(exc).__name__}: "
                f"{exc}): restore it, or train the SAE again."
            ) from None


def hook_layer(hook_name: str) -> int:
    """The block a hook name reads (``blocks.1.attn.hook_z`` -> 1)."""
    parts = hook_name.split(".")
    if len(parts) >= 3 and parts[0] == "blocks" and parts[1].isascii() and parts[1].isdigit():
        return int(parts[1])
    raise UserError(
        f"--hook {hook_name!r} is not a block hook: use blocks.L.attn.hook_z, "
        "blocks.L.hook_resid_pre, blocks.L.hook_resid_post or blocks.L.mlp.hook_post."
    )


@dataclass(frozen=True)
class SAETrainConfig(Jsonable):
    """How an SAE is trained. ``tokens``: activations read in all; ``batch``: activations per
    optimizer step. Dead latents (the aux-k loss) are those that did not fire in the last
    ``dead_tokens`` activations (Gao et al. use 10M; short runs scale it, see
    :meth:`dead_window`). ``l1`` is the ReLU SAE's L1 coefficient (on activations times decoder
    norms, which are 1); ``aux_k`` the aux-k loss coefficient (SAELens's default, 1.0), its
    ``k_aux`` is ``d_in // 2`` (SAELens's heuristic, after Gao et al. B.1)."""

    tokens: int = 400_000
    batch: int = 1024
    lr: float = 1e-3
    l1: float = 5.0
    aux_k: float = 1.0
    threshold_lr: float = 0.01  # BatchTopK threshold EMA (SAELens topk_threshold_lr)
    dead_tokens: int | None = None
    seed: int = 0
    checkpoint_every: int = 100
    batches_per_block: int = 8
    extra: dict[str, Any] = field(default_factory=dict, metadata=json_field(inline=True))

    @property
    def steps(self) -> int:
        return max(1, self.tokens // self.batch)

    def dead_window(self) -> int:
        """Activations without firing after which a latent counts as dead."""
        if self.dead_tokens is not None:
            return self.dead_tokens
        return min(10_000_000, max(10 * self.batch, self.tokens // 10))

    def validate(self) -> None:
        if self.tokens < self.batch:
            raise UserError(f"--tokens {self.tokens} is less than one batch ({self.batch}).")
        if self.batch < 2 or self.lr <= 0 or self.l1 < 0 or self.aux_k < 0:
            raise UserError("batch >= 2, lr > 0, l1 >= 0 and aux_k >= 0 are needed.")


def check_shape(arch: str, k: int, expansion: int) -> None:
    """One line for a dictionary that cannot work (an unregistered ``arch``, or settings its
    architecture refuses: :meth:`~.architectures.SAEArchitecture.check`)."""
    from interp_toolkit.saes.architectures import sae_architecture

    spec = sae_architecture(arch)
    if expansion < 1:
        raise UserError(f"--expansion {expansion} cannot work: use 1 or more.")
    spec.check(k)


@dataclass(frozen=True)
class SAEPaths:
    """The files of an SAE folder (the one place their names are written)."""

    root: Path

    cfg = property(lambda self: self.root / "cfg.json")
    weights = property(lambda self: self.root / "sae_weights.safetensors")
    sparsity = property(lambda self: self.root / "sparsity.safetensors")
    evals = property(lambda self: self.root / "evals.json")
    features = property(lambda self: self.root / "features.json")
    index = property(lambda self: self.root / "index.html")
    pages = property(lambda self: self.root / "features.html")
    checkpoints = property(lambda self: self.root / "checkpoints")
    state = property(lambda self: self.checkpoints / "state.json")

    def checkpoint_weights(self, step: int) -> Path:
        return self.checkpoints / f"step_{step}.safetensors"

    def checkpoint_optimizer(self, step: int) -> Path:
        return self.checkpoints / f"step_{step}.optimizer.pt"
