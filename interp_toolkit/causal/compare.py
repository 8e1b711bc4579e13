"""Where two edge rankings disagree (EAP vs EAP-IG, or attribution vs exact patching)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from interp_toolkit.causal.graph import Edge


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
class Disagreement:
    """Two rankings of the same edges: rank correlation of |score|, and the edges in one's top
    ``k`` but not the other's (with their rank in the other, 1-based)."""

    first: str
    second: str
    k: int
    spearman: float
    only_first: tuple[tuple[str, int], ...]
    only_second: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "methods": [self.first, self.second],
            "k": self.k,
            "spearman_abs_scores": round(self.spearman, 4),
            f"top_{self.k}_only_{self.first}": [list(x) for x in self.only_first],
            f"top_{self.k}_only_{self.second}": [list(x) for x in self.only_second],
        }


def disagreement(
    first: list[tuple[Edge, float]],
    second: list[tuple[Edge, float]],
    k: int,
    names: tuple[str, str] = ("EAP", "EAP-IG"),
) -> Disagreement:
    """Compare two rankings of the same edges (each sorted by |score|, largest first)."""
    rank_a = {e: i for i, (e, _) in enumerate(first)}
    rank_b = {e: i for i, (e, _) in enumerate(second)}
    edges = list(rank_a)
    sa = {e: abs(s) for e, s in first}
    sb = {e: abs(s) for e, s in second}
    rho = spearman([sa[e] for e in edges], [sb[e] for e in edges])
    top_a, top_b = {e for e, _ in first[:k]}, {e for e, _ in second[:k]}
    only_a = tuple((str(e), rank_b[e] + 1) for e, _ in first[:k] if e not in top_b)
    only_b = tuple((str(e), rank_a[e] + 1) for e, _ in second[:k] if e not in top_a)
    return Disagreement(names[0], names[1], k, rho, only_a, only_b)
