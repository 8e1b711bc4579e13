"""Hand-made measurements for the study's sentences and verdicts (tests/unit/reports and
tests/unit/study): period exams with known pass counts, a measured route, a depth's whole
measurement, an MLP layer's neuron counts."""

from __future__ import annotations

import dataclasses

import torch

from interp_toolkit.causal.routes import (
    Estimate,
    ModelRoute,
    PathEffect,
    head_route,
    model_route_name,
)
from interp_toolkit.exams.periods import Chance, PeriodExam
from interp_toolkit.exams.role_checks import RoleCheck, RoleChecks
from interp_toolkit.heads.registry import HeadId
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.run import ExamRow
from interp_toolkit.stats.intervals import Interval
from interp_toolkit.units.neurons import LayerNeurons, NeuronStats
from interp_toolkit.units.reading import Concept, RuleCount, TopActivations

PERIODS = range(2, 17)


KINDS = ("letters", "random")


N = 200


UNTRAINED = "untrained 2-layer model (same architecture)"


def ranks_of(passes: int) -> tuple[int, ...]:
    """N prompts' ranks: the first ``passes`` pass."""
    return (0,) * passes + (7,) * (N - passes)


def exam(
    kind: str, period: int, passes: int, chance: int = 0, control: int | None = None
) -> PeriodExam:
    """One exam of N prompts: the first ``passes`` prompts pass; an untrained model on the same
    prompts passes ``chance`` of them (p-value: the exact McNemar test); under the order control
    the first ``control`` prompts pass (None: the control was not sat)."""
    from interp_toolkit.stats.intervals import mcnemar_greater

    ranks = ranks_of(passes)
    ref = [i < chance for i in range(N)]
    p = mcnemar_greater([r == 0 for r in ranks], ref)
    return PeriodExam(
        period, kind, N, passes, 0.0 if passes > N // 2 else 7.0, (0, 28), ranks,
        f"{kind}-{period}", (Chance(UNTRAINED, chance, N, p),),
        control_ranks=() if control is None else ranks_of(control),
    )  # fmt: skip


def exams(
    passes: int | dict[tuple[str, int], int], chance: int = 0, control: int | None = None
) -> tuple[PeriodExam, ...]:
    """Every exam with ``passes`` passes (or per exam), the control ``control`` passes, or a
    copier's N/period when ``control`` is -1."""

    def k(kind: str, p: int) -> int:
        return passes.get((kind, p), N) if isinstance(passes, dict) else passes

    def c(p: int) -> int | None:
        return N // p if control == -1 else control

    return tuple(exam(kind, p, k(kind, p), chance, c(p)) for kind in KINDS for p in PERIODS)


def copier() -> tuple[PeriodExam, ...]:
    """A 1-layer model that guesses among the period's tokens in context: N/period passes, as
    many under the order control (the same tokens in context, in another order)."""
    return tuple(exam(kind, p, N // p, control=N // p) for kind in KINDS for p in PERIODS)


def route(carrying: str | None) -> ModelRoute:
    """A measured route of induction head 1.1 whose ``carrying`` input (or none) carries it."""
    inputs = {
        c: Estimate(0.9, 0.85, 0.95) if c == carrying else Estimate(0.02, 0.0, 0.04) for c in "qkv"
    }
    paths = [
        PathEffect(
            HeadId(0, h), HeadId(1, 1), c, inputs[c] if h == 0 else Estimate(0.0, 0.0, 0.01), 0.1
        )
        for h in range(2)
        for c in "qkv"
    ]
    head = head_route(HeadId(1, 1), Estimate(0.9, 0.85, 0.95), inputs, paths, HeadId(0, 1))
    gap = Estimate(3.0, 2.8, 3.2)
    return ModelRoute("induction", 64, 3.2, 0.2, gap, 0.05, (head,), model_route_name([head], gap))


def role_checks(deep: bool, removed: float = 1.0) -> RoleChecks:
    """A 2-layer model's induction head 1.2 removing ``removed`` of the drop (its check passes
    above the 0.1 floor); a 1-layer model with no role to check."""
    checks = (
        (RoleCheck(HeadId(1, 2), "induction", Estimate(removed, removed - 0.05, removed + 0.05),
                   "the repeated-passage drop", removed >= 0.1),)
        if deep
        else ()
    )  # fmt: skip
    drop = Estimate(0.5, 0.45, 0.55) if deep else Estimate(0.0, -0.01, 0.01)
    return RoleChecks(checks, drop, None, 64, 128, 0.1)


def depth(n_layers: int, **kw) -> DepthMeasurement:
    deep = n_layers > 1
    base = DepthMeasurement(
        name=f"cpu-{n_layers}l",
        n_layers=n_layers,
        induction_heads=("1.0", "1.2") if deep else (),
        top_head="1.2" if deep else "0.3",
        top_score=0.91 if deep else 0.08,
        induction_step=350 if deep else None,
        induction_tokens=1_433_600 if deep else None,
        induction_minutes=0.7 if deep else None,
        steps=550,
        tokens=2_252_800,
        train_minutes=1.1,
        final_loss=2.1,
        val_loss=2.3,
        period_exams=exams(N, control=-1) if deep else copier(),
        prompt_exams=(
            ExamRow("ABCXDEF", "A B C", " F", deep, 0 if deep else 24, 0.8 if deep else 0.007, ""),
            ExamRow("ABCD", "A B C", " D", deep, 0 if deep else 9, 0.4 if deep else 0.01, ""),
        ),
        passage_order=Interval(0.5, 0.45, 0.55, 64, "t")
        if deep
        else Interval(0.001, -0.004, 0.006, 64, "t"),
        role_checks=role_checks(deep),
        route=route("k")
        if deep
        else ModelRoute(
            "induction",
            64,
            0.3,
            0.2,
            Estimate(0.1, 0.0, 0.2),
            None,
            (),
            model_route_name([], Estimate(0.1, 0.0, 0.2)),
        ),
    )
    return dataclasses.replace(base, **kw)


def neuron_stats(mono: int, live: int, n: int, k: int, groups: int = 1) -> NeuronStats:
    """``n`` neurons: ``mono`` monosemantic, ``live - mono`` not, the rest dead."""
    top = TopActivations(
        torch.ones(n, k), torch.zeros(n, k, dtype=torch.long), torch.zeros(n, k, dtype=torch.long)
    )
    concepts = [Concept("token", 4, 1.0, 0.01, 1e-9, True)] * mono
    concepts += [Concept("token", 4, 0.5, 0.01, 1e-3, False)] * (live - mono)
    concepts += [Concept("token", -1, 0.0, 0.0, 1.0, False, dead=True)] * (n - live)
    grp = torch.tensor([groups] * live + [0] * (n - live))
    return NeuronStats(top, torch.zeros(n, k, dtype=torch.long), concepts, grp, torch.ones(n), 0.2)


def neurons(model=(60, 100), untrained=(20, 100), shuffled=(0, 100), n=100, k=20) -> LayerNeurons:
    stats = {
        "model": neuron_stats(*model, n, k),
        "untrained": neuron_stats(*untrained, n, k, groups=3),
        "shuffled": neuron_stats(*shuffled, n, k, groups=4),
    }
    return LayerNeurons(1, stats, torch.zeros(n, 3, dtype=torch.long), torch.zeros(n, 3))


def rule_count(mono: int, live: int) -> RuleCount:
    return RuleCount(units=live, dead=0, monosemantic=mono, by_kind={})
