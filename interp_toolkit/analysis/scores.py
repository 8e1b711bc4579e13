"""Head discovery: score every head on repeated random tokens, test each (head, score) against its
own null model, assign roles.

The scores and their definitions are the registry's (:mod:`~interp_toolkit.analysis.heads`); the
scorer is :func:`~interp_toolkit.analysis.stripes.row_scores` and the null models, τ and p-values
are :mod:`~interp_toolkit.analysis.nulls`. A head's role is decided by
:data:`~.heads.DEFAULT_DECIDERS` (or :func:`~.heads.deciders`): the first role whose deciding
score is significant against its null AND reaches the effect-size floor (0.4, ARENA's; not a null
test). ``head_scores``, ``HeadScores`` and ``SCORE_KINDS`` are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxtyping import Bool
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.analysis import nulls
from interp_toolkit.analysis.batches import RepeatedTokens, default_layout, probe_batch
from interp_toolkit.analysis.heads import (
    DEFAULT_DECIDERS,
    DEFAULT_FLOORS,
    NO_ROLE,
    ROLES,
    SCORE_KINDS,
    SCORES,
    HeadId,
    deciders,
    role_rule,
    top_head,
)
from interp_toolkit.analysis.stripes import HeadScores, head_scores, row_scores
from interp_toolkit.analysis.untrained import untrained_models
from interp_toolkit.errors import UserError
from interp_toolkit.models import AttnOnlyConfig
from interp_toolkit.tokenizer import Codec

__all__ = [
    "SCORE_KINDS",
    "HeadReport",
    "HeadScores",
    "classify",
    "discover_heads",
    "head_scores",
]


@dataclass
class HeadReport:
    """Every head's scores, and per (head, score) its null's τ and p-value, whether it is
    significant, and the role decided from them.

    ``decides``: role -> deciding score. ``floors``: the effect-size floors. ``test``: how the
    null tests were run (:func:`describe_tests`).
    """

    scores: HeadScores
    tests: nulls.NullTests
    significant: dict[str, Bool[Tensor, "layer head"]]
    roles: list[list[str]]
    decides: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_DECIDERS))
    floors: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_FLOORS))
    alpha: float = nulls.ALPHA
    fdr: bool = False
    probe: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)

    def heads_with_role(self, role: str) -> list[HeadId]:
        if role not in ROLES:
            raise KeyError(f"unknown role {role!r}; roles are {ROLES}")
        return [
            HeadId(layer, head)
            for layer, row in enumerate(self.roles)
            for head, r in enumerate(row)
            if r == role
        ]

    def has_role(self, head: tuple[int, int], role: str) -> bool:
        return self.roles[head[0]][head[1]] == role

    def strongest(self, role: str) -> HeadId | None:
        """The head labelled ``role`` with the highest score of the kind that decides the role."""
        return top_head(self.scores.get(self.decides[role]), among=self.heads_with_role(role))

    def passes(self, kind: str) -> Bool[Tensor, "layer head"]:
        """Where the head's ``kind`` score is significant against its null and >= its floor."""
        return self.significant[kind] & (self.scores.get(kind) >= self.floors[kind])

    def significance(self) -> str:
        """When a score is significant, in words: ``p <= 0.05`` or ``BH at FDR 0.05``."""
        return f"BH at FDR {self.alpha:g}" if self.fdr else f"p <= {self.alpha:g}"

    def rule(self) -> str:
        return role_rule(self.decides, self.significance())

    def to_dict(self) -> dict[str, Any]:
        t = self.tests
        heads = []
        for layer, row in enumerate(self.roles):
            for head, role in enumerate(row):
                at = (layer, head)
                heads.append(
                    {
                        "head": str(HeadId(layer, head)),
                        "layer": layer,
                        "index": head,
                        "scores": {k: float(self.scores.get(k)[at]) for k in SCORE_KINDS},
                        "tau": {k: float(t.tau[k][at]) for k in SCORE_KINDS},
                        "p_value": {k: float(t.p_value[k][at]) for k in SCORE_KINDS},
                        "significant": {k: bool(self.significant[k][at]) for k in SCORE_KINDS},
                        "role": role,
                    }
                )
        return {
            "probe": self.probe,
            "test": self.test,
            "effect_size_floor": {k: float(v) for k, v in self.floors.items()},
            "decides": dict(self.decides),
            "rule": self.rule(),
            "heads": heads,
            "roles": {role: [str(h) for h in self.heads_with_role(role)] for role in ROLES[:-1]},
        }


def describe_tests(
    tests: nulls.NullTests, alpha: float, fdr: bool, untrained: dict[str, Any] | None
) -> dict[str, Any]:
    """JSON-safe account of the null tests: the null per score and its size, the smallest
    reachable p, α or the FDR, and the expected number of false positives."""
    n_heads = next(iter(tests.p_value.values())).numel()
    smallest = {k: nulls.smallest_p(n) for k, n in tests.n_null.items()}
    return {
        "null": dict(tests.null),
        "n_null": dict(tests.n_null),
        "smallest_p": smallest,
        "cannot_pass": [k for k, p in smallest.items() if p > alpha],  # no p can reach alpha
        "untrained": untrained,
        "quantile": tests.quantile,
        "tau": f"each head's {tests.quantile:g} quantile of its own null",
        "p_value": "(1 + #{null >= observed}) / (1 + N), per head",
        "alpha": alpha,
        "correction": "benjamini-hochberg over heads x scores" if fdr else "none (p <= alpha)",
        "n_tests": tests.n_tests,
        "expected_false_positives": {
            "per_score": nulls.expected_false_positives(n_heads, alpha),
            "all_scores": nulls.expected_false_positives(tests.n_tests, alpha),
        },
    }


