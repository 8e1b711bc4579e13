"""``exam TARGET --periods``: two-repeat exams at every period and token kind, with measured
chance levels (a thin shell over :mod:`interp_toolkit.exams.periods`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_toolkit.cli.app import check_out_file, console, emit, setup_torch
from interp_toolkit.errors import UserError


@dataclass(frozen=True)
class PeriodExamArgs:
    """What ``exam --periods`` was asked for."""

    n_prompts: int
    seed: int
    prepend_bos: bool
    kinds: str
    max_period: int | None
    max_offset: int
    chance_run: str | None


def parse_kinds(text: str) -> tuple[str, ...]:
    from interp_toolkit.exams.prompts import TOKEN_KINDS

    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    bad = [k for k in kinds if k not in TOKEN_KINDS]
    if bad or not kinds:
        raise UserError(
            f"--kinds {text!r}: use a comma-separated list of {', '.join(TOKEN_KINDS)}."
        )
    return kinds


def period_exams(
    target: str, device: str, args: PeriodExamArgs, json_out: Path | None, dtype: str = "fp32"
) -> None:
    if args.n_prompts < 1:
        raise UserError(f"--n-prompts {args.n_prompts} cannot work: use 1 or more.")
    if args.max_offset < 0:
        raise UserError(f"--max-offset {args.max_offset} cannot work: use 0 or more.")
    if args.max_period is not None and args.max_period < 2:
        raise UserError(f"--max-period {args.max_period} cannot work: use 2 or more.")
    kinds = parse_kinds(args.kinds)
    check_out_file(json_out, "--json")
    setup_torch()
    from interp_toolkit.exams.periods import exam_by_period, exam_with_chance, with_chance
    from interp_toolkit.exams.verdict import (
        chance_rule,
        exam_verdict,
        pass_rule,
        passes_rule,
    )
    from interp_toolkit.runs.targets import load_target
    from interp_toolkit.stats.thresholds import THRESHOLDS

    tgt = load_target(target, device, for_weights=False, dtype=dtype)
    ref = (
        load_target(args.chance_run, device, for_weights=False, dtype=dtype)
        if args.chance_run
        else None
    )
    options: dict[str, Any] = {
        "kinds": kinds,
        "n_prompts": args.n_prompts,
        "seed": args.seed,
        "prepend_bos": args.prepend_bos,
        "max_offset": args.max_offset,
    }
    if args.max_period is not None:
        options["max_period"] = args.max_period
    source = getattr(tgt, "source", None)
    rows = exam_with_chance(
        tgt.model, tgt.codec, model_cfg=getattr(source, "model_cfg", None), **options
    )
    if ref is not None:
        same = int(ref.model.cfg.n_ctx) == int(tgt.model.cfg.n_ctx)
        if not same or ref.codec.d_vocab != tgt.codec.d_vocab:
            raise UserError(
                f"--chance-run {args.chance_run} has another context or vocabulary than "
                f"{target}: it cannot sit the same prompts; give a run of the same recipe."
            )
        rows = with_chance(rows, exam_by_period(ref.model, ref.codec, **options), ref.name)
    verdict = exam_verdict(rows, THRESHOLDS)
    data = {
        "target": tgt.name,
        "prepend_bos": args.prepend_bos,
        "seed": args.seed,
        "pass_rule": pass_rule(THRESHOLDS),
        "exam_lower_bound": THRESHOLDS.exam_lower_bound,
        "chance_rule": chance_rule(len(rows), THRESHOLDS),
        "n_passing": verdict.n_passing,
        "n_exams": verdict.n_exams,
        "above": {name: len(v) for name, v in verdict.above.items()},
        "periods": [{**r.to_dict(), "passes_rule": passes_rule(r, THRESHOLDS)} for r in rows],
    }
    emit(data, _print, json_out)


def _print(data: dict[str, Any]) -> None:
    from rich.table import Table

    refs = list(dict.fromkeys(c["model"] for r in data["periods"] for c in r["chance"]))
    table = Table(
        title=f"{data['target']}: two-repeat exams by period ({data['n_passing']} of "
        f"{data['n_exams']} pass; {data['pass_rule']})"
    )
    for col in ("period", "tokens", "offsets", "prompts", "pass rate [Wilson 95%]", "passes"):
        table.add_column(col, justify="right")
    table.add_column("median rank", justify="right")
    for ref in refs:
        table.add_column(f"chance: {ref} (p)", justify="right")
    for r in data["periods"]:
        lo, hi = r["wilson95"]
        chance = {c["model"]: c for c in r["chance"]}
        table.add_row(
            str(r["period"]),
            r["kind"],
            f"{r['offsets']['min']}..{r['offsets']['max']} of {r['offsets']['positions']}",
            str(r["n_prompts"]),
            f"{r['pass_rate']:.1%} [{lo:.1%}, {hi:.1%}]",
            "yes" if r["passes_rule"] else "no",
            f"{r['median_rank']:g}",
            *[
                f"{chance[m]['pass_rate']:.1%} ({chance[m]['p_value']:.2g})" if m in chance else "-"
                for m in refs
            ],
        )
    out = console()
    out.print(table)
    out.print(data["chance_rule"], soft_wrap=True)
