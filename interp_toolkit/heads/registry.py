"""The head vocabulary: what a head is called, which scores a head has, which head plays a role.

- :class:`HeadId`: ``(layer, head)``, printed ``L.H`` and parsed from it (the one place a head is
  formatted).
- :data:`SCORES`, the **score registry**: one :class:`Score` per head score, with its name, title,
  definition, the attention stripe it reads (:class:`Stripe`), the rival keys its specificity test
  compares it with (every other key of the probe, :data:`RIVAL_WIDTH`), whether it is also
  compared with a no-repeat control, its effect-size floor, the role it decides, if any, and its
  optional second test against untrained models. The scorer (:mod:`~interp_toolkit.heads.scorer`), the
  specificity test (:mod:`~interp_toolkit.heads.specificity`), discovery
  (:mod:`~interp_toolkit.heads.discovery`), the CLI tables, JSON/CSV and the reports all read it:
  **adding a head score is one entry here plus its test** (see docs/architecture.md).
- Roles: :data:`ROLE_PRECEDENCE` (the roles, first wins), :data:`DEFAULT_DECIDERS` (role -> the
  score whose ``role`` it is), :func:`deciders` (the induction role decided by the value-weighted
  or the plain score), :func:`passes` (the role rule for one score: significant AND >= its
  floor; the only place it is written) and :func:`role_rule` (the rule in words).
- :func:`top_head` and :func:`partner_of`: which head is strongest, and which earlier head an
  induction head reads from.

Notation: ``A[q, k]`` is a head's attention pattern (``hook_pattern``, query ``q``, key ``k``) on the
repeated-random-token probe (:mod:`~interp_toolkit.heads.repeats`); ``Δ`` is its period and
``s`` a row's first repeated position.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import torch
from jaxtyping import Float

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import register_encoder
from interp_toolkit.runtime import validate
from interp_toolkit.stats.thresholds import ARENA_FLOOR, RIVAL_RATIO, RIVAL_WIDTH


class HeadId(NamedTuple):
    """A head, ``layer`` and ``head`` 0-indexed; ``str(HeadId(1, 3)) == "1.3"``.

    A tuple, so it indexes ``[layer, head]`` tensors directly (``scores[head_id]``)."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"{self.layer}.{self.head}"

    @classmethod
    def parse(cls, text: str) -> HeadId:
        """``"1.4"`` -> ``HeadId(1, 4)``; anything else is a one-line :class:`UserError`."""
        parts = str(text).strip().split(".")
        # ASCII digits only: "².0" passes str.isdigit, and int() refuses it (or reads "١" as 1)
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise UserError(f"head {text!r} is not of the form L.H: write layer.head, e.g. 1.4.")
        return cls(int(parts[0]), int(parts[1]))

    def check(self, n_layers: int, n_heads: int) -> HeadId:
        """This head, if a model of ``n_layers`` x ``n_heads`` has it; a UserError otherwise."""
        return HeadId(*validate.head(self.layer, self.head, n_layers, n_heads))


register_encoder(HeadId, str, HeadId.parse)  # a head is written as "L.H"

# ------------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Stripe:
    """The entries ``A[q, k]`` a score averages.

    ``queries``:

    - ``"repeats"``: the queries of the 2nd and later repeats, ``q = s+Δ … s+n·Δ−1``;
    - ``"body"``: every query from position 1 up to the last repeated position (the filler after
      the repeats is left out; position 0 can only attend to itself); with a relative key, only
      queries whose key is not BOS.

    The key is ``k = q − lag − periods·Δ`` (relative), or ``k = column`` for every query
    (absolute). ``value_weighted`` reads ``ŵ[q,k] = A[q,k]·‖v_k‖ / Σ_k' A[q,k']·‖v_k'‖``
    instead of ``A[q, k]`` (implemented for ``"repeats"`` queries).
    """

    queries: Literal["body", "repeats"]
    lag: int = 0
    periods: int = 0
    column: int | None = None
    value_weighted: bool = False

    def __post_init__(self) -> None:
        if self.value_weighted and self.queries != "repeats":
            raise ValueError("value weighting is implemented for 'repeats' queries only")
        if self.column is not None and (self.lag or self.periods):
            raise ValueError("a stripe has a relative key (lag, periods) or a column, not both")

    def offset(self, period: int) -> int:
        """How far back the key is (``q − k``) for a relative key on a probe of this period."""
        return self.lag + self.periods * period


