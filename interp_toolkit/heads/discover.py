"""Discovery plus what an attention view of the result needs: the heads to draw and a probe row.

:func:`discover` is the one discovery entry point for any model, a toy run or GPT-2: the
``heads`` command, the Python API, the tests, the docs and ``benchmarks/gpt2_discovery_cost.py``
all call it, with the same probe layout (:func:`~interp_toolkit.heads.discovery.discovery_probe`).
It runs :func:`~interp_toolkit.heads.discovery.discover_heads` and picks the strongest
previous-token and induction heads, by label when discovery labelled one and by score otherwise,
with one probe row drawn like discovery's batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jaxtyping import Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.heads.discovery import N_SEQS, HeadReport, discover_heads
from interp_toolkit.heads.registry import HeadId, top_head
from interp_toolkit.heads.repeats import probe_batch
from interp_toolkit.models.build import AttnOnlyConfig
from interp_toolkit.stats.thresholds import ALPHA
from interp_toolkit.text.codecs import Codec

VIEW_ROLES = ("previous-token", "induction")


@dataclass
class Discovery:
    """``report``: scores, per-head τ and p-values, roles. ``labelled[role]``: the strongest head
    with that role, or None when discovery labelled none; ``top[role]``: the highest-scoring head
    of the role's deciding score whatever its label (for a view even when nothing passed).
    ``tokens``: one probe row
    ``[BOS] prefix seg seg filler`` drawn like the discovery batch; ``str_tokens``: its text."""

    report: HeadReport
    labelled: dict[str, HeadId | None]
    top: dict[str, HeadId]
    tokens: Int[Tensor, " pos"]
    str_tokens: list[str] = field(default_factory=list)

    def view_heads(self) -> dict[str, HeadId]:
        """Heads to draw: the labelled ones, else the top-scoring ones."""
        return {role: self.labelled[role] or self.top[role] for role in VIEW_ROLES}

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.report.to_dict())
        d["view"] = {
            **{f"{_key(role)}_head": _name(self.labelled[role]) for role in VIEW_ROLES},
            **{f"top_{_key(role)}": _name(self.top[role]) for role in VIEW_ROLES},
            "tokens": [int(t) for t in self.tokens.tolist()],
        }
        return d


def _key(role: str) -> str:
    return role.replace("-", "_")


def _name(head: HeadId | None) -> str | None:
    return None if head is None else str(head)


def discover(
    model: TransformerBridge,
    codec: Codec,
    *,
    n_seqs: int = N_SEQS,
    period: int | None = None,
    seed: int = 0,
    alpha: float = ALPHA,
    fdr: bool = False,
    induction_score: str = "vw",
    n_draws: int | None = None,
    n_untrained: int | None = None,
    untrained_rows: int | None = None,
    model_cfg: AttnOnlyConfig | None = None,
    batch_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Discovery:
    """:func:`~interp_toolkit.heads.discovery.discover_heads` (same arguments and defaults), then
    the view heads and a probe row. Only ``hook_pattern``/``hook_v`` are hooked, the pass stops
    before the unembedding and rows go through in chunks, so GPT-2 small fits in 2 GiB."""
    report = discover_heads(
        model,
        codec,
        n_seqs=n_seqs,
        period=period,
        seed=seed,
        alpha=alpha,
        fdr=fdr,
        induction_score=induction_score,
        n_draws=n_draws,
        n_untrained=n_untrained,
        untrained_rows=untrained_rows,
        model_cfg=model_cfg,
        batch_size=batch_size,
        progress=progress,
    )
    probe = report.probe
    row = probe_batch(
        codec,
        int(model.cfg.d_vocab),
        1,
        int(probe["period"]),
        prefix_max=int(probe["prefix_max"]),
        seed=seed,
    ).tokens[0]
    top = {}
    for role in VIEW_ROLES:
        best = top_head(report.scores.get(report.decides[role]))
        assert best is not None  # every model has heads
        top[role] = best
    return Discovery(
        report=report,
        labelled={role: report.strongest(role) for role in VIEW_ROLES},
        top=top,
        tokens=row,
        str_tokens=codec.str_tokens(row.tolist()),
    )
