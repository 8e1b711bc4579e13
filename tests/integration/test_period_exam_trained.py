"""The recipe's claim, on the trained fixtures: two-repeat exams at every period."""

from __future__ import annotations

from interp_toolkit.analysis.period_exam import exam_by_period


def _binomial_upper(chances: list[float], n: int, z: float = 3.0) -> float:
    """Mean + z standard deviations of the total passes of a guesser with these per-period odds."""
    mean = sum(n * c for c in chances)
    return mean + z * sum(n * c * (1 - c) for c in chances) ** 0.5


def test_two_layers_pass_every_period_and_one_layer_guesses(trained_2l, trained_1l):
    """The recipe's claim: the trained 2-layer model passes >= 95% at every period that fits;
    the 1-layer model, trained identically, and the untrained 2-layer model pass no more often
    than guessing among the period's letters (1/period), allowing 3 standard deviations over all
    periods together."""
    from interp_toolkit.models import build_model

    two = exam_by_period(trained_2l.model, trained_2l.codec)
    assert [r.period for r in two] == list(range(2, 17))
    assert min(r.pass_rate for r in two) >= 0.95, [r.to_dict() for r in two]
    untrained = build_model(trained_2l.model_cfg, codec=trained_2l.codec)
    for model in (trained_1l.model, untrained):
        rows = exam_by_period(model, trained_2l.codec)
        passes = sum(round(r.pass_rate * r.n_prompts) for r in rows)
        assert passes <= _binomial_upper([r.chance for r in rows], 30), [r.to_dict() for r in rows]
