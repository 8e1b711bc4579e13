"""The SAE architectures, one class each, and their registry (SAELens's ``register_sae_class``
in one table): everything that differs between architectures is here, so a new one is a class
and a :func:`register_sae_architecture` call, in this module or in the caller's own code.

An architecture says how the latents' activations follow from their pre-activations
(:meth:`~SAEArchitecture.activate`; in training and at inference, which differ for BatchTopK),
which loss terms it adds to the reconstruction error (:meth:`~SAEArchitecture.loss_terms`),
what it does after each optimizer step (:meth:`~SAEArchitecture.after_step`), the tensors beside
``W_enc, b_enc, W_dec, b_dec`` it saves (:meth:`~SAEArchitecture.saved_tensors`), the name and
fields SAELens's cfg.json gives it (``saelens_name``, ``activation_fn``,
:meth:`~SAEArchitecture.saelens_fields`) and the settings it refuses (:meth:`~SAEArchitecture.check`).

- ``topk`` (Gao et al. 2024; SAELens ``TopK``, cfg.json ``"topk"`` with ``k``): keep each row's
  ``k`` largest pre-activations, then ReLU them; trained with the aux-k loss (:func:`aux_k_loss`).
- ``batchtopk`` (Bussmann et al. 2024; SAELens ``BatchTopK``): in training, ReLU, then keep the
  ``k * n`` largest activations of the whole batch of ``n`` rows; a global ``threshold`` follows
  the smallest kept activation (EMA, rate ``threshold_lr``). At inference it is a JumpReLU with
  that threshold (``f = relu(pre) * (pre > threshold)``, one threshold per latent in the file,
  all equal), saved as SAELens saves it: ``"jumprelu"``. Aux-k loss as ``topk``.
- ``relu`` (SAELens ``standard``): ``f = relu(pre)``, trained with an L1 penalty ``l1 * sum(f)``
  (decoder rows have unit norm, so SAELens's ``f * |W_dec|`` is ``f``).

This module imports nothing else of :mod:`interp_toolkit.saes` (the config reads it for
cfg.json, the SAE runs it), so an architecture sees the SAE and the training settings through
what :class:`SAEParts` and :class:`ArchSettings` name. The names the CLI offers (``--arch``,
importable without torch) are :data:`interp_toolkit.saes.config.ARCH_NAMES`, the built-ins here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import Tensor

from interp_toolkit.errors import UserError


@runtime_checkable  # the tests' beartype checks every call
class SAEParts(Protocol):
    """What an architecture may read of the SAE it runs in (a
    :class:`~interp_toolkit.saes.sae.SparseAutoencoder`)."""

    cfg: Any  # its SAEConfig: d_in, d_sae, k, ...
    W_dec: Tensor
    threshold: Tensor  # [d_sae] float64 buffer (BatchTopK's learned threshold; zeros otherwise)

    def update_threshold(self, f: Tensor, rate: float) -> None: ...


@runtime_checkable
class ArchSettings(Protocol):
    """What an architecture may read of the training settings (an
    :class:`~interp_toolkit.saes.config.SAETrainConfig`)."""

    l1: float
    aux_k: float
    threshold_lr: float


class SAEArchitecture:
    """One architecture (module docstring). Subclass it, set the class attributes, override
    :meth:`activate` (and what else differs), then :func:`register_sae_architecture`."""

    #: cfg.json's ``architecture`` (SAELens's name for it).
    saelens_name: ClassVar[str] = "standard"
    #: cfg.json's ``activation_fn``.
    activation_fn: ClassVar[str] = "relu"
    #: ``k`` (active latents per token) is its size: checked, kept in cfg.json and the folder name.
    uses_k: ClassVar[bool] = False

    def activate(self, sae: SAEParts, pre: Tensor, train: bool) -> Tensor:
        """The latents' activations from their pre-activations (``train``: during training)."""
        raise NotImplementedError

    def loss_terms(
        self,
        sae: SAEParts,
        x: Tensor,
        x_hat: Tensor,
        pre: Tensor,
        f: Tensor,
        dead: Tensor,
        tcfg: ArchSettings,
    ) -> dict[str, Tensor]:
        """The loss terms added to the squared error, by name (they are logged under it);
        ``dead``: the latents that did not fire in the last ``dead_window()`` activations."""
        return {}

    def after_step(self, sae: SAEParts, f: Tensor, tcfg: ArchSettings) -> None:
        """Run (without gradients) after each optimizer step, on that step's activations."""

    def saved_tensors(self, sae: SAEParts) -> dict[str, Tensor]:
        """Tensors sae_weights.safetensors holds beside W_enc, b_enc, W_dec, b_dec (a
        ``threshold`` [d_sae] is read back into the SAE's threshold buffer)."""
        return {}

    def saelens_fields(self, cfg: Any) -> dict[str, Any]:
        """cfg.json fields of this architecture beyond the common ones."""
        return {}

    def check(self, k: int) -> None:
        """One line for settings this architecture cannot work with."""
        if self.uses_k and k < 1:
            raise UserError(f"--k {k} cannot work: a top-k SAE keeps 1 or more latents.")