def rival_name(width: int | None = RIVAL_WIDTH) -> str:
    """The rival comparison's name in heads.json (``vs <name>``)."""
    return "the strongest other key" if width is None else f"the strongest key within {width}"


@dataclass(frozen=True)
class Score:
    """One head score.

    ``name``: the key in JSON, CSV and :class:`~interp_toolkit.heads.scorer.HeadScores`.
    ``label``: a table column; ``title``: a figure title. ``definition``: one line, written into
    every heads.json. ``stripe``: what it reads. ``control``: the specificity test also compares
    the head's score with its own score on a no-repeat control batch of the same layout (for
    scores that need a repeat). ``floor``: the effect-size floor a head's score must also reach
    for a role (:func:`passes`); it is not a test. ``role``: the role this score decides by
    default (:data:`DEFAULT_DECIDERS`), if any. ``untrained_null``: the null of the optional second
    test against untrained models of the same architecture (a key of
    :data:`~interp_toolkit.heads.nulls.NULLS`; it decides nothing). ``metrics_key``: the
    score's key in metrics.jsonl when training logs it (default: ``name``).
    """

    name: str
    label: str
    title: str
    definition: str
    stripe: Stripe
    control: bool = False
    floor: float = ARENA_FLOOR
    role: str | None = None
    untrained_null: str = "untrained"
    metrics_key: str = ""

    @property
    def logged_as(self) -> str:
        return self.metrics_key or self.name


# Why these tests: docs/statistics.md. The specificity test compares the head with itself: its
# attention at the score's key against its strongest attention at any other key of the probe,
# query by query (same queries, same rows), and for repeat scores against its own score on a no-repeat control.
# The second test ("untrained" / "repeats_vs_untrained") compares the head with the heads of its
# layer in untrained models; it answers "did training raise this stripe?" and decides nothing.
SCORES: tuple[Score, ...] = (
    Score(
        "previous_token",
        "prev-token",
        "previous-token score",
        "mean A[q, q-1] over q from the first non-BOS key to the end of the repeats",
        Stripe("body", lag=1),
        role="previous-token",
        metrics_key="prev_token",  # metrics.jsonl's spelling since the first runs
    ),
    Score(
        "duplicate_token",
        "duplicate",
        "duplicate-token score",
        "mean A[q, q-period] over queries in the 2nd and later repeats",
        Stripe("repeats", periods=1),
        control=True,
        role="duplicate-token",
        untrained_null="repeats_vs_untrained",
    ),
    # The plain induction score can decide the induction role instead of the value-weighted one
    # (deciders("plain"), --induction-score plain); by default it is reported beside it.
    Score(
        "induction",
        "induction",
        "induction score",
        "mean A[q, q-period+1] over queries in the 2nd and later repeats",
        Stripe("repeats", periods=1, lag=-1),
        control=True,
        untrained_null="repeats_vs_untrained",
    ),
    # The seed's induction score (attention weighted by |v_k|): decides the induction role.
    Score(
        "induction_vw",
        "induction (vw)",
        "value-weighted induction score",
        "mean over the same queries of A[q,k]*|v_k| / sum_k' A[q,k']*|v_k'| at k = q-period+1",
        Stripe("repeats", periods=1, lag=-1, value_weighted=True),
        control=True,
        role="induction",
        untrained_null="repeats_vs_untrained",
    ),
    # ARENA's current-token detector (mean A[q, q]); query 0 is left out (it can only attend to
    # itself). No role: it describes a head, it is not a step of the induction circuit.
    Score(
        "current_token",
        "current-token",
        "current-token score",
        "mean A[q, q] over q from 1 to the end of the repeats",
        Stripe("body", lag=0),
    ),
    # ARENA's first-token detector (mean A[q, 0]: attention resting on BOS, an "attention sink"),
    # over queries q >= 1 (query 0 can only attend to itself). No role, as above.
    Score(
        "first_token",
        "first-token",
        "first-token (BOS) score",
        "mean A[q, 0] (BOS when the probe has one) over q from 1 to the end of the repeats",
        Stripe("body", column=0),
    ),
)
SCORE: dict[str, Score] = {s.name: s for s in SCORES}
SCORE_KINDS: tuple[str, ...] = tuple(SCORE)
DEFAULT_FLOORS: dict[str, float] = {s.name: s.floor for s in SCORES}

