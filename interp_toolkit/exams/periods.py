"""Two-repeat exams at every period and token kind: does the model copy the token after the
earlier occurrence, wherever the pattern sits and whatever the distance? (The prompts:
:mod:`interp_toolkit.exams.prompts`; single prompts: :mod:`interp_toolkit.exams.single`;
the pass rule and verdicts: :mod:`interp_toolkit.exams.verdict`.)

A prompt passes when the target's rank (:func:`~.exam.target_rank`, ties fail) is 0; the prompts
of all exams run together in a few batched passes of prompts of similar length
(:data:`TOKENS_PER_PASS`), and a TransformerBridge unembeds the query positions only. Chance is measured, not assumed: :func:`exam_with_chance` sits
the same prompts on an untrained model of the same architecture, and :func:`with_chance` pairs an
exam with any other model's (the study's 1-layer model), with an exact one-sided McNemar test on
the shared prompts.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from jaxtyping import Int

from interp_toolkit.exams.prompts import MIN_OFFSETS, ExamPrompts, exam_plan
from interp_toolkit.exams.single import target_rank
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.stats.intervals import Interval, mcnemar_greater, wilson
from interp_toolkit.text.codecs import Codec

#: The test behind every "above chance": paired, on the same prompts.
CHANCE_TEST = "exact one-sided McNemar test on the same prompts"


class _Stop(Exception):
    """Ends a forward pass at the unembedding's input."""


def query_logits(
    model: torch.nn.Module,
    tokens: Int[torch.Tensor, "prompt pos"],
    query: Int[torch.Tensor, " prompt"],
) -> torch.Tensor:
    """The logits at each row's query position. A TransformerBridge is stopped at the
    unembedding's input and unembeds the query positions only (at a 1,024-token vocabulary that
    is half the cost of a 2-layer model's pass); any other model runs whole."""
    rows = torch.arange(tokens.shape[0])
    if "unembed.hook_in" not in getattr(model, "hook_dict", {}) or not hasattr(model, "unembed"):
        return model(tokens)[rows.to(tokens.device), query.to(tokens.device)]
    store: dict[str, torch.Tensor] = {}

    def grab(act: torch.Tensor, hook: Any) -> None:
        store["x"] = act[rows.to(act.device), query.to(act.device)]
        raise _Stop

    try:
        with model.hooks(fwd_hooks=[("unembed.hook_in", grab)]):
            model(tokens)
    except _Stop:
        pass
    return model.unembed(store["x"])


#: How many token positions one batched forward pass of the exams holds (the cpu preset: every
#: 6,000 prompts of its 30 exams in six passes; the per-pass overhead of a small model is large).
TOKENS_PER_PASS = 1 << 15


