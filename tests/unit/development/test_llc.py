"""The LLC estimator (development/llc.py) on models whose LLC is known, and against devinterp.

Known answer: linear regression with planted redundant parameters, f(x) = (a + b)·x with a, b in
R^d, at the least-squares solution, with the Gaussian negative log-likelihood ½(y - f)² as the
loss. Only a + b is identified, so the model has 2d parameters and its learning coefficient is
d/2 (a regular model of d parameters), not d. For this quadratic loss the tempered posterior the
chains sample (nβ L + γ/2 |w - w*|²) is Gaussian, and the expected estimate has a closed form:
in the eigenbasis of H = XᵀX/n (eigenvalues h) the pair (a_i, b_i) has precision
[[nβh+γ, nβh], [nβh, nβh+γ]], so Var(a_i + b_i) = 2 / (2nβh + γ) and

    E[LLC estimate] = Σ_h nβ h / (2 nβ h + γ)   ->  d/2 as γ -> 0.

The tests fail for an estimator that counts parameters (d), ignores nβ, or forgets the
localisation; and the SGLD update is checked step for step against devinterp's ``SGLD``.
"""

from __future__ import annotations

import math

import pytest
import torch

from interp_toolkit.development.llc import SGLDSettings, estimate_llc, gelman_rubin

D, N = 6, 400


class Redundant(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(d))
        self.b = torch.nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ (self.a + self.b)


def _problem(d: int = D, n: int = N):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g, dtype=torch.float64).float()
    y = x @ torch.linspace(-1, 1, d) + torch.randn(n, generator=g)
    w = torch.linalg.lstsq(x, y[:, None]).solution[:, 0]  # the empirical minimum
    model = Redundant(d)
    with torch.no_grad():
        model.a.copy_(w / 2)
        model.b.copy_(w / 2)
    return model, x, y


def _nll(model: torch.nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return 0.5 * ((y - model(x)) ** 2).mean()


def _expected(x: torch.Tensor, nbeta: float, gamma: float) -> float:
    h = torch.linalg.eigvalsh((x.T @ x / len(x)).double())
    return float((nbeta * h / (2 * nbeta * h + gamma)).sum())


def test_planted_redundant_parameters_give_d_over_two():
    model, x, y = _problem()
    before = [p.detach().clone() for p in model.parameters()]
    nbeta = N / math.log(N)
    settings = SGLDSettings(
        step_size=5e-4, gamma=1.0, nbeta=nbeta, chains=4, draws=800, burn_in=100
    )
    est = estimate_llc(model, [(x, y)], _nll, settings)
    want = _expected(x, nbeta, settings.gamma)
    assert want == pytest.approx(D / 2, rel=0.01)  # γ small against nβh: the limit d/2
    assert est.finite and est.llc == pytest.approx(want, rel=0.12), (est.llc, want)
    assert est.low <= D / 2 * 1.1 and est.high >= D / 2 * 0.9, (est.low, est.high)
    assert abs(est.llc - D) > 1  # the parameter count (2d params -> d) is not the answer
    assert est.traces.shape == (4, 900)
    assert abs(est.r_hat - 1) < 0.05
    for p, w in zip(model.parameters(), before, strict=True):  # the weights are restored
        assert torch.equal(p.detach(), w)


def test_strong_localisation_lowers_the_estimate_as_the_formula_says():
    model, x, y = _problem()
    nbeta, gamma = 20.0, 40.0
    settings = SGLDSettings(
        step_size=1e-3, gamma=gamma, nbeta=nbeta, chains=4, draws=800, burn_in=100
    )
    est = estimate_llc(model, [(x, y)], _nll, settings)
    want = _expected(x, nbeta, gamma)
    assert want < 0.5 * D / 2  # far from d/2: the localisation matters here
    assert est.llc == pytest.approx(want, rel=0.15), (est.llc, want)


def test_each_preset_gets_its_calibrated_settings():
    from interp_toolkit.development.llc import CALIBRATED, calibrated_settings

    text, said = calibrated_settings("text")
    assert text == CALIBRATED["text"] and "text preset" in said
    assert (text.burn_in, text.draws) == (50, 100) and text.gamma == SGLDSettings().gamma
    cpu, said = calibrated_settings("text-bpe")
    assert cpu == SGLDSettings() and "none was done for preset 'text-bpe'" in said


def test_nbeta_none_is_devinterps_default():
    assert SGLDSettings(nbeta=None).nbeta_for(128) == pytest.approx(128 / math.log(128))
    assert SGLDSettings(nbeta=3.0).nbeta_for(128) == 3.0


def test_a_diverging_chain_gives_no_number():
    model, x, y = _problem()
    bad = SGLDSettings(step_size=0.9, gamma=0.0, nbeta=1e4, chains=2, draws=50, burn_in=0)
    est = estimate_llc(model, [(x, y)], _nll, bad)
    assert not est.finite and math.isnan(est.llc)
    assert est.to_dict()["llc"] is None


def test_gelman_rubin_separates_agreeing_from_disagreeing_chains():
    g = torch.Generator().manual_seed(1)
    same = torch.randn(4, 500, generator=g)
    apart = same + torch.arange(4.0)[:, None] * 3
    assert abs(gelman_rubin(same) - 1) < 0.02
    assert gelman_rubin(apart) > 2


@pytest.mark.slow  # importing devinterp (datasets, transformers, xarray) takes seconds
def test_the_sgld_step_is_devinterps():
    """Our chain and devinterp's ``SGLD`` optimizer, fed the same noise generator, take the same
    steps (so our estimator is devinterp's update, with our bookkeeping)."""
    pytest.importorskip("devinterp")
    import warnings

    from devinterp.optim.sgld import SGLD

    from interp_toolkit.development import llc as llc_module
    from interp_toolkit.runtime.seeds import rng

    settings = SGLDSettings(step_size=1e-3, gamma=5.0, nbeta=30.0, chains=2, draws=3, burn_in=2)
    ours, x, y = _problem()
    theirs, _, _ = _problem()
    params = list(ours.parameters())
    center = [p.detach().clone() for p in params]
    gen_ours = rng(settings.seed, "llc_sgld")
    gen_theirs = rng(settings.seed, "llc_sgld")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = SGLD(
            theirs.parameters(),
            lr=settings.step_size,
            localization=settings.gamma,
            nbeta=settings.nbeta,
        )
    for _ in range(5):
        llc_module._sgld_step(ours, params, center, (x, y), _nll, settings, 30.0, gen_ours)
        opt.zero_grad()
        _nll(theirs, (x, y)).backward()
        opt.step(noise_generator=gen_theirs)
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-6)
    assert not torch.equal(params[0].detach(), center[0])  # the chain moved
