"""The sparse autoencoder: one module for every architecture, and its files.

``f = act(pre)``, ``pre = (x - b_dec) @ W_enc + b_enc`` (``apply_b_dec_to_input``, as SAELens),
``x_hat = f @ W_dec + b_dec``. Decoder rows (``W_dec[i]``, the latents' directions; "columns" of
the decoder matrix in the papers' ``x = W_d f`` convention) are kept at unit norm during training
(:meth:`SparseAutoencoder.normalize_decoder` after every step, and the gradient component along
each row removed first, as in Bricken et al. 2023 and Gao et al. 2024), so an activation is the
length of its latent's contribution. SAELens instead trains TopK SAEs with
``rescale_acts_by_decoder_norm`` and folds the norms in when saving; with unit rows the two are
the same function.

``act`` is the architecture's (``topk``, ``batchtopk``, ``relu`` or one registered later): the
class :func:`~.architectures.sae_architecture` gives for ``cfg.arch``, kept as
:attr:`SparseAutoencoder.architecture` (:mod:`.architectures` describes each).
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp_toolkit.errors import UserError
from interp_toolkit.files.io import read_json, write_bytes, write_json
from interp_toolkit.runtime.seeds import rng
from interp_toolkit.saes.architectures import SAEArchitecture, sae_architecture
from interp_toolkit.saes.config import SAEConfig, SAEPaths

#: The tensors every SAE has (SAELens's names), in sae_weights.safetensors' order.
_WEIGHTS = ("W_enc", "b_enc", "W_dec", "b_dec")


class SparseAutoencoder(nn.Module):
    """An SAE over ``d_in``-dimensional activations with ``d_sae`` latents (SAELens's parameter
    names and shapes: ``W_enc [d_in, d_sae]``, ``b_enc``, ``W_dec [d_sae, d_in]``, ``b_dec``)."""

    def __init__(self, cfg: SAEConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.architecture: SAEArchitecture = sae_architecture(cfg.arch)
        gen = rng(seed, "sae_init")
        w_dec = torch.randn(cfg.d_sae, cfg.d_in, generator=gen)
        w_dec = w_dec / w_dec.norm(dim=-1, keepdim=True)
        self.W_dec = nn.Parameter(w_dec)
        self.W_enc = nn.Parameter(w_dec.T.clone().contiguous())  # Gao et al.: the transpose
        self.b_enc = nn.Parameter(torch.zeros(cfg.d_sae))
        self.b_dec = nn.Parameter(torch.zeros(cfg.d_in))
        self.register_buffer("threshold", torch.zeros(cfg.d_sae, dtype=torch.float64))

    # ---------------------------------------------------------------- the function

    def pre(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_sae"]:
        if self.cfg.apply_b_dec_to_input:
            x = x - self.b_dec
        return x @ self.W_enc + self.b_enc

    def activate(self, pre: Float[Tensor, "... d_sae"], train: bool = False) -> Tensor:
        """The latents' activations from their pre-activations (``train``: the architecture's
        training rule, e.g. BatchTopK's batch rule instead of its threshold)."""
        return self.architecture.activate(self, pre, train)

    def encode(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_sae"]:
        return self.activate(self.pre(x))

    def decode(self, f: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_in"]:
        return f @ self.W_dec + self.b_dec

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_in"]:
        return self.decode(self.encode(x))

    # ---------------------------------------------------------------- training helpers

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Every decoder row back to unit norm."""
        self.W_dec.div_(self.W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_grad(self) -> None:
        """Drop the part of each decoder row's gradient along the row (it would only change its
        norm, which :meth:`normalize_decoder` undoes)."""
        g = self.W_dec.grad
        if g is not None:
            g.sub_((g * self.W_dec).sum(-1, keepdim=True) * self.W_dec)

    @torch.no_grad()
    def update_threshold(self, f: Tensor, rate: float) -> None:
        """BatchTopK: move the threshold towards the batch's smallest kept activation (SAELens's
        ``update_topk_threshold``)."""
        pos = f[f > 0]
        if pos.numel():
            self.threshold.mul_(1 - rate).add_(rate * pos.min().double())

    @torch.no_grad()
    def fold_input_scale(self, scale: float) -> None:
        """Trained on ``scale * x``: make the SAE read raw ``x`` and return raw reconstructions,
        activations in raw units (biases and threshold divided by ``scale``; the unit decoder
        rows and the encoder are unchanged, so top-k picks the same latents)."""
        self.b_enc.div_(scale)
        self.b_dec.div_(scale)
        self.threshold.div_(scale)

    def state(self) -> dict[str, Tensor]:
        """The tensors SAELens's ``sae_weights.safetensors`` holds (and the architecture's own,
        e.g. ``threshold`` per latent for a BatchTopK SAE, saved as a JumpReLU)."""
        out = {name: getattr(self, name).detach() for name in _WEIGHTS}
        out |= self.architecture.saved_tensors(self)
        return {k: v.float().cpu().contiguous() for k, v in out.items()}

    @torch.no_grad()
    def load(self, state: dict[str, Tensor], where: Path) -> None:
        """Weights from :meth:`state`'s tensors (shapes checked: one line naming the file)."""
        for name in _WEIGHTS:
            have, want = state.get(name), getattr(self, name)
            if have is None or tuple(have.shape) != tuple(want.shape):
                shape = None if have is None else tuple(have.shape)
                raise UserError(
                    f"SAE weights {where} do not match cfg.json ({name}: {shape}, expected "
                    f"{tuple(want.shape)}): restore the folder, or train the SAE again."
                )
            want.copy_(have)
        if "threshold" in state:
            self.threshold.copy_(state["threshold"].reshape(-1).expand(self.cfg.d_sae))


# -------------------------------------------------------------------- files


def save_sae(folder: str | Path, sae: SparseAutoencoder, extra: dict | None = None) -> SAEPaths:
    """cfg.json and sae_weights.safetensors (each atomically) in ``folder``."""
    from safetensors.torch import save

    paths = SAEPaths(Path(folder))
    write_bytes(paths.weights, save(sae.state()))
    write_json(paths.cfg, sae.cfg.to_saelens(extra))
    return paths


def load_sae(folder: str | Path, device: str | torch.device = "cpu") -> SparseAutoencoder:
    """An SAE folder (ours, or SAELens's flat layout for a registered architecture: topk,
    standard, jumprelu)."""
    from safetensors.torch import load_file

    paths = SAEPaths(Path(folder))
    if not paths.cfg.is_file() or not paths.weights.is_file():
        raise UserError(
            f"{folder} is not an SAE folder (it needs cfg.json and sae_weights.safetensors): "
            "train one with `interp-toolkit sae RUN --hook HOOK --out FOLDER`."
        )
    data = read_json(paths.cfg, "SAE config", "restore it, or train the SAE again.")
    if not isinstance(data, dict):
        raise UserError(f"SAE config {paths.cfg} is not a JSON object: train the SAE again.")
    cfg = SAEConfig.from_saelens(data, paths.cfg)
    try:
        state = load_file(str(paths.weights))
    except Exception as exc:  # safetensors raises several types for damaged files
        raise UserError(
            f"SAE weights {paths.weights} are damaged ({type(exc).__name__}): train the SAE again."
        ) from None
    sae = SparseAutoencoder(cfg)
    sae.load(state, paths.weights)
    return sae.to(device).eval()
