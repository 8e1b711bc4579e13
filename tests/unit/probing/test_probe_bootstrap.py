"""Probe statistics without the rare-class bias (issue 30, item 4).

- The bootstrap of balanced accuracy resamples (row, label) cells **within each label**
  (``lda.stratified_weights`` over ``lda.class_units``), so every label is in every resample.
  Resampling whole rows left a rare label out of the resamples that missed its row; when rare
  labels are badly predicted the mean over the labels left is higher than the sample's, and the
  point estimate fell below its own interval.
- The control task uses the task's labels (``data.control_labels``): selectivity compares
  balanced accuracies over the same number of labels.
"""

from __future__ import annotations

import pytest
import torch
from analysis_helpers import make_prev_token_head, tiny_codec

from interp_toolkit.models.build import ModelConfig, build_model
from interp_toolkit.probing import probes
from interp_toolkit.probing.data import feature_inputs, feature_labels
from interp_toolkit.probing.lda import (
    balanced_accuracy,
    class_units,
    fit_probe,
    interval,
    stratified_weights,
)
from interp_toolkit.runtime.seeds import rng


def resample_weights(n_rows: int, n_boot: int, seed: int) -> torch.Tensor:
    """The old bootstrap, compared against here: how often each of ``n_rows`` held-out rows is
    drawn in each of ``n_boot`` resamples (rows with replacement); row 0 is the sample."""
    picks = torch.randint(0, n_rows, (n_boot, n_rows), generator=rng(seed, "probe_bootstrap"))
    weights = torch.zeros(n_boot + 1, n_rows, dtype=torch.float64)
    weights[0] = 1.0
    weights[1:].scatter_add_(1, picks, torch.ones_like(picks, dtype=torch.float64))
    return weights


#: How far the mean of the bootstrap draws may sit from the point estimate.
MEAN_TOLERANCE = 0.005


def _rare_tokens(seed: int = 0, n: int = 200, seq: int = 16, vocab: int = 256):
    """90% of positions one of 16 frequent tokens, the rest one of 240 rare ones: most rare
    tokens of the held-out rows were never seen in training (never predicted right)."""
    gen = torch.Generator().manual_seed(seed)
    freq = torch.rand(n, seq, generator=gen) < 0.9
    common = torch.randint(0, 16, (n, seq), generator=gen)
    return torch.where(freq, common, torch.randint(16, vocab, (n, seq), generator=gen))


def test_the_point_estimate_is_inside_its_interval_with_rare_badly_predicted_labels():
    """The token at the embedding of a d_model-8 model (16 frequent tokens read about 60% right
    in 8 dims, rare ones mostly unseen in training). Measured: balanced accuracy 0.280 over 72
    labels; stratified interval [0.269, 0.291], bootstrap mean 0.280; the row bootstrap gave
    [0.281, 0.392], mean 0.332: the point below its own interval."""
    cfg = ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, n_ctx=16, d_vocab=256)
    model, tokens = build_model(cfg), _rare_tokens()
    row = probes.probe_layers(model, tokens, "token").row("embed")
    lo, hi = row.balanced_ci
    assert row.n_test_classes > 60
    assert lo <= row.balanced <= hi
    assert abs(row.boot_mean - row.balanced) <= MEAN_TOLERANCE
    # the row bootstrap on the same predictions: the point is below its interval
    train_rows, test_rows = probes.split_rows(len(tokens), 0.2, 0)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    acts = probes.stream_at(model, tokens, mask)[0]
    is_train = train_rows[:, None].expand_as(mask)[mask]
    rows = (torch.cumsum(test_rows.long(), 0) - 1)[:, None].expand_as(mask)[mask][~is_train]
    y = tokens[mask]
    pred = fit_probe(acts[is_train], y[is_train]).predict(acts[~is_train])
    weights = resample_weights(int(test_rows.sum()), 1000, 0)
    old = balanced_accuracy(pred, y[~is_train], rows, weights)
    assert float(old[0]) == pytest.approx(row.balanced, abs=1e-4)
    assert float(old[0]) < interval(old)[0]
    assert float(old[1:].mean()) - float(old[0]) > 0.03