def aux_k_loss(
    sae: SAEParts, x: Tensor, x_hat: Tensor, pre: Tensor, dead: Tensor, coef: float
) -> Tensor:
    """Gao et al.'s auxiliary loss, as SAELens's ``calculate_topk_aux_loss``: the ``k_aux =
    d_in // 2`` largest pre-activations among dead latents reconstruct the residual ``x - x_hat``
    (no bias); scaled by ``min(n_dead / k_aux, 1)``."""
    n_dead = int(dead.sum())
    if n_dead == 0 or coef == 0:
        return x.new_zeros(())
    k_aux = x.shape[-1] // 2
    scale = min(n_dead / k_aux, 1.0)
    k_aux = min(k_aux, n_dead)
    residual = (x - x_hat).detach()
    masked = torch.where(dead[None], pre, -torch.inf)
    top = masked.topk(k_aux, dim=-1, sorted=False)
    acts = torch.zeros_like(pre).scatter(-1, top.indices, top.values)
    return coef * scale * (acts @ sae.W_dec - residual).pow(2).sum(-1).mean()


class ReLU(SAEArchitecture):
    """``relu``: SAELens's ``standard`` SAE, trained with L1."""

    def activate(self, sae: SAEParts, pre: Tensor, train: bool) -> Tensor:
        return pre.relu()

    def loss_terms(
        self,
        sae: SAEParts,
        x: Tensor,
        x_hat: Tensor,
        pre: Tensor,
        f: Tensor,
        dead: Tensor,
        tcfg: ArchSettings,
    ) -> dict[str, Tensor]:
        return {"l1": tcfg.l1 * f.sum(-1).mean()}


class _AuxK(SAEArchitecture):
    """A top-k kind: ``k`` active latents per token, the aux-k loss on dead latents."""

    uses_k = True

    def loss_terms(
        self,
        sae: SAEParts,
        x: Tensor,
        x_hat: Tensor,
        pre: Tensor,
        f: Tensor,
        dead: Tensor,
        tcfg: ArchSettings,
    ) -> dict[str, Tensor]:
        return {"aux_k": aux_k_loss(sae, x, x_hat, pre, dead, tcfg.aux_k)}


class TopK(_AuxK):
    """``topk``: each row's ``k`` largest pre-activations, then ReLU."""

    saelens_name = "topk"
    activation_fn = "topk"

    def activate(self, sae: SAEParts, pre: Tensor, train: bool) -> Tensor:
        vals, idx = pre.topk(min(sae.cfg.k, pre.shape[-1]), dim=-1)
        return torch.zeros_like(pre).scatter(-1, idx, vals.relu())

    def saelens_fields(self, cfg: Any) -> dict[str, Any]:
        return {"k": cfg.k, "activation_fn_kwargs": {"k": cfg.k}}


class BatchTopK(_AuxK):
    """``batchtopk``: the batch's ``k * n`` largest in training, a JumpReLU after (saved so)."""

    saelens_name = "jumprelu"

    def activate(self, sae: SAEParts, pre: Tensor, train: bool) -> Tensor:
        if train:
            acts = pre.relu()
            flat = acts.reshape(-1)
            n = min(flat.numel(), sae.cfg.k * (flat.numel() // pre.shape[-1]))
            top = flat.topk(n)
            return torch.zeros_like(flat).scatter(0, top.indices, top.values).view_as(pre)
        return pre.relu() * (pre > sae.threshold.to(pre.dtype))

    def after_step(self, sae: SAEParts, f: Tensor, tcfg: ArchSettings) -> None:
        sae.update_threshold(f, tcfg.threshold_lr)

    def saved_tensors(self, sae: SAEParts) -> dict[str, Tensor]:
        return {"threshold": sae.threshold.detach()}


# -------------------------------------------------------------------- the registry

_REGISTRY: dict[str, type[SAEArchitecture]] = {}


def register_sae_architecture(name: str, cls: type[SAEArchitecture]) -> type[SAEArchitecture]:
    """Offer ``cls`` as ``arch=name`` (SAEConfig, run_sae, fit_sae, load_sae). A name already
    taken by another class is refused (registering the same class again does nothing)."""
    if not (isinstance(cls, type) and issubclass(cls, SAEArchitecture)):
        raise UserError(f"SAE architecture {name!r} must be a subclass of SAEArchitecture.")
    if _REGISTRY.get(name, cls) is not cls:
        raise UserError(
            f"SAE architecture {name!r} is already registered ({_REGISTRY[name].__name__}): "
            "choose another name."
        )
    _REGISTRY[name] = cls
    return cls


def sae_architectures() -> tuple[str, ...]:
    """The registered names, built-ins first."""
    return tuple(_REGISTRY)


def sae_architecture(name: str) -> SAEArchitecture:
    """The architecture registered as ``name`` (one line naming the registered ones if none)."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise UserError(
            f"--arch {name!r} is not offered: use {', '.join(_REGISTRY)} (a new one is "
            "registered with interp_toolkit.saes.architectures.register_sae_architecture)."
        )
    return cls()


def arch_of_saelens(saelens_name: str) -> str:
    """Our name for an SAELens cfg.json ``architecture`` (the first registered with it; a
    ``KeyError`` for one no registered architecture is saved as)."""
    for name, cls in _REGISTRY.items():
        if cls.saelens_name == saelens_name:
            return name
    raise KeyError(saelens_name)


#: The built-in architectures (``ARCH_NAMES`` in config.py, which the CLI reads, is their names).
BUILTIN: dict[str, type[SAEArchitecture]] = {"topk": TopK, "batchtopk": BatchTopK, "relu": ReLU}
for _name, _cls in BUILTIN.items():
    register_sae_architecture(_name, _cls)
