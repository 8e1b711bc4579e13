"""Head discovery: score every head on repeated random tokens, test each (head, score) for
specificity against the head itself, assign roles; and :func:`discover`, the report plus what an
attention view needs.

The scores and their definitions are the registry's (:mod:`~interp_toolkit.heads.registry`); the
scorer is :func:`~interp_toolkit.heads.scorer.row_pairs` and the specificity test, τ and
p-values are :mod:`~interp_toolkit.heads.specificity`. A head's role is decided by
:data:`~.heads.DEFAULT_DECIDERS` (or :func:`~.heads.deciders`): the first role whose deciding
score passes :func:`~.heads.passes` (its specificity test rejects AND it reaches the registry's
effect-size floor). With ``n_untrained``, every score is also tested against untrained models of
the same architecture (:mod:`~interp_toolkit.heads.nulls`): a second, named test
(``vs_untrained``) that decides nothing. How discovery runs is one
:class:`~interp_toolkit.heads.options.DiscoveryOptions`, passed whole. ``head_scores``,
``HeadScores`` and ``SCORE_KINDS`` are importable from here too.

:func:`discover` is the one discovery entry point for any model, a toy run or GPT-2: the
``heads`` command, the Python API (:func:`interp_toolkit.api.discover`), the tests, the docs and
``benchmarks/gpt2_discovery_cost.py`` all call it, with the same batch layout
(:func:`discovery_batch`). It runs :func:`discover_heads` and picks the strongest previous-token
and induction heads, by label when discovery labelled one and by score otherwise, with the first
row of discovery's own batch to draw them on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jaxtyping import Bool, Int
from torch import Tensor
from transformer_lens import TransformerBridge

from interp_toolkit.errors import UserError
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads import nulls
from interp_toolkit.heads.options import N_SEQS, DiscoveryOptions
from interp_toolkit.heads.registry import (
    DEFAULT_DECIDERS,
    DEFAULT_FLOORS,
    NO_ROLE,
    ROLES,
    SCORE_KINDS,
    SCORES,
    HeadId,
    deciders,
    passes,
    role_rule,
    top_head,
)
from interp_toolkit.heads.repeats import (
    RepeatedTokens,
    default_layout,
    default_token_range,
    repeated_batch,
)
from interp_toolkit.heads.scorer import HeadScores, head_scores
from interp_toolkit.heads.specificity import (
    SpecificityAccount,
    SpecificityTests,
    comparisons_of,
    describe_tests,
    draws_for,
    specificity_tests,
)
from interp_toolkit.heads.untrained import untrained_models
from interp_toolkit.models.architecture import WINDOW_MARGIN, architecture_of
from interp_toolkit.models.build import ModelConfig
from interp_toolkit.runtime.options import replaced
from interp_toolkit.stats import thresholds
from interp_toolkit.text.codecs import Codec

__all__ = [
    "N_SEQS",
    "SCORE_KINDS",
    "Discovery",
    "DiscoveryOptions",
    "HeadReport",
    "HeadScores",
    "classify",
    "discover",
    "discover_heads",
    "discovery_batch",
    "head_scores",
]

VIEW_ROLES = ("previous-token", "induction")


_SKIP = json_field(skip=True)  # not in the JSON


@dataclass(frozen=True, kw_only=True)
class RoleReason:
    """What decided a head's role: its deciding score, value, floor, test and p-value."""

    score: str
    value: float
    repeat_effect: float | None
    floor: float
    test: str = "specificity"
    p_value: float
    decided_by: str
    significance: str


@dataclass(frozen=True)
class HeadEntry:
    """One head's entry of heads.json: per score, its value at the head of each tensor, its role
    and what decided it (:meth:`HeadReport.head_entry`)."""

    head: HeadId
    layer: int
    index: int
    scores: dict[str, float]
    interval: dict[str, list[float]]
    tau: dict[str, float]
    p_value: dict[str, float]
    decided_by: dict[str, str]
    comparisons: dict[str, dict[str, float]]
    repeat_effect: dict[str, float]
    significant: dict[str, bool]
    passes: dict[str, bool]
    role: str
    role_reason: RoleReason | None
    vs_untrained: dict[str, dict[str, float]] | None = field(metadata=json_field(omit_none=True))


