"""Which heads are "the induction heads": one definition for the study page, the run report, the
route by path and training's stop rule.

- The score: the one that decides the induction role (:data:`INDUCTION_SCORE`, the value-weighted
  induction score by default; ``deciders("plain")`` switches a report to the plain one). Training
  logs it every ``score_every`` steps (``metrics.jsonl`` key :func:`logged_induction_key`; runs
  written before it was logged fall back to the plain score).
- The layers: induction composes with an earlier layer, so a head counts from layer
  :func:`induction_layer_min` on (layer 1; any layer of a 1-layer model).
- :func:`strongest_induction_head`: the highest score in those layers (the first in layer-major
  order on a tie): what the stop rule watches, the run report draws and the study page names.
- :func:`induction_heads`: the heads in those layers with the induction role (significant against
  their null and at least the floor): the heads whose route the study measures.

The head that feeds an induction head is measured, not chosen from weights: the route by path
(:class:`~interp_toolkit.causal.routes.HeadRoute` ``feeder``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float

from interp_toolkit.heads.registry import DEFAULT_DECIDERS, SCORE, HeadId, top_head

if TYPE_CHECKING:
    from interp_toolkit.heads.discovery import HeadReport

#: The score that decides the induction role by default, and so names the induction heads.
INDUCTION_SCORE = DEFAULT_DECIDERS["induction"]

Grid = Float[torch.Tensor, "layer head"] | Sequence[Sequence[float]]


def induction_layer_min(n_layers: int) -> int:
    """The first layer an induction head can be in: 1 (it composes with an earlier layer), or 0
    in a 1-layer model."""
    return 1 if n_layers > 1 else 0


def _tensor(grid: Grid) -> torch.Tensor:
    # float64: a logged 0.4 must not read as 0.4000000059604645 (above a 0.4 threshold)
    return grid if isinstance(grid, torch.Tensor) else torch.tensor(grid, dtype=torch.float64)


def strongest_induction_head(grid: Grid) -> HeadId:
    """The head with the highest induction score in layers >= :func:`induction_layer_min`."""
    scores = _tensor(grid)
    head = top_head(scores, layers=range(induction_layer_min(scores.shape[0]), scores.shape[0]))
    assert head is not None  # every layer has heads
    return head


def best_induction_score(grid: Grid) -> float:
    """The score of :func:`strongest_induction_head`."""
    return float(_tensor(grid)[strongest_induction_head(grid)])


def induction_heads(report: HeadReport) -> list[HeadId]:
    """The heads with the induction role in layers >= :func:`induction_layer_min`."""
    layer_min = induction_layer_min(report.scores.n_layers)
    return [h for h in report.heads_with_role("induction") if h.layer >= layer_min]


def logged_induction_key(row: Mapping[str, Any]) -> str | None:
    """The metrics.jsonl key of the induction score a row logged: the deciding score's, else the
    plain score's (runs written before the deciding score was logged); None when neither."""
    for name in (INDUCTION_SCORE, "induction"):
        key = SCORE[name].logged_as
        if row.get(key):
            return key
    return None


def first_induction_step(
    rows: Sequence[Mapping[str, Any]], threshold: float | None = None
) -> int | None:
    """The first logged step whose :func:`best_induction_score` passes ``threshold`` (default:
    the registry's effect-size floor of the induction score)."""
    threshold = SCORE[INDUCTION_SCORE].floor if threshold is None else threshold
    for row in rows:
        key = logged_induction_key(row)
        if key is not None and best_induction_score(row[key]) > threshold:
            return int(row["step"])
    return None
