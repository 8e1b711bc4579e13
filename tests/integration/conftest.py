"""Trained models, session-scoped (the cpu preset, 1 and 2 layers): shared by the slow tier."""

from __future__ import annotations

import pytest
import torch


def _train_preset(out, n_layers: int, **overrides):
    from interp_toolkit.training import train_model
    from interp_toolkit.training.presets import get_preset, with_overrides

    p = with_overrides(get_preset("cpu", n_layers), **overrides)
    return train_model(out, p.model, p.data, p.train, preset="cpu", progress=False)


# The cpu preset's layer-1 induction heads form at step 350 for seeds 0-4 (a seed sets the init and
# the data order; experiments/seed_robustness.py, README "Seed robustness"). What they read from in
# layer 0 varies by seed: seeds 0, 1, 2 and 4 grow the textbook K-composition circuit (ablating the
# layer-0 previous-token head collapses the induction heads), seed 3 leans on a duplicate-token head
# as well (mixed). The analysis tests check the textbook circuit, so the fixture uses seed 0 (93% of
# the induction score goes when its previous-token head 0.0 is ablated), trained well past the
# phase change.
FIXTURE_SEED = 0
FIXTURE_STEPS = 700


@pytest.fixture(scope="session")
def trained_2l_result(tmp_path_factory):
    """The cpu preset's 2-layer model (seed 0), trained for 700 steps."""
    torch.set_num_threads(2)
    try:
        return _train_preset(
            tmp_path_factory.mktemp("runs") / "cpu-2l",
            2,
            steps=FIXTURE_STEPS,
            seed=FIXTURE_SEED,
            score_every=25,
        )
    finally:
        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def trained_1l_result(tmp_path_factory, trained_2l_result):
    """The cpu preset's 1-layer model, trained identically (same seed, data and steps)."""
    torch.set_num_threads(2)
    try:
        return _train_preset(
            tmp_path_factory.mktemp("runs") / "cpu-1l",
            1,
            steps=trained_2l_result.steps_done,
            seed=FIXTURE_SEED,
            score_every=25,
        )
    finally:
        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def trained_2l(trained_2l_result):
    return trained_2l_result.run


@pytest.fixture(scope="session")
def trained_1l(trained_1l_result):
    return trained_1l_result.run