#: The roles, in precedence order: a head's role is the first whose deciding score passes
#: (:func:`passes`). A new role goes at the end, so no existing role changes.
ROLE_PRECEDENCE: tuple[str, ...] = ("induction", "previous-token", "duplicate-token")
#: Role -> the score that decides it by default: the registry entry whose ``role`` it is.
DEFAULT_DECIDERS: dict[str, str] = {
    role: next(s.name for s in SCORES if s.role == role) for role in ROLE_PRECEDENCE
}
assert {s.role for s in SCORES} - {None} == set(ROLE_PRECEDENCE), "a role without precedence"
NO_ROLE = "none"
ROLES: tuple[str, ...] = (*ROLE_PRECEDENCE, NO_ROLE)
#: The scores that may decide the induction role (``--induction-score``): value-weighted, plain.
INDUCTION_SCORES: dict[str, str] = {"vw": "induction_vw", "plain": "induction"}


def deciders(induction_score: str = "vw") -> dict[str, str]:
    """Role -> deciding score, the induction role decided by the value-weighted (``"vw"``, the
    default) or the plain (``"plain"``) induction score (:data:`INDUCTION_SCORES`)."""
    if induction_score not in INDUCTION_SCORES:
        raise UserError(
            f"induction score {induction_score!r} is unknown: use "
            f"{' or '.join(INDUCTION_SCORES)} (the value-weighted or the plain score)."
        )
    return {**DEFAULT_DECIDERS, "induction": INDUCTION_SCORES[induction_score]}


def passes(
    kind: str,
    value: Any,
    significant: Any,
    repeat_effect: Any = None,
    floor: float | None = None,
) -> Any:
    """The role rule for one score: significant (its specificity test rejects) AND ``value`` >= the
    registry's effect-size floor of ``kind``, AND for a score compared with a no-repeat control,
    its ``repeat_effect`` (the score minus the head's own score without repeats) >= the floor too:
    a head at a fixed offset reads high on the induction stripe with or without a repeat.
    Tensors (``[layer, head]``) or plain numbers. ``floor`` replaces the registry's (the
    sensitivity benchmark, experiments/cutoff_sensitivity.py)."""
    floor = score(kind).floor if floor is None else floor
    ok = significant & (value >= floor)
    return ok if repeat_effect is None else ok & (repeat_effect >= floor)


def role_rule(decides: dict[str, str], test: str) -> str:
    """The role rule in words; ``test`` says when a score is significant (e.g. ``p <= 0.05``)."""
    by = ", ".join(
        f"{role} ({kind}, floor {score(kind).floor:g})" for role, kind in decides.items()
    )
    return (
        f"a head's role is the first of {by} whose score passes its specificity test ({test}: the "
        f"head's attention at the score's key is more than {RIVAL_RATIO:g} times its strongest "
        f"attention at any other key, query by query, and "
        f"a repeat score its own score without repeats) and reaches its effect-size floor (a "
        f"repeat score: by the repeat, the score minus its score without repeats, too); "
        f"otherwise {NO_ROLE}"
    )


def score(name: str) -> Score:
    """The registry entry of ``name`` (a KeyError naming the known scores otherwise)."""
    if name not in SCORE:
        raise KeyError(f"unknown score {name!r}; scores are {', '.join(SCORE_KINDS)}")
    return SCORE[name]


# ------------------------------------------------------------------------------- head queries


def top_head(
    scores: Float[torch.Tensor, "layer head"],
    *,
    layers: range | None = None,
    among: Iterable[tuple[int, int]] | None = None,
) -> HeadId | None:
    """The head with the highest score (the first in layer-major order on a tie), among the heads
    of ``layers`` and of ``among`` when given; None when no head is left to choose from."""
    allowed = torch.zeros(scores.shape, dtype=torch.bool)
    allowed[slice(None) if layers is None else list(layers)] = True
    if among is not None:
        chosen = torch.zeros_like(allowed)
        for layer, head in among:
            chosen[layer, head] = True
        allowed &= chosen
    if not bool(allowed.any()):
        return None
    masked = scores.detach().float().cpu().masked_fill(~allowed, float("-inf"))
    flat = int(masked.reshape(-1).argmax())
    return HeadId(flat // scores.shape[1], flat % scores.shape[1])


def partner_of(
    previous_token: Float[torch.Tensor, "layer head"], head: tuple[int, int]
) -> HeadId | None:
    """The head with the strongest previous-token score in a layer before ``head``: the
    K-composition partner an induction head would read from (None for a layer-0 head)."""
    return top_head(previous_token, layers=range(head[0])) if head[0] > 0 else None