@dataclass
class HeadReport(Jsonable):
    """Every head's scores (with 95% intervals), and per (head, score) its specificity test's
    p-value, τ and deciding comparison, whether it is significant, and the role decided from them.

    ``decides``: role -> deciding score. ``floors``: the registry's effect-size floors.
    ``test``: how the tests were run (:class:`~.specificity.SpecificityAccount`). ``vs_untrained``: the optional
    second test against untrained models (None when not run); it decides nothing. ``batch``: the
    repeated-token batch it was scored on (its JSON, with the scores' definitions, is ``probe``).
    Its JSON (heads.json): ``probe``, ``test``, the floors, ``decides``, the rule, every head's entry
    (:meth:`head_entry`) and the heads of each role.
    """

    scores: HeadScores = field(metadata=_SKIP)
    tests: SpecificityTests = field(metadata=_SKIP)
    significant: dict[str, Bool[Tensor, "layer head"]] = field(metadata=_SKIP)
    roles: list[list[str]] = field(metadata=_SKIP)
    test: SpecificityAccount
    batch: RepeatedTokens = field(repr=False, metadata=json_field(key="probe"))
    definitions: dict[str, str] = field(
        default_factory=lambda: {s.name: s.definition for s in SCORES},
        metadata=json_field(group="probe"),
    )
    intervals: dict[str, Tensor] = field(default_factory=dict, metadata=_SKIP)
    decides: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_DECIDERS))
    floors: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_FLOORS), metadata=json_field(key="effect_size_floor")
    )
    alpha: float = field(default=thresholds.ALPHA, metadata=_SKIP)
    fdr: bool = field(default=False, metadata=_SKIP)
    vs_untrained: nulls.NullTests | None = field(default=None, metadata=_SKIP)

    json_extra = {"rule": "rule", "heads": "head_entries", "roles": "role_heads"}
    json_order = ("probe", "test", "effect_size_floor", "decides", "rule", "heads", "roles")

    def heads_with_role(self, role: str) -> list[HeadId]:
        if role not in ROLES:
            raise KeyError(f"unknown role {role!r}; roles are {ROLES}")
        return [
            HeadId(layer, head)
            for layer, row in enumerate(self.roles)
            for head, r in enumerate(row)
            if r == role
        ]

    def role_heads(self) -> dict[str, list[HeadId]]:
        """Role -> the heads with it (every role but ``none``)."""
        return {role: self.heads_with_role(role) for role in ROLES[:-1]}

    def has_role(self, head: tuple[int, int], role: str) -> bool:
        return self.roles[head[0]][head[1]] == role

    def strongest(self, role: str) -> HeadId | None:
        """The head labelled ``role`` with the highest score of the kind that decides the role."""
        return top_head(self.scores.get(self.decides[role]), among=self.heads_with_role(role))

    def passes(self, kind: str) -> Bool[Tensor, "layer head"]:
        """Where the head's ``kind`` score passes the role rule (:func:`~.heads.passes`)."""
        effect = self.tests.repeat_effect(kind)
        return passes(kind, self.scores.get(kind), self.significant[kind], effect)

    def significance(self) -> str:
        """When a score is significant, in words: ``p <= 0.05`` or ``BH at FDR 0.05``."""
        return f"BH at FDR {self.alpha:g}" if self.fdr else f"p <= {self.alpha:g}"

    def rule(self) -> str:
        return role_rule(self.decides, self.significance())

    def role_reason(self, head: tuple[int, int]) -> RoleReason | None:
        """What decided a head's role (None for a head with no role)."""
        role = self.roles[head[0]][head[1]]
        if role == NO_ROLE:
            return None
        kind = self.decides[role]
        effect = self.tests.repeat_effect(kind)
        return RoleReason(
            score=kind,
            value=float(self.scores.get(kind)[head]),
            repeat_effect=None if effect is None else float(effect[head]),
            floor=float(self.floors[kind]),
            p_value=float(self.tests.p_value[kind][head]),
            decided_by=self.tests.decided_by[kind][head[0]][head[1]],
            significance=self.significance(),
        )

    def head_entry(self, layer: int, head: int) -> HeadEntry:
        """One head's entry of heads.json: per score, its value at the head of each tensor."""
        at, t, kinds, u = (layer, head), self.tests, SCORE_KINDS, self.vs_untrained

        def each(values: Mapping[str, Tensor]) -> dict[str, Any]:
            return {k: values[k][at].tolist() for k in values}

        return HeadEntry(
            head=HeadId(layer, head),
            layer=layer,
            index=head,
            scores=each({k: self.scores.get(k) for k in kinds}),
            interval=each(self.intervals),
            tau=each({k: t.tau[k] for k in kinds}),
            p_value=each({k: t.p_value[k] for k in kinds}),
            decided_by={k: t.decided_by[k][layer][head] for k in kinds},
            comparisons={k: each(t.comparisons[k]) for k in kinds},
            repeat_effect=each({k: e for k in kinds if (e := t.repeat_effect(k)) is not None}),
            significant=each({k: self.significant[k] for k in kinds}),
            passes=each({k: self.passes(k) for k in kinds}),
            role=self.roles[layer][head],
            role_reason=self.role_reason(at),
            vs_untrained=None if u is None else {"p_value": each(u.p_value), "tau": each(u.tau)},
        )

    def head_entries(self) -> list[HeadEntry]:
        """Every head's entry (:meth:`head_entry`), layer by layer."""
        n_layers, n_heads = self.scores.n_layers, self.scores.n_heads
        return [self.head_entry(ly, h) for ly in range(n_layers) for h in range(n_heads)]


