"""The analysis of one run that its report shows, as data: :func:`analyse_run` -> :class:`RunAnalysis`.

Head scores and roles (discovery: per-head null tests), the exams (single prompts, and
two-repeat exams at every period), per-head impact curves on repeated random tokens, the route
by path of the induction heads (:func:`~interp_toolkit.causal.induction_route`), and the
attention patterns of the key heads: the heads with a role, the strongest induction head
(:func:`~interp_toolkit.heads.induction.strongest_induction_head`) and the heads that feed the
induction heads (measured by the route), and the causal check of each induction and
previous-token role (:mod:`~interp_toolkit.exams.role_checks`). :meth:`RunAnalysis.summary` is
the :class:`RunSummary` a study compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp_toolkit.causal import induction_route
from interp_toolkit.causal.ablation import head_impact
from interp_toolkit.causal.routes import ModelRoute
from interp_toolkit.errors import UserError
from interp_toolkit.exams.periods import PeriodExam, exam_with_chance
from interp_toolkit.exams.role_checks import CHECK_PASSAGES, CHECKED_ROLES, RoleChecks, role_checks
from interp_toolkit.exams.single import Exam, ExamResult, exams_for, run_exam
from interp_toolkit.exams.text_measures import passage_order_effect
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.discovery import HeadReport, discover_heads
from interp_toolkit.heads.induction import strongest_induction_head
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.heads.patterns import attention_patterns
from interp_toolkit.heads.registry import ROLES, HeadId, top_head
from interp_toolkit.heads.repeats import repeated_batch
from interp_toolkit.probing.data import TooShort, corpus_of, heldout_windows
from interp_toolkit.runs.folder import Run, read_samples
from interp_toolkit.stats.intervals import Interval

#: The roles whose deciding scores' per-head grids a summary carries (the comparison page draws them).
SUMMARY_ROLES = ("induction", "previous-token")


@dataclass
class ExamOutcome:
    """One exam on a run: its result, or why it could not run (e.g. a token the vocabulary lacks)."""

    exam: Exam
    result: ExamResult | None = None
    error: str = ""

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed


@dataclass(frozen=True)
class ExamRow:
    name: str
    prompt: str
    target: str
    passed: bool
    rank: int | None
    prob: float | None
    error: str


@dataclass
class ExamSummary:
    passed: bool  # every exam that ran passed
    n_passed: int
    n_total: int  # exams that ran
    results: list[ExamRow]


@dataclass
class TopHead:
    """The head with the highest ``kind`` score, its τ and p-value against its null."""

    kind: str
    head: str
    score: float
    tau: float
    p_value: float


_NOT_SAVED = json_field(skip=True)  # not in study.json


@dataclass
class RunSummary(Jsonable):
    """What a study compares across runs; its JSON (:meth:`to_dict`) is what study.json keeps."""

    name: str
    href: str = field(metadata=_NOT_SAVED)
    n_layers: int
    n_heads: int = field(metadata=_NOT_SAVED)
    final_loss: float | None
    tokens_seen: int | None = field(metadata=_NOT_SAVED)
    prompt_exams: ExamSummary  # the single-prompt exams (the period exams: DepthMeasurement)
    heads: dict[str, list[str]]  # role -> heads with it
    has_induction_head: bool = field(metadata=_NOT_SAVED)
    feeder: str | None  # the head feeding the strongest induction head, by the route by path
    route: ModelRoute
    top_induction: TopHead
    top_previous_token: TopHead = field(metadata=_NOT_SAVED)
    decides: dict[str, str]  # role -> deciding score
    test: str  # when a score is significant, e.g. "p <= 0.05"
    floors: dict[str, float] = field(metadata=_NOT_SAVED)  # effect-size floors
    # the deciding scores of SUMMARY_ROLES, [layer][head]: score, τ, p-value, passes
    scores: dict[str, list[list[float]]] = field(metadata=_NOT_SAVED)
    tau: dict[str, list[list[float]]] = field(metadata=_NOT_SAVED)
    p_value: dict[str, list[list[float]]] = field(metadata=_NOT_SAVED)
    passes: dict[str, list[list[bool]]] = field(metadata=_NOT_SAVED)
    loss_curve: list[list[int | float]] = field(metadata=_NOT_SAVED)  # [tokens (or step), loss]
    role_checks: RoleChecks | None = None  # None: not measured


@dataclass
class RunAnalysis:
    """Everything a run report shows."""

    run: Run
    rows: list[dict[str, Any]]  # metrics.jsonl
    head_report: HeadReport
    exams: list[ExamOutcome]
    samples: list[dict[str, str]]
    repeated: Int[Tensor, " pos"]  # one repeated-random-token row
    period: int
    impact: Float[Tensor, "layer head impact_pos"] | None
    induction_head: HeadId  # the strongest induction head (layer >= 1), whatever its role
    prev_token_head: HeadId  # the highest deciding previous-token score
    route: ModelRoute  # the route by path of the induction heads
    patterns: dict[int, Float[Tensor, "head dest src"]]  # on ``repeated``, the key heads' layers
    period_exams: list[PeriodExam] = field(default_factory=list)
    period_exam_error: str = ""  # why there are no period exams (e.g. no letters in the vocabulary)
    role_checks: RoleChecks | None = None  # the causal check of each role (None: not measured)
    # the passage order effect on the same held-out passages (None: no held-out windows)
    passage_order: Interval | None = None

    @property
    def name(self) -> str:
        return self.run.name

    def key_heads(self) -> list[HeadId]:
        """The heads a report draws: every head with a role, the strongest induction head, and
        the heads that feed the induction heads (by the route)."""
        rep = self.head_report
        heads = {h for role in ROLES[:-1] for h in rep.heads_with_role(role)}
        heads.add(self.induction_head)
        heads |= {h.feeder for h in self.route.heads if h.feeder is not None}
        return sorted(heads)

    def feeder(self) -> HeadId | None:
        """The head feeding the strongest induction head, by the route by path (None when no
        input carries its induction)."""
        return next((h.feeder for h in self.route.heads if h.head == self.induction_head), None)

    def summary(self, href: str | None = None) -> RunSummary:
        rep, cfg = self.head_report, self.run.model.cfg
        sc = rep.scores
        ran = [e for e in self.exams if e.result is not None]
        n_passed = sum(e.passed for e in self.exams)
        losses = [r for r in self.rows if "loss" in r]
        step = max(1, len(losses) // 200)
        heads = {role: [str(h) for h in rep.heads_with_role(role)] for role in ROLES[:-1]}
        feeder = self.feeder()
        kinds = [rep.decides[role] for role in SUMMARY_ROLES]

        def top(kind: str, head: HeadId) -> TopHead:
            grids = (sc.get(kind), rep.tests.tau[kind], rep.tests.p_value[kind])
            return TopHead(kind, str(head), *(float(g[head]) for g in grids))

        return RunSummary(
            name=self.name,
            href=href if href is not None else f"{self.name}/{self.run.paths.report.name}",
            n_layers=cfg.n_layers,
            n_heads=cfg.n_heads,
            final_loss=float(losses[-1]["loss"]) if losses else None,
            tokens_seen=losses[-1].get("tokens") if losses else None,
            prompt_exams=ExamSummary(
                passed=bool(ran) and n_passed == len(ran),
                n_passed=n_passed,
                n_total=len(ran),
                results=[
                    ExamRow(
                        name=e.exam.name,
                        prompt=e.exam.prompt,
                        target=e.exam.target,
                        passed=e.passed,
                        rank=None if e.result is None else int(e.result.rank),
                        prob=None if e.result is None else float(e.result.prob),
                        error=e.error,
                    )
                    for e in self.exams
                ],
            ),
            heads=heads,
            has_induction_head=bool(heads["induction"]),
            top_induction=top(kinds[0], self.induction_head),
            top_previous_token=top(kinds[1], self.prev_token_head),
            feeder=None if feeder is None else str(feeder),
            route=self.route,
            decides=dict(rep.decides),
            test=rep.significance(),
            floors={k: float(v) for k, v in rep.floors.items()},
            scores={k: sc.get(k).tolist() for k in kinds},
            tau={k: rep.tests.tau[k].tolist() for k in kinds},
            p_value={k: rep.tests.p_value[k].tolist() for k in kinds},
            passes={k: rep.passes(k).tolist() for k in kinds},
            loss_curve=[[r.get("tokens", r.get("step")), float(r["loss"])] for r in losses[::step]],
            role_checks=self.role_checks,
        )


def analyse_run(
    run: Run,
    *,
    samples: list[dict[str, str]] | None = None,
    head_report: HeadReport | None = None,
    exams: Sequence[Exam] | None = None,
    n_seqs: int = 16,
    seed: int = 0,
) -> RunAnalysis:
    """Run the analysis a report shows: head scores and roles, exams, impact curves, key patterns."""
    model, codec = run.model, run.codec
    if head_report is None:
        head_report = discover_heads(
            model, codec, DiscoveryOptions(seed=seed), model_cfg=run.model_cfg
        )
    outcomes = []
    for exam in exams_for(codec) if exams is None else exams:
        try:
            outcomes.append(
                ExamOutcome(exam, run_exam(model, codec, exam.prompt, exam.target, name=exam.name))
            )
        except UserError as exc:
            outcomes.append(ExamOutcome(exam, None, str(exc)))
    period = max(2, min(24, (int(model.cfg.n_ctx) - 1) // 2))
    batch = repeated_batch(codec, codec.d_vocab, n_seqs, period, seed=seed).tokens
    with torch.no_grad():
        impact = head_impact(model, batch, mode="mean").detach().float().cpu()
    scores, decides = head_report.scores, head_report.decides
    induction_head = strongest_induction_head(scores.get(decides["induction"]))
    prev_token_head = top_head(scores.get(decides["previous-token"]))
    assert induction_head is not None and prev_token_head is not None  # every model has heads
    repeated = batch[0].cpu()
    try:
        period_exams = exam_with_chance(
            model, codec, model_cfg=run.model_cfg, seed=seed, order_control=True
        )
        period_error = ""
    except UserError as exc:
        period_exams, period_error = [], str(exc)
    route = induction_route(model, codec, head_report, seed=seed)
    windows = check_windows(run, seed=seed)
    checks = passage = None
    if windows is not None:
        roles = {r: head_report.heads_with_role(r) for r in CHECKED_ROLES}
        checks = role_checks(model, windows, roles, route, seed=seed)
        passage = passage_order_effect(model, windows, seed=seed)
    analysis = RunAnalysis(
        run=run,
        rows=run.metrics(),
        head_report=head_report,
        exams=outcomes,
        samples=read_samples(run.path) if samples is None else list(samples),
        repeated=repeated,
        period=period,
        impact=impact,
        induction_head=induction_head,
        prev_token_head=prev_token_head,
        route=route,
        patterns={},
        period_exams=period_exams,
        period_exam_error=period_error,
        role_checks=checks,
        passage_order=passage,
    )
    layers = sorted({h.layer for h in analysis.key_heads()})
    analysis.patterns = attention_patterns(model, repeated, layers)
    return analysis


def check_windows(run: Run, *, seed: int = 0) -> Int[Tensor, "window pos"] | None:
    """The held-out windows of the run's own corpus the causal checks read (a context each,
    :data:`~interp_toolkit.exams.role_checks.CHECK_PASSAGES` of them); None when that corpus has
    no held-out window of that length."""
    corpus, val_fraction = corpus_of(run)
    try:
        return heldout_windows(
            run.codec,
            seq_len=int(run.model.cfg.n_ctx),
            n_windows=CHECK_PASSAGES,
            corpus=corpus,
            val_fraction=val_fraction,
            seed=seed,
        )
    except TooShort:  # a corpus that is gone is said as itself, not as "no window"
        return None
