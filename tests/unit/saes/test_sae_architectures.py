"""The SAE architecture registry (interp_toolkit/saes/architectures.py): a new architecture is a
class and one ``register_sae_architecture`` call, made here without editing the package, and it
trains, saves, loads and is evaluated through the public functions; the CLI's torch-free names
are the built-ins; an unknown name is one line naming the registered ones."""

from __future__ import annotations

import json

import pytest
import torch

from interp_toolkit.errors import UserError
from interp_toolkit.saes import architectures
from interp_toolkit.saes.architectures import (
    BUILTIN,
    ReLU,
    SAEArchitecture,
    register_sae_architecture,
    sae_architecture,
    sae_architectures,
)
from interp_toolkit.saes.config import ARCH_NAMES, SAEConfig, SAETrainConfig, check_shape
from interp_toolkit.saes.evaluate import evaluate_sae
from interp_toolkit.saes.sae import SparseAutoencoder, load_sae, save_sae
from interp_toolkit.saes.train import fit_sae

THRESHOLD = 0.25


class FixedThresholdReLU(ReLU):
    """A JumpReLU with a fixed threshold: ``relu(pre) * (pre > 0.25)``, trained with L1 (the
    base's loss), saved as SAELens's ``jumprelu`` with its threshold."""

    saelens_name = "jumprelu"

    def activate(self, sae, pre, train):
        return pre.relu() * (pre > THRESHOLD)

    def saved_tensors(self, sae):
        return {"threshold": torch.full((sae.cfg.d_sae,), THRESHOLD)}


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test (a toy architecture stays in its test)."""
    monkeypatch.setattr(architectures, "_REGISTRY", dict(architectures._REGISTRY))


def test_the_clis_names_are_the_builtin_architectures():
    assert ARCH_NAMES == tuple(BUILTIN) == sae_architectures()[: len(BUILTIN)]
    assert all(isinstance(sae_architecture(n), BUILTIN[n]) for n in ARCH_NAMES)


def test_an_unknown_architecture_is_one_line_naming_the_registered_ones(registry):
    with pytest.raises(UserError, match="not offered: use topk, batchtopk, relu ") as err:
        sae_architecture("gated")
    assert "\n" not in str(err.value) and "register_sae_architecture" in str(err.value)
    with pytest.raises(UserError, match="'gated' is not offered"):
        check_shape("gated", 4, 8)
    with pytest.raises(UserError, match="'gated' is not offered"):
        SparseAutoencoder(SAEConfig(d_in=4, d_sae=8, arch="gated"))
    register_sae_architecture("fixed", FixedThresholdReLU)
    with pytest.raises(UserError, match="topk, batchtopk, relu, fixed "):
        sae_architecture("gated")


def test_a_name_is_registered_once(registry):
    register_sae_architecture("fixed", FixedThresholdReLU)
    register_sae_architecture("fixed", FixedThresholdReLU)  # the same class again: no change
    with pytest.raises(UserError, match="already registered"):
        register_sae_architecture("fixed", ReLU)
    with pytest.raises(UserError, match="already registered"):
        register_sae_architecture("topk", FixedThresholdReLU)
    with pytest.raises(TypeError):  # a UserError, or the tests' type checker before it
        register_sae_architecture("plain", object)  # type: ignore[arg-type]
    assert sae_architectures() == (*ARCH_NAMES, "fixed")


def test_the_base_checks_k_only_for_an_architecture_sized_by_k():
    class Sized(SAEArchitecture):
        uses_k = True

    Sized().check(1)
    SAEArchitecture().check(0)
    with pytest.raises(UserError, match="--k 0 cannot work"):
        Sized().check(0)


def test_a_registered_architecture_trains_saves_loads_and_evaluates(registry, tiny_model, tmp_path):
    """End to end through fit_sae, save_sae, load_sae and evaluate_sae on a tiny model's
    hook_z, with no package file knowing the architecture."""
    from interp_toolkit.saes.activations import read_hook

    register_sae_architecture("fixed", FixedThresholdReLU)
    hook = "blocks.1.attn.hook_z"
    check_shape("fixed", 0, 4)

    def blocks(b):
        gen = torch.Generator().manual_seed(100 + b)
        return read_hook(tiny_model, torch.randint(1, 62, (64, 32), generator=gen), hook)

    cfg = SAEConfig(d_in=32, d_sae=128, arch="fixed", k=0, hook_name=hook)
    tcfg = SAETrainConfig(tokens=4096, batch=256, lr=1e-2, l1=0.5)
    trained = fit_sae(blocks, cfg, tcfg)
    sae = trained.sae
    assert set(trained.last) == {"mse", "l1", "l0"}  # the base ReLU's L1 term, by its name
    x = blocks(0)
    pre = sae.pre(x)
    assert torch.equal(sae.encode(x), pre.relu() * (pre > THRESHOLD))
    assert 0 < trained.last["l0"] < 128

    folder = save_sae(tmp_path / "sae", sae).root
    data = json.loads((folder / "cfg.json").read_text())
    assert data["architecture"] == "jumprelu" and data["interp_toolkit"]["arch"] == "fixed"
    back = load_sae(folder)
    assert isinstance(back.architecture, FixedThresholdReLU)
    assert torch.allclose(back.threshold, torch.full((128,), THRESHOLD, dtype=torch.float64))
    assert torch.equal(back.encode(x), sae.encode(x))

    tokens = torch.randint(1, 62, (8, 32), generator=torch.Generator().manual_seed(7))
    metrics = evaluate_sae(tiny_model, back, tokens)
    assert metrics.n_tokens == 8 * 32 and 0 < metrics.l0 < 128
    assert metrics.explained_variance > 0  # better than predicting the mean