def exam_ranks(
    model: torch.nn.Module, plan: Sequence[ExamPrompts], d_vocab: int
) -> list[tuple[list[int], list[float]]]:
    """The target's rank (:func:`~.exam.target_rank`) and probability at each prompt's query
    position, for every exam of ``plan``: all prompts together, sorted by query position and cut
    into batched passes of :data:`TOKENS_PER_PASS` positions, each cut after its last query (and
    smaller when a model's full logits would pass 64M entries)."""
    param = next(iter(model.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    width = max(p.tokens.shape[1] for p in plan)
    tokens = torch.cat(
        [torch.nn.functional.pad(p.tokens, (0, width - p.tokens.shape[1])) for p in plan]
    )  # padding only ever follows a query
    query = torch.cat([p.query for p in plan])
    target = torch.cat([p.target for p in plan])
    order = query.argsort(stable=True)
    ranks = torch.empty(len(query), dtype=torch.long)
    probs = torch.empty(len(query), dtype=torch.float64)
    per = max(1, min(TOKENS_PER_PASS // width, (1 << 26) // (width * d_vocab)))
    for lo in range(0, len(order), per):
        rows = order[lo : lo + per]
        length = int(query[rows].max()) + 1
        with torch.no_grad():
            at = query_logits(model, tokens[rows, :length].to(device), query[rows]).float().cpu()
        ranks[rows] = target_rank(at, target[rows])
        probs[rows] = at.softmax(-1).gather(-1, target[rows, None])[:, 0].double()
    sizes = [p.tokens.shape[0] for p in plan]
    parts = zip(ranks.split(sizes), probs.split(sizes), strict=True)
    return [(r.tolist(), p.tolist()) for r, p in parts]


class _PassRate:
    """``passes`` of ``n_prompts``: the rate and its Wilson 95% interval."""

    passes: int
    n_prompts: int

    @property
    def pass_rate(self) -> float:
        return self.passes / self.n_prompts

    @property
    def interval(self) -> Interval:
        """The Wilson 95% interval of the pass rate."""
        return wilson(self.passes, self.n_prompts)

    @property
    def wilson95(self) -> list[float]:
        return [self.interval.low, self.interval.high]


@dataclass(frozen=True)
class Chance(_PassRate, Jsonable):
    """Another model's pass count on the same prompts (an untrained model of the same
    architecture, or the study's 1-layer model), and the p-value of the examined model passing
    more often (:data:`CHANCE_TEST`)."""

    model: str
    passes: int
    n_prompts: int
    p_value: float

    test = CHANCE_TEST
    json_extra = ("pass_rate", "wilson95", "test")
    json_order = ("model", "passes", "n_prompts", "pass_rate", "wilson95", "p_value", "test")


def _order_control(ranks: tuple[int, ...]) -> dict[str, int] | None:
    """The order control's passes of its prompts (None: not sat)."""
    return {"passes": sum(r == 0 for r in ranks), "n_prompts": len(ranks)} if ranks else None


@dataclass(frozen=True)
class PeriodExam(_PassRate, Jsonable):
    """One model's exam at one period and token kind: ``passes`` of ``n_prompts`` prompts had
    rank 0; ``ranks`` per prompt; ``offsets``: the (smallest, largest) prefix used;
    ``positions``: how many start positions the prefix was drawn from (:data:`~.prompts.MIN_OFFSETS`
    or more at every default period); ``digest``: the prompts' (:meth:`ExamPrompts.digest`);
    ``chance``: other models on the same prompts; ``mean_prob``: the target's mean probability;
    ``control_ranks``: the same model's ranks on the order control, prompt by prompt (empty: not
    sat; :mod:`~.prompts`)."""

    period: int
    kind: str
    n_prompts: int
    passes: int
    median_rank: float
    offsets: tuple[int, int] = field(default=(0, 0), metadata=json_field(skip=True))
    ranks: tuple[int, ...] = field(default=(), metadata=json_field(skip=True))
    digest: str = field(default="", metadata=json_field(skip=True))
    chance: tuple[Chance, ...] = ()
    positions: int = field(default=0, metadata=json_field(skip=True))
    mean_prob: float | None = field(default=None, metadata=json_field(omit_none=True))
    control_ranks: tuple[int, ...] = field(
        default=(), metadata=json_field(key="order_control", encode=_order_control, omit_none=True)
    )

    json_extra = {"pass_rate": "pass_rate", "wilson95": "wilson95", "offsets": "offset_record"}
    json_order = (
        "period",
        "kind",
        "n_prompts",
        "passes",
        "pass_rate",
        "wilson95",
        "median_rank",
        "offsets",
        "chance",
        "mean_prob",
        "order_control",
    )

    @property
    def roomy(self) -> bool:
        """Whether the prompts start at :data:`~.prompts.MIN_OFFSETS` positions or more."""
        return self.positions >= MIN_OFFSETS

    @property
    def offset_record(self) -> dict[str, Any]:
        """The prefixes used, as exam JSON records them."""
        low, high = self.offsets
        return {
            "min": low,
            "max": high,
            "positions": self.positions,
            "at_least": MIN_OFFSETS,
            "roomy": self.roomy,
        }

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.period)

    def same_prompts(self, other: PeriodExam | None) -> bool:
        """Whether ``other`` sat the same prompts (kind, period and prompt digest)."""
        return (
            other is not None
            and other.digest == self.digest
            and len(other.ranks) == len(self.ranks)
        )


def sit_exams(
    model: torch.nn.Module,
    plan: Sequence[ExamPrompts],
    d_vocab: int,
    controls: Sequence[ExamPrompts] = (),
) -> list[PeriodExam]:
    """``model``'s result on each exam of ``plan`` (:func:`~.exam_prompts.exam_plan`), and on
    its order control where ``controls`` (the same plan with ``order_control``) is given."""
    sat = exam_ranks(model, [*plan, *controls], d_vocab)
    control = [r for r, _ in sat[len(plan) :]] or [[] for _ in plan]
    return [
        PeriodExam(
            period=prompts.period,
            kind=prompts.kind,
            n_prompts=len(ranks),
            passes=sum(r == 0 for r in ranks),
            median_rank=float(statistics.median(ranks)),
            offsets=(int(prompts.offsets.min()), int(prompts.offsets.max())),
            positions=prompts.positions,
            ranks=tuple(ranks),
            digest=prompts.digest(),
            mean_prob=statistics.fmean(probs),
            control_ranks=tuple(ctl),
        )
        for prompts, (ranks, probs), ctl in zip(plan, sat[: len(plan)], control, strict=True)
    ]


def exam_by_period(model: torch.nn.Module, codec: Codec, **options: Any) -> list[PeriodExam]:
    """Two-repeat exams of every kind at every period (default: 2 ..
    :func:`~.prompts.roomy_exam_period` of the kind, the longest period whose prompts can start at
    :data:`~.prompts.MIN_OFFSETS` positions, or ``max_period`` if smaller): ``options`` are :func:`exam_plan`'s (``periods``,
    ``kinds``, ``n_prompts`` = 200, ``seed``, ``prepend_bos``, ``max_offset`` = 64,
    ``max_period``). ``model`` needs ``cfg.n_ctx`` and ``model(tokens) -> logits [batch, pos,
    vocab]``."""
    plan = exam_plan(codec, int(model.cfg.n_ctx), **options)
    return sit_exams(model, plan, int(codec.d_vocab))


def with_chance(
    exams: Sequence[PeriodExam], reference: Sequence[PeriodExam], name: str
) -> list[PeriodExam]:
    """``exams`` with ``reference`` (another model's exams) added as a chance level wherever the
    two sat the same prompts (same kind, period and prompt digest); the others are unchanged."""
    by_key: Mapping[tuple[str, int], PeriodExam] = {r.key: r for r in reference}
    out = []
    for e in exams:
        r = by_key.get(e.key)
        if not e.ranks or not e.same_prompts(r):
            out.append(e)
            continue
        p = mcnemar_greater([x == 0 for x in e.ranks], [x == 0 for x in r.ranks])
        chance = Chance(name, r.passes, r.n_prompts, p)
        out.append(replace(e, chance=(*(c for c in e.chance if c.model != name), chance)))
    return out


def exam_with_chance(
    model: torch.nn.Module,
    codec: Codec,
    *,
    model_cfg: Any = None,
    order_control: bool = False,
    **options: Any,
) -> list[PeriodExam]:
    """:func:`exam_by_period` (``options``) on ``model``, with the same prompts on an untrained
    model of its architecture (seeded, :func:`~.untrained.untrained_models`) as its chance level;
    without one (an architecture that cannot be rebuilt), no chance level. ``order_control``:
    ``model`` also sits each exam's order control."""
    from interp_toolkit.heads.untrained import untrained_models

    n_ctx = int(model.cfg.n_ctx)
    plan = exam_plan(codec, n_ctx, **options)
    controls = exam_plan(codec, n_ctx, **options, order_control=True) if order_control else ()
    exams = sit_exams(model, plan, int(codec.d_vocab), controls)
    maker = untrained_models(model, model_cfg=model_cfg, n_models=1)  # type: ignore[arg-type]
    if maker is None:
        return exams
    reference = sit_exams(maker.make(maker.seeds[0]), plan, int(codec.d_vocab))
    name = f"untrained {int(model.cfg.n_layers)}-layer model (same architecture)"
    return with_chance(exams, reference, name)