def test_a_315_label_simulation_stratified_against_rows():
    """315 labels of Zipf frequencies (exponent 1.1) over 64 rows x 32 positions (251 of them
    drawn); the 20 most frequent labels predicted right 70% of the time, the rest never. Every
    label keeps its cells in every stratified resample. Measured: point 0.061, stratified
    [0.058, 0.064] with mean 0.061; by rows [0.066, 0.078] with mean 0.072, the point outside."""
    gen = torch.Generator().manual_seed(3)
    n_labels, n_rows, seq = 315, 64, 32
    p = 1.0 / torch.arange(1, n_labels + 1).double() ** 1.1
    y = torch.multinomial(p / p.sum(), n_rows * seq, replacement=True, generator=gen)
    rate = torch.where(y < 20, 0.7, 0.0)
    right = torch.rand(len(y), generator=gen, dtype=torch.float64) < rate
    pred = torch.where(right, y, (y + 1) % n_labels)
    row_of = torch.arange(n_rows).repeat_interleave(seq)
    unit_of, unit_label = class_units(y, row_of)
    weights = stratified_weights(unit_label, 1000, seed=0)
    for label in unit_label.unique()[:40]:
        units = unit_label == label
        assert (weights[:, units].sum(1) == units.sum()).all()  # every label, every resample
    new = balanced_accuracy(pred, y, unit_of, weights)
    point = float(new[0])
    lo, hi = interval(new)
    assert lo <= point <= hi
    assert abs(float(new[1:].mean()) - point) <= MEAN_TOLERANCE
    old = balanced_accuracy(pred, y, row_of, resample_weights(n_rows, 1000, seed=0))
    assert float(old[0]) == pytest.approx(point)
    assert point < interval(old)[0] and float(old[1:].mean()) - point > 0.008


def test_stratified_weights_by_hand():
    strata = torch.tensor([5, 5, 5, 9, 2, 2])
    weights = stratified_weights(strata, 500, seed=1)
    assert weights[0].tolist() == [1.0] * 6
    assert (weights[1:, :3].sum(1) == 3).all() and (weights[1:, 3] == 1).all()
    assert (weights[1:, 4:].sum(1) == 2).all()
    assert set(weights[1:, 0].tolist()) == {0.0, 1.0, 2.0, 3.0}  # drawn with replacement


def test_selectivity_compares_the_same_number_of_labels():
    """prev_token after a planted previous-token head (an identity feature: the label is the
    input) and in_repeat (a many-to-one feature): the control has exactly the task's number of
    labels at every boundary. For the identity feature the control is the task relabelled, so
    the probe does the same on both: selectivity 0. (Before, the control drew every value's
    label at random and held a fraction of the task's labels.)"""
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=2, d_head=16, n_ctx=16, d_vocab=16)
    model = build_model(cfg)
    make_prev_token_head(model, 0, 0)
    tokens = torch.randint(0, 16, (200, 16), generator=torch.Generator().manual_seed(0))
    res = probes.probe_layers(model, tokens, "prev_token")
    for row in res.rows:
        assert row.n_control_classes == row.n_test_classes == 16
        assert row.selectivity == 0.0 and row.selectivity_ci == (0.0, 0.0)
    assert res.row("attn 0").balanced > 0.9  # decodable, and still selectivity 0
    # the control's labels over every probed position: as many as the task's
    labels = feature_labels("prev_token", tokens)
    train, _ = probes.split_rows(200, 0.2, seed=0)
    control = probes.control_labels(feature_inputs("prev_token", tokens), labels, train, 16, 0)
    assert len(control[labels >= 0].unique()) == len(labels[labels >= 0].unique())
    mlp = ModelConfig(n_layers=1, d_model=32, n_heads=4, d_head=8, n_ctx=16, d_vocab=64)
    rep = probes.probe(build_model(mlp), tiny_codec(64), "in_repeat", n_seqs=40, model_cfg=mlp)
    assert {(r.n_test_classes, r.n_control_classes) for r in rep.rows} == {(2, 2)}
