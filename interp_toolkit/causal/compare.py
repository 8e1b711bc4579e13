"""Where two edge rankings disagree (EAP vs EAP-IG, or attribution vs exact patching)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from interp_toolkit.causal.graph import Edge
from interp_toolkit.files.serialize import Jsonable, json_field

Only = tuple[tuple[str, int], ...]


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long score lists (average ranks on ties)."""

    def ranks(x: list[float]) -> torch.Tensor:
        t = torch.tensor(x, dtype=torch.float64)
        order = t.argsort()
        r = torch.empty_like(t)
        r[order] = torch.arange(len(t), dtype=torch.float64)
        for v in t.unique():  # ties share their mean rank
            tied = t == v
            r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(ra.norm() * rb.norm())
    return float((ra * rb).sum()) / denom if denom > 0 else float("nan")


@dataclass(frozen=True)
class Disagreement(Jsonable):
    """Two rankings of the same edges (``methods``): rank correlation of |score|, and the edges
    in one's top ``k`` but not the other's, with their rank in the other, 1-based (``only``, under
    the JSON's keys: ``top_{k}_only_{method}``)."""

    methods: tuple[str, str]
    k: int
    spearman: float = field(metadata=json_field(key="spearman_abs_scores", digits=4))
    only: dict[str, Only] = field(metadata=json_field(inline=True))

    @property
    def only_first(self) -> Only:
        return self.only[f"top_{self.k}_only_{self.methods[0]}"]

    @property
    def only_second(self) -> Only:
        return self.only[f"top_{self.k}_only_{self.methods[1]}"]


def disagreement(
    first: list[tuple[Edge, float]],
    second: list[tuple[Edge, float]],
    k: int,
    names: tuple[str, str] = ("EAP", "EAP-IG"),
) -> Disagreement:
    """Compare two rankings of the same edges (each sorted by |score|, largest first)."""
    rank_a = {e: i for i, (e, _) in enumerate(first)}
    rank_b = {e: i for i, (e, _) in enumerate(second)}
    sb = dict(second)
    rho = spearman([abs(s) for _, s in first], [abs(sb[e]) for e, _ in first])
    top_a, top_b = {e for e, _ in first[:k]}, {e for e, _ in second[:k]}
    only_a = tuple((str(e), rank_b[e] + 1) for e, _ in first[:k] if e not in top_b)
    only_b = tuple((str(e), rank_a[e] + 1) for e, _ in second[:k] if e not in top_a)
    only = {f"top_{k}_only_{names[0]}": only_a, f"top_{k}_only_{names[1]}": only_b}
    return Disagreement(names, k, rho, only)
