"""``heads``, ``exam`` (and ``exam --periods``), ``copying`` and ``circuit``: a target's heads,
exams, one head's copying and the circuit of a task, each as a typed result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from interp_toolkit.causal.options import CircuitOptions
from interp_toolkit.errors import UserError
from interp_toolkit.exams.options import PeriodExamOptions
from interp_toolkit.exams.periods import PeriodExam
from interp_toolkit.exams.single import ExamResult
from interp_toolkit.exams.verdict import ExamVerdict, chance_rule, pass_rule, passes_rule
from interp_toolkit.files.serialize import Jsonable, json_field
from interp_toolkit.heads.options import DiscoveryOptions
from interp_toolkit.runs import targets
from interp_toolkit.runs.target import Target
from interp_toolkit.runtime.progress import status
from interp_toolkit.stats.thresholds import THRESHOLDS
from interp_toolkit.text.codecs import Codec

if TYPE_CHECKING:
    from interp_toolkit.models.architecture import Architecture


@dataclass(frozen=True)
class Read(Jsonable):
    """What a command read on a target: its name, the analysis's typed result (``result``, its
    JSON written into the record), the architecture's facts, its notes on the command's scores
    and the page when one was asked for (``circuit --out``)."""

    target: str
    result: Any = field(metadata=json_field(inline=True))
    architecture: Architecture
    notes: list[str]
    page: str | None = field(default=None, metadata=json_field(skip=True))


def _read(tgt: Target, result: Any, command: str, page: str | None = None, **where: Any) -> Read:
    from interp_toolkit.models.architecture import architecture_of

    arch = architecture_of(tgt.model)
    return Read(tgt.name, result, arch, arch.notes(command, **where), page)


def heads(
    target: str, options: DiscoveryOptions, device: str = "auto", dtype: str = "fp32"
) -> Read:
    """Every head's scores, their specificity tests and roles (``result``: a
    :class:`~interp_toolkit.heads.discovery.Discovery`)."""
    from interp_toolkit.heads.discovery import discover

    tgt = targets.load_target(target, device, for_weights=False, dtype=dtype)
    with status("heads", "scoring the probe") as shown:
        found = discover(
            tgt.model, tgt.codec, options, model_cfg=tgt.model_cfg, progress=shown.update
        )
    return _read(tgt, found, "heads", period=found.report.batch.period)


@dataclass(frozen=True)
class Exams(Jsonable):
    """The exams a target sat: each one's rank, probability and top next tokens."""

    target: str
    prepend_bos: bool
    results: list[ExamResult] = field(metadata=json_field(key="exams"))


def exams(
    target: str,
    prompt: str | None = None,
    expected: str | None = None,
    *,
    top_k: int = 10,
    prepend_bos: bool = True,
    device: str = "auto",
    dtype: str = "fp32",
) -> Exams:
    """The target's rank and probability of ``expected`` after ``prompt`` (both or neither:
    then the built-in exams), with the ``top_k`` next tokens."""
    from interp_toolkit.exams.single import Exam, exams_for, run_exam

    if (prompt is None) != (expected is None):
        raise UserError("give --prompt and --target together (or neither, for the built-in exams).")
    tgt = targets.load_target(target, device, for_weights=False, dtype=dtype)
    sat = exams_for(tgt.codec) if prompt is None else (Exam("custom", prompt, expected or ""),)
    results = [
        run_exam(tgt.model, tgt.codec, e.prompt, e.target, top_k, prepend_bos, name=e.name)
        for e in sat
    ]
    return Exams(tgt.name, prepend_bos, results)


def _default_token_ids(codec: Codec, d_vocab: int) -> list[int]:
    """Source tokens to show boosts for: the first four exam letters the codec keeps as single
    tokens (``' A'``..``' D'`` under BPE, ``'A'``..``'D'`` under bytes: letters, not control bytes)."""
    from interp_toolkit.exams.prompts import letter_pool

    ids = [i for i in letter_pool(codec).ids if i < d_vocab][:4]
    return ids or [i for i in range(min(4, d_vocab)) if i != codec.bos_id][:3]


def _one_token(codec: Codec, text: str, d_vocab: int) -> int:
    """The id of ``--token TEXT``: one known token as given, else as stripped of surrounding space
    (``' A'`` on a byte model is the letter ``'A'``); one line naming a token that works here
    otherwise."""
    for form in dict.fromkeys((text, text.strip())):
        enc = codec.encode(form) if form else []
        if len(enc) == 1 and not codec.contains_unk(enc) and enc[0] < d_vocab:
            return int(enc[0])
    example = codec.str_tokens(_default_token_ids(codec, d_vocab)[:1])
    raise UserError(
        f"--token {text!r} is not one known token of this model's vocabulary: give a single "
        f"token, e.g. {example[0]!r}."
        if example
        else "--token: give a single token."
    )


