"""The in-context score, the repeated-passage loss and induction on text: the formulas on
hand-made losses, and the hand-built K-composition circuit, whose every loss is known."""

from __future__ import annotations

import math

import pytest
import torch
from planting.circuits import GAIN, UNRELATED_GAIN, control_model, k_composition_model

from interp_toolkit.errors import UserError
from interp_toolkit.exams.text_measures import (
    icl_from_losses,
    icl_positions,
    passage_from_losses,
    repeated_passage,
    text_induction,
)

L = 16  # passages of 16 tokens: [w w] fills the circuits' 32-token context


@pytest.mark.parametrize(
    ("n", "early", "late"),
    [
        (32, (2, 4), (30, 32)),
        (64, (3, 7), (59, 63)),
        (128, (5, 13), (118, 126)),
        (512, (19, 51), (469, 501)),  # Olsson et al.: bands ending at token 50 and token 500
    ],
)
def test_icl_positions_scale_olssons_to_the_context(n, early, late):
    assert icl_positions(n) == (early, late)


def test_icl_and_passage_formulas_on_known_losses():
    losses = torch.full((3, 31), 2.0)
    losses[:, 28:] = torch.tensor([[0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [1.5, 1.5, 1.5]])
    icl = icl_from_losses(losses)  # late tokens 30-31 (losses[:, 29:31]) minus tokens 2-3
    assert icl.early == (2, 4) and icl.late == (30, 32) and icl.n_tokens == 32
    assert icl.score.estimate == pytest.approx(-1.0) and icl.score.n == 3
    assert icl.score.low < -1.0 < icl.score.high
    assert "tokens 30-31 minus tokens 2-3 of 32-token windows" in icl.positions()
    p = passage_from_losses(torch.cat([torch.full((2, 16), 3.0), torch.full((2, 15), 1.0)], 1), 16)
    # first copy: losses[:, :15] (tokens 1..15); second: losses[:, 16:31] (tokens 17..31)
    assert (p.first, p.second, p.drop.estimate) == (3.0, 1.0, 2.0) and p.length == 16
    with pytest.raises(UserError, match="too short"):
        icl_positions(3)


def _passages(n_rows: int = 8, seed: int = 0) -> torch.Tensor:
    """Rows of 16 distinct ids of the circuits' vocabulary (no BOS), each followed by itself."""
    g = torch.Generator().manual_seed(seed)
    w = torch.stack([1 + torch.randperm(30, generator=g)[:L] for _ in range(n_rows)])
    return torch.cat([w, w], 1)


def _uniform_copy_loss(q: int) -> float:
    """The K-composition model's loss at position q of the first copy: no key's previous token
    is the query's, so 1.0 attends uniformly to the q + 1 distinct tokens so far and writes
    GAIN / (q + 1) to each; 0.1 adds UNRELATED_GAIN to the current one; the target is unseen."""
    g = GAIN / (q + 1)
    return math.log(q * math.exp(g) + math.exp(g + UNRELATED_GAIN) + (32 - q - 1))


#: On the second copy 1.0 attends to the token after the previous occurrence (GAIN on the
#: target, UNRELATED_GAIN on the current token, 0 elsewhere)...
INDUCED = math.log(1 + (math.exp(UNRELATED_GAIN) + 30) * math.exp(-GAIN))
#: ...except at its first token, whose own token sits at position 0: 0.0 attends to itself
#: there and writes it as position 0's "previous token", so 1.0 splits between keys 0 and 1.
SPLIT = math.log(math.exp(GAIN / 2 + UNRELATED_GAIN) + math.exp(GAIN / 2) + 30) - GAIN / 2


def test_the_k_composition_circuit_has_its_known_losses():
    model = k_composition_model()
    windows = _passages()
    p = repeated_passage(model, windows)
    first = sum(_uniform_copy_loss(q) for q in range(L - 1)) / (L - 1)
    second = (SPLIT + (L - 2) * INDUCED) / (L - 1)
    assert p.length == L and p.first == pytest.approx(first, abs=1e-4)
    assert p.second == pytest.approx(second, abs=1e-4)
    assert p.drop.estimate == pytest.approx(first - second, abs=1e-4)
    m = text_induction(model, windows, passage_rows=4)
    early = (_uniform_copy_loss(1) + _uniform_copy_loss(2)) / 2  # tokens 2, 3
    assert m.icl.score.estimate == pytest.approx(INDUCED - early, abs=1e-4)
    # induction on the text: 1 at 15 of the 16 repeated tokens, 1/2 at the split one
    assert float(m.induction[1, 0]) == pytest.approx(15.5 / 16, abs=1e-4) and m.queries == 128
    assert m.best() == ("1.0", pytest.approx(15.5 / 16, abs=1e-4))
    row = m.metrics()
    assert row["icl_tokens"] == [2, 4, 30, 32, 32] and row["passage_tokens"] == L
    assert row["text_induction_head"] == "1.0" and row["passage_rows"] == 4


def test_without_its_previous_token_head_the_circuit_only_copies():
    """The control (0.0's output zeroed): 1.0 attends uniformly in both copies, so the second
    copy is only a little easier (its tokens are in context twice), the first copy is the same."""
    windows = _passages()
    full = repeated_passage(k_composition_model(), windows)
    control = repeated_passage(control_model("k"), windows)
    assert control.first == pytest.approx(full.first, abs=1e-4)
    assert 0 < control.drop.estimate < 0.5 < 2.0 < full.drop.estimate
    m = text_induction(control_model("k"), windows)
    assert float(m.induction[1, 0]) < 0.15


def test_chunks_change_no_number(monkeypatch):
    """On the CPU the windows go through in chunks sized by their patterns
    (CPU_PATTERN_BYTES): one window at a time gives exactly the numbers of one pass."""
    import interp_toolkit.exams.text_measures as text_measures

    model, windows = k_composition_model(), _passages(n_rows=6, seed=3)
    whole = text_induction(model, windows, passage_rows=4)
    monkeypatch.setattr(text_measures, "CPU_PATTERN_BYTES", 1)  # one window per chunk
    chunked = text_induction(model, windows, passage_rows=4)
    assert chunked.metrics() == whole.metrics() and chunked.val_loss == whole.val_loss
    assert torch.equal(chunked.induction, whole.induction)