def classify(
    scores: HeadScores,
    significant: Mapping[str, Bool[Tensor, "layer head"]],
    floors: Mapping[str, float] | None = None,
    decides: Mapping[str, str] | None = None,
) -> list[list[str]]:
    """Per head, the first role of ``decides`` (role -> score, in precedence order) whose score is
    significant AND >= its effect-size floor; ``"none"`` otherwise."""
    floors = floors or DEFAULT_FLOORS
    decides = decides or DEFAULT_DECIDERS
    passes = {
        role: significant[kind] & (scores.get(kind) >= floors[kind])
        for role, kind in decides.items()
    }
    return [
        [
            next((role for role, ok in passes.items() if bool(ok[layer, head])), NO_ROLE)
            for head in range(scores.n_heads)
        ]
        for layer in range(scores.n_layers)
    ]


def discovery_probe(
    model: TransformerBridge,
    codec: Codec,
    *,
    n_seqs: int = 64,
    period: int | None = None,
    seed: int = 0,
    n_repeats: int = 2,
    prefix_max: int | None = None,
    token_range: tuple[int, int] | None = None,
) -> RepeatedTokens:
    """The discovery probe: ``[BOS] prefix seg x n_repeats filler`` rows that fit the model.

    ``period``/``prefix_max`` default to :func:`default_layout` of the model's context; the token
    range defaults to :func:`default_token_range` of the codec. Rows start with the codec's BOS id.
    """
    n_ctx = int(model.cfg.n_ctx)
    bos_id = codec.bos_id
    auto_period, auto_prefix = default_layout(
        n_ctx, n_repeats=n_repeats, has_bos=bos_id is not None
    )
    prefix_max = auto_prefix if prefix_max is None else prefix_max
    if period is None:
        period = min(auto_period, (n_ctx - int(bos_id is not None) - prefix_max) // n_repeats)
    need = int(bos_id is not None) + prefix_max + n_repeats * period
    if need > n_ctx:
        raise UserError(
            f"period {period} x {n_repeats} repeats (+{prefix_max} prefix) needs {need} tokens but the "
            f"model's context is {n_ctx}: use --period {max(2, (n_ctx - 1 - prefix_max) // n_repeats)} or less."
        )
    return probe_batch(
        codec,
        int(model.cfg.d_vocab),
        n_seqs,
        period,
        n_repeats=n_repeats,
        prefix_max=prefix_max,
        seed=seed,
        token_range=token_range,
    )


def discover_heads(
    model: TransformerBridge,
    codec: Codec,
    *,
    n_seqs: int = 64,
    period: int | None = None,
    seed: int = 0,
    alpha: float = nulls.ALPHA,
    fdr: bool = False,
    induction_score: str = "vw",
    n_untrained: int | None = None,
    untrained_rows: int | None = None,
    quantile: float = nulls.QUANTILE,
    n_repeats: int = 2,
    prefix_max: int | None = None,
    token_range: tuple[int, int] | None = None,
    floors: dict[str, float] | None = None,
    model_cfg: AttnOnlyConfig | None = None,
    batch_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> HeadReport:
    """Score every head on :func:`discovery_probe`, test each (head, score) against the null its
    registry entry names, and assign roles (``induction_score``: ``"vw"``, the seed's
    value-weighted score, or ``"plain"`` decides the induction role; ``fdr``: Benjamini-Hochberg
    over heads x scores at ``alpha`` instead of ``p <= alpha``).

    The untrained null models (:func:`~.untrained.untrained_models`): ``n_untrained`` of them
    (toy default ``max(2, ceil(99 / n_heads))``; GPT-2 2) on the probe's first ``untrained_rows``
    rows (toy default all; GPT-2 16). ``model_cfg``: a toy run's config (rebuilt from ``model.cfg``
    when not given).
    """
    decides = deciders(induction_score)
    for name, value in (("n_untrained", n_untrained), ("untrained_rows", untrained_rows)):
        if value is not None and value < 1:
            raise UserError(f"{name}={value} cannot work: use 1 or more.")
    batch = discovery_probe(
        model,
        codec,
        n_seqs=n_seqs,
        period=period,
        seed=seed,
        n_repeats=n_repeats,
        prefix_max=prefix_max,
        token_range=token_range,
    )
    observed = row_scores(model, batch, batch_size=batch_size)
    untrained = untrained_models(
        model, model_cfg=model_cfg, n_models=n_untrained, rows=untrained_rows
    )
    ctx = nulls.NullContext(
        model=model,
        batch=batch,
        observed=observed,
        untrained=untrained,
        seed=seed,
        batch_size=batch_size,
        progress=progress or (lambda _msg: None),
    )
    null_of = {s.name: s.null for s in SCORES}
    tests = nulls.run_tests(nulls.draw_nulls(ctx, null_of), null_of, quantile)
    significant = tests.significant(alpha, fdr)
    scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
    floors = dict(floors or DEFAULT_FLOORS)
    probe = batch.describe()
    probe["definitions"] = {s.name: s.definition for s in SCORES}
    return HeadReport(
        scores=scores,
        tests=tests,
        significant=significant,
        roles=classify(scores, significant, floors, decides),
        decides=decides,
        floors=floors,
        alpha=alpha,
        fdr=fdr,
        probe=probe,
        test=describe_tests(
            tests,
            alpha,
            fdr,
            None
            if untrained is None
            else {
                "n_models": len(untrained.seeds),
                "rows": ctx.n_rows(),
                "seeds": list(untrained.seeds),
            },
        ),
    )