def copying(
    target: str,
    head: str,
    tokens: list[str] | None = None,
    *,
    top_k: int = 10,
    device: str = "auto",
    dtype: str = "fp32",
) -> Read:
    """A head's OV copying score, copy accuracy and the tokens each of ``tokens`` boosts
    (``result``: a :class:`~interp_toolkit.weights.circuits.HeadCircuit`)."""
    from interp_toolkit.heads.registry import HeadId
    from interp_toolkit.weights.circuits import check_head, head_circuit, trained_token_ids

    layer, index = HeadId.parse(head)
    tgt = targets.load_target(target, device, dtype=dtype)
    check_head(tgt.model, layer, index)
    d_vocab = int(tgt.model.cfg.d_vocab)
    given = [_one_token(tgt.codec, text, d_vocab) for text in tokens or []]
    ids = given or _default_token_ids(tgt.codec, d_vocab)
    result = head_circuit(
        tgt.model, tgt.codec, layer, index, token_ids=ids, k=top_k, trained=trained_token_ids(tgt)
    )
    return _read(tgt, result, "copying")


def circuit(
    target: str,
    options: CircuitOptions,
    *,
    page: bool = False,
    device: str = "auto",
    dtype: str = "fp32",
) -> Read:
    """Every edge ranked by attribution (EAP / EAP-IG), the faithfulness curve and the smallest
    circuit recovering 80% of ``options.task`` (``result``: a
    :class:`~interp_toolkit.causal.circuit.Circuit`); ``page``: its drawing too."""
    from interp_toolkit.causal.circuit import discover_circuit
    from interp_toolkit.causal.tasks import make_task
    from interp_toolkit.runtime.seeds import derive

    tgt = targets.load_target(target, device, for_weights=False, dtype=dtype)
    # the study's induction task draws its prompts with derive(seed, "study_task"): the same here
    o = options
    prompts = derive(o.seed, "study_task") if o.task == "induction" else o.seed
    made = make_task(o.task, tgt.model, tgt.codec, n_prompts=o.n_prompts, seed=prompts)
    with status("circuit", "scoring edges") as shown:
        found = discover_circuit(
            tgt.model,
            made,
            ig_steps=o.ig_steps,
            per_position=o.per_position,
            seed=o.seed,
            fixed_k=o.edges,
            progress=shown.update,
        )
    html = None
    if page:
        from interp_toolkit.reports.circuit_report import circuit_page

        cfg = tgt.model.cfg
        html = circuit_page(found, target=tgt.name, n_layers=cfg.n_layers, n_heads=cfg.n_heads)
    listed = replace(found, n_ranked=2000 if o.per_position else None)
    return _read(tgt, listed, "circuit", html)


def _verdict_json(v: ExamVerdict) -> dict[str, Any]:
    """The rules in words (:mod:`~interp_toolkit.exams.verdict`) and the verdict's counts."""
    return {
        "pass_rule": pass_rule(),
        "exam_lower_bound": THRESHOLDS.exam_lower_bound,
        "chance_rule": chance_rule(v.n_exams),
        "n_passing": v.n_passing,
        "n_exams": v.n_exams,
        "above": {name: len(above) for name, above in v.above.items()},
    }


def _rows_json(rows: list[PeriodExam]) -> list[dict[str, Any]]:
    return [{**r.to_dict(), "passes_rule": passes_rule(r)} for r in rows]


@dataclass(frozen=True)
class PeriodExams(Jsonable):
    """``exam --periods``: their verdict (:class:`~interp_toolkit.exams.verdict.ExamVerdict`,
    written as the rules and its counts) and every period's exam (``rows``, each with its chance
    levels and whether it passes)."""

    target: str
    prepend_bos: bool
    seed: int
    verdict: ExamVerdict = field(metadata=json_field(encode=_verdict_json, inline=True))
    rows: list[PeriodExam] = field(metadata=json_field(key="periods", encode=_rows_json))


def period_exams(
    target: str,
    options: PeriodExamOptions,
    *,
    prepend_bos: bool = True,
    device: str = "auto",
    dtype: str = "fp32",
) -> PeriodExams:
    """Two-repeat exams at every period and token kind, chance measured on an untrained twin
    (and on ``options.chance_run``, which sits the same prompts), and their verdict."""
    chance_run, exam = options.chance_run, options.exam(prepend_bos)
    from interp_toolkit.exams.periods import exam_by_period, exam_with_chance, with_chance
    from interp_toolkit.exams.verdict import exam_verdict

    def load(spec: str) -> Target:
        return targets.load_target(spec, device, for_weights=False, dtype=dtype)

    tgt, ref = load(target), load(chance_run) if chance_run else None
    rows = exam_with_chance(tgt.model, tgt.codec, model_cfg=tgt.model_cfg, **exam)
    if ref is not None:
        if ref.model.cfg.n_ctx != tgt.model.cfg.n_ctx or ref.codec.d_vocab != tgt.codec.d_vocab:
            raise UserError(
                f"--chance-run {chance_run} has another context or vocabulary than "
                f"{target}: it cannot sit the same prompts; give a run of the same recipe."
            )
        rows = with_chance(rows, exam_by_period(ref.model, ref.codec, **exam), ref.name)
    return PeriodExams(tgt.name, prepend_bos, options.seed, exam_verdict(rows), rows)
