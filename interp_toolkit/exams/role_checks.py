"""The causal check of each role: a role read off attention patterns must have the effect the role
is for (issue 30).

- An **induction** head: mean-ablating its output (``hook_z``, the mean over the same rows) on
  held-out passages repeated once (:func:`~interp_toolkit.exams.text_measures.passage_tokens`)
  lowers the **repeated-passage drop**, the loss on the first copy minus the loss on the second
  (tokens 1..L-1 of each copy): the share of the drop it removes, with a percentile bootstrap
  interval over passages (:func:`~interp_toolkit.causal.shares.removed_share`). The model's induction heads ablated
  together are measured too (``together``): heads that share the work each remove less alone.
- A **previous-token** head: resampling its write into a later induction head's query, key or
  value input alone (the route by path, :mod:`~.paths`) removes a share of that induction head's
  effect: the largest share over the routed induction heads whose own effect passes the same rule
  (a head with no effect has no share to remove) and their three inputs.

A role **passes** when the share removed is at least ``Thresholds.role_effect`` and the lower end
of its interval is above 0; it **fails** (flagged) otherwise. It is **untestable** (``passed`` is
None, never counted as passing) when there is nothing to remove: no repeated-passage drop (its
interval reaches 0), a model that does not do the induction task, or no routed induction head in a
later layer to feed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from transformer_lens import TransformerBridge

from interp_toolkit.causal.ablation import ablation_hooks, mean_z
from interp_toolkit.causal.routes import Estimate, ModelRoute, does_task
from interp_toolkit.causal.shares import gap, removed_share, resamples
from interp_toolkit.exams.text_measures import copy_losses, passage_tokens, token_losses
from interp_toolkit.files.serialize import Jsonable
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds

#: The roles with a causal check, in the order a report lists them.
CHECKED_ROLES = ("induction", "previous-token")
#: Held-out passages the induction check reads (each window's first half, twice).
CHECK_PASSAGES = 64


@dataclass(frozen=True)
class RoleCheck(Jsonable):
    """One head's role and what ablating it removed: ``removed``, the share of ``of`` (what the
    share is of, in words), None when untestable; ``passed`` None when untestable (``why``)."""

    head: HeadId
    role: str
    removed: Estimate | None
    of: str
    passed: bool | None
    why: str = ""


@dataclass(frozen=True)
class RoleChecks(Jsonable):
    """Every checked role of one model, the repeated-passage ``drop`` (nats) over ``n_passages``
    passages of ``length`` tokens, and the share of it the induction heads remove together."""

    checks: tuple[RoleCheck, ...]
    drop: Estimate
    together: Estimate | None  # None: no induction head, or no drop to remove
    n_passages: int
    length: int
    floor: float  # Thresholds.role_effect when measured

    def flagged(self) -> list[RoleCheck]:
        """The roles whose check failed."""
        return [c for c in self.checks if c.passed is False]

    def passing(self) -> list[RoleCheck]:
        return [c for c in self.checks if c.passed]

    def untestable(self) -> list[RoleCheck]:
        return [c for c in self.checks if c.passed is None]


def _passes(removed: Estimate, t: Thresholds) -> bool:
    return removed.value >= t.role_effect and removed.low > 0


def passage_drops(
    model: TransformerBridge,
    passages: Int[torch.Tensor, "batch twice"],
    ablate: Sequence[HeadId] = (),
    means: Float[torch.Tensor, "layer head d_head"] | None = None,
) -> Float[torch.Tensor, " batch"]:
    """Each passage's drop (mean loss on tokens 1..L-1 of the first copy minus the second's), with
    the heads in ``ablate`` mean-ablated (to ``means``)."""
    length = passages.shape[1] // 2
    device = next(model.parameters()).device
    hooks = ablation_hooks(list(ablate), mode="mean", means=means) if ablate else []
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        first, second = copy_losses(token_losses(model(passages.to(device)), passages), length)
    return first - second


def induction_checks(
    model: TransformerBridge,
    windows: Int[torch.Tensor, "batch pos"],
    heads: Sequence[HeadId],
    *,
    seed: int = 0,
    t: Thresholds = THRESHOLDS,
) -> tuple[list[RoleCheck], Estimate, Estimate | None, int]:
    """Each of ``heads`` mean-ablated on the repeated passages of ``windows`` (each window's first
    ``min(n_ctx, width) // 2`` tokens, twice): its check, the drop, the share all of them remove
    together, and the passage length."""
    length = min(int(model.cfg.n_ctx), int(windows.shape[1])) // 2
    passages = passage_tokens(windows, length)
    idx = resamples(len(passages), seed=seed)
    clean = passage_drops(model, passages)
    none = torch.zeros_like(clean)
    drop = gap(clean, none, idx)
    of = "the repeated-passage drop"
    if not heads:
        return [], drop, None, length
    if drop.low <= 0:
        why = "no repeated-passage drop to remove (its interval reaches 0)"
        return [RoleCheck(h, "induction", None, of, None, why) for h in heads], drop, None, length
    means = mean_z(model, passages)
    ablated = [passage_drops(model, passages, [h], means) for h in heads]
    ablated.append(passage_drops(model, passages, heads, means))
    shares = removed_share(clean, none, torch.stack(ablated), idx)
    checks = [
        RoleCheck(h, "induction", s, of, _passes(s, t))
        for h, s in zip(heads, shares[:-1], strict=True)
    ]
    return checks, drop, shares[-1], length


def previous_token_checks(
    heads: Sequence[HeadId], route: ModelRoute, t: Thresholds = THRESHOLDS
) -> list[RoleCheck]:
    """Each of ``heads`` by its strongest path into a routed induction head (``route``)."""
    checks = []
    fed = [r for r in route.heads if _passes(r.effect, t)]  # heads whose own effect is measurable
    for h in heads:
        paths = [p for r in fed for p in r.paths if p.source == h]
        if not does_task(route.gap, t):
            why = "the model does not do the induction task, so no path has an effect to remove"
        elif not paths:
            why = "no routed induction head with an effect in a later layer for it to feed"
        else:
            best = max(paths, key=lambda p: p.removed.value)
            of = f"{best.target}'s effect ({best.input.upper()} path)"
            checks.append(
                RoleCheck(h, "previous-token", best.removed, of, _passes(best.removed, t))
            )
            continue
        checks.append(RoleCheck(h, "previous-token", None, "", None, why))
    return checks


def role_checks(
    model: TransformerBridge,
    windows: Int[torch.Tensor, "batch pos"],
    roles: dict[str, Sequence[HeadId]],
    route: ModelRoute,
    *,
    seed: int = 0,
    t: Thresholds = THRESHOLDS,
) -> RoleChecks:
    """The causal check of every induction and previous-token head in ``roles`` (module doc):
    ``windows``, held-out text of the model's own corpus; ``route``, its route by path."""
    windows = windows[:CHECK_PASSAGES]
    ind, drop, together, length = induction_checks(
        model, windows, list(roles.get("induction", ())), seed=seed, t=t
    )
    prev = previous_token_checks(list(roles.get("previous-token", ())), route, t)
    return RoleChecks(tuple(ind + prev), drop, together, len(windows), length, t.role_effect)