def classify(
    scores: HeadScores,
    significant: Mapping[str, Bool[Tensor, "layer head"]],
    decides: Mapping[str, str] | None = None,
    repeat_effects: Mapping[str, Tensor | None] | None = None,
    floors: Mapping[str, float] | None = None,
) -> list[list[str]]:
    """Per head, the first role of ``decides`` (role -> score, in precedence order) whose score
    passes the role rule (:func:`~.heads.passes`; ``repeat_effects``: per score, the score minus
    the head's score on a no-repeat control, where there is one; ``floors``: per score, a floor
    in place of the registry's); ``"none"`` otherwise."""
    decides = decides or DEFAULT_DECIDERS
    effects, floors = repeat_effects or {}, floors or {}
    ok = {
        role: passes(kind, scores.get(kind), significant[kind], effects.get(kind), floors.get(kind))
        for role, kind in decides.items()
    }
    return [
        [
            next((role for role, o in ok.items() if bool(o[layer, head])), NO_ROLE)
            for head in range(scores.n_heads)
        ]
        for layer in range(scores.n_layers)
    ]


def discovery_batch(
    model: TransformerBridge, codec: Codec, options: DiscoveryOptions = DiscoveryOptions()
) -> RepeatedTokens:
    """The repeated-token batch discovery scores: ``options.n_seqs`` rows of ``[BOS] prefix
    seg x n_repeats filler`` that fit the model.

    ``period``/``prefix_max`` default to :func:`default_layout` of the model's context; the token
    range defaults to :func:`default_token_range` of the codec. Rows start with the codec's BOS id.
    A model with sliding-window attention gets a default period whose keys (and the rival keys
    around them) stay :data:`WINDOW_MARGIN` inside its smallest window; a small vocabulary one
    short enough that a row's prefix and segment are distinct tokens (one key per induction
    query).
    """
    n_ctx, n_repeats, bos_id = int(model.cfg.n_ctx), options.n_repeats, codec.bos_id
    auto_period, auto_prefix = default_layout(
        n_ctx, n_repeats=n_repeats, has_bos=bos_id is not None
    )
    prefix_max = auto_prefix if options.prefix_max is None else options.prefix_max
    period = options.period
    if period is None:
        period = min(auto_period, (n_ctx - int(bos_id is not None) - prefix_max) // n_repeats)
        window = architecture_of(model).smallest_window  # keys past a sliding window read 0
        if window is not None:
            period = max(2, min(period, window - WINDOW_MARGIN))
        low, high = options.token_range or default_token_range(codec)
        distinct = min(high, int(model.cfg.d_vocab)) - low - int(low <= (bos_id or 0) < high)
        if distinct - prefix_max >= 2:  # a small vocabulary: a row's tokens stay distinct
            period = min(period, distinct - prefix_max)
    need = int(bos_id is not None) + prefix_max + n_repeats * period
    if need > n_ctx:
        raise UserError(
            f"period {period} x {n_repeats} repeats (+{prefix_max} prefix) needs {need} tokens but the "
            f"model's context is {n_ctx}: use --period {max(2, (n_ctx - 1 - prefix_max) // n_repeats)} or less."
        )
    return repeated_batch(
        codec,
        int(model.cfg.d_vocab),
        options.n_seqs,
        period,
        n_repeats=n_repeats,
        prefix_max=prefix_max,
        seed=options.seed,
        token_range=options.token_range,
    )


def discover_heads(
    model: TransformerBridge,
    codec: Codec,
    options: DiscoveryOptions = DiscoveryOptions(),
    *,
    model_cfg: ModelConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> HeadReport:
    """Score every head on :func:`discovery_batch`, run each (head, score)'s specificity test
    (:mod:`~.specificity`) and assign roles; ``options`` (:class:`DiscoveryOptions`, checked when
    built) says how: the batch, α or the FDR, the draws, which induction score decides.

    ``options.n_untrained``: also run the second test, against that many untrained models of the
    same architecture on the batch's first ``untrained_rows`` rows
    (:func:`~.untrained.untrained_models`; ``model_cfg``: a toy run's config); off by default,
    and it decides nothing. The report keeps the batch (``report.batch``).
    """
    o = replaced(DiscoveryOptions, options, "discovery")  # one line for another type
    decides = deciders(o.induction_score)
    say = progress or (lambda _msg: None)
    batch = discovery_batch(model, codec, o)
    observed, comparisons = comparisons_of(
        model, batch, seed=o.seed, batch_size=o.batch_size, progress=say
    )
    n_heads = int(model.cfg.n_layers) * int(model.cfg.n_heads)
    draws = o.n_draws or draws_for(n_heads * len(SCORES), o.alpha)
    say(f"sign-flip tests ({draws} draws)")
    tests = specificity_tests(comparisons, draws, seed=o.seed, quantile=o.quantile)
    significant = tests.significant(o.alpha, o.fdr)
    scores = HeadScores({k: r.mean().float() for k, r in observed.items()})
    second = None
    if o.n_untrained is not None:
        untrained = untrained_models(
            model, model_cfg=model_cfg, n_models=o.n_untrained, rows=o.untrained_rows
        )
        second = nulls.untrained_tests(
            model, batch, observed, untrained, seed=o.seed, batch_size=o.batch_size, progress=say
        )
    return HeadReport(
        scores=scores,
        tests=tests,
        significant=significant,
        roles=classify(
            scores, significant, decides, {k: tests.repeat_effect(k) for k in SCORE_KINDS}
        ),
        intervals={k: r.interval().float() for k, r in observed.items()},
        decides=decides,
        alpha=o.alpha,
        fdr=o.fdr,
        test=describe_tests(tests, o.alpha, o.fdr, n_heads, second),
        vs_untrained=second,
        batch=batch,
    )


@dataclass
class Discovery(Jsonable):
    """``report``: scores, per-head τ and p-values, roles. ``labelled[role]``: the strongest head
    with that role, or None when discovery labelled none; ``top[role]``: the highest-scoring head
    of the role's deciding score whatever its label (for a view even when nothing passed).
    ``tokens``: the first row ``[BOS] prefix seg seg filler`` of the batch discovery scored;
    ``str_tokens``: its text. Its JSON: the report's, and the :meth:`view`."""

    report: HeadReport = field(metadata=json_field(inline=True))
    labelled: dict[str, HeadId | None] = field(metadata=_SKIP)
    top: dict[str, HeadId] = field(metadata=_SKIP)
    tokens: Int[Tensor, " pos"] = field(metadata=_SKIP)
    str_tokens: list[str] = field(default_factory=list, metadata=_SKIP)

    json_extra = ("view",)

    def view_heads(self) -> dict[str, HeadId]:
        """Heads to draw: the labelled ones, else the top-scoring ones."""
        return {role: self.labelled[role] or self.top[role] for role in VIEW_ROLES}

    def view(self) -> dict[str, Any]:
        """What a view draws: the labelled heads (``previous_token_head``...), the top-scoring
        ones (``top_previous_token``...) and the row's tokens."""
        key = {role: role.replace("-", "_") for role in VIEW_ROLES}
        heads = {f"{key[r]}_head": self.labelled[r] for r in VIEW_ROLES}
        return heads | {f"top_{key[r]}": self.top[r] for r in VIEW_ROLES} | {"tokens": self.tokens}


def discover(
    model: TransformerBridge,
    codec: Codec,
    options: DiscoveryOptions = DiscoveryOptions(),
    *,
    model_cfg: ModelConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> Discovery:
    """:func:`discover_heads` (``options`` passed on unchanged), then the view heads and the first
    row of the batch it scored. Only ``hook_pattern``/``hook_v`` are hooked, the pass stops before
    the unembedding and rows go through in chunks, so GPT-2 small fits in 2 GiB."""
    report = discover_heads(model, codec, options, model_cfg=model_cfg, progress=progress)
    row = report.batch.tokens[0]
    return Discovery(
        report=report,
        labelled={role: report.strongest(role) for role in VIEW_ROLES},
        top={role: top_head(report.scores.get(report.decides[role])) for role in VIEW_ROLES},
        tokens=row,
        str_tokens=codec.str_tokens(row.tolist()),
    )
