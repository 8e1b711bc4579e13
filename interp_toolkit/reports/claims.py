"""The claims table: the original post's claims (:mod:`interp_toolkit.measures.claims`), the
post's numbers beside ours, each criterion in a few words and a mark per setting. Rules live with
the measures; here each verdict is rendered by one template (:data:`TEMPLATES`) whose fields are
the verdict's numbers, printed by kind (:func:`show`): one seed's value, or over several seeds
the median and range. Re-word a row here without touching its rule."""

from __future__ import annotations

import html
import re
import statistics
from collections.abc import Sequence

from interp_toolkit.measures.claims import CLAIMS, ClaimOverSeeds, Mark
from interp_toolkit.measures.registry import percent
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds


def ordinal(n: float | int) -> str:
    k = int(round(n))
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k:,}{suffix}"


#: How a number of each kind prints.
KINDS = {
    "rank": ordinal,
    "prob": lambda v: percent(v) if v >= 0.01 else f"{100 * v:.2g}%",
    "rate": percent,
    "points": lambda v: f"{100 * v:+.1f} pts",
    "nats": lambda v: f"{v:+.3f} nats",
    "fall": lambda v: f"{v:.3f}",
    "p": lambda v: "< 1e-300" if v == 0 else f"{v:.1e}" if v < 1e-3 else f"{v:.3f}",
    "count": lambda v: f"{v:,.0f}",
    "step": lambda v: f"{v:,.0f}",
}


def show(c: ClaimOverSeeds, name: str) -> str:
    """Number ``name`` of ``c``: its value (with its interval) in one seed; the median and range
    over several ('—' where no seed has it)."""
    found = [n for v in c.verdicts if (n := v.number(name)) is not None and n.value is not None]
    if not found:
        return "—"
    fmt = KINDS[found[0].kind]
    if len(c.seeds) == 1:
        n = found[0]
        ci = f" [{fmt(n.low)}, {fmt(n.high)}]" if n.low is not None and n.high is not None else ""
        return fmt(n.value) + ci  # type: ignore[arg-type]
    xs = [float(n.value) for n in found]  # type: ignore[arg-type]
    out = fmt(statistics.median(xs))
    if fmt(min(xs)) != fmt(max(xs)):  # a range only where the seeds differ
        out += f" ({fmt(min(xs))}–{fmt(max(xs))})"
    return out + (f" in {len(xs)} of {len(c.seeds)}" if len(xs) < len(c.seeds) else "")


#: One template per claim: what "ours" says, its fields the verdict's numbers.
TEMPLATES = {
    "exam": "2 layers: {rank2}, p {p2}; 1 layer: {rank1}, p {p1}",
    "one_cannot": "{roles} induction heads; order effect: exams {exam_effect}, passages {passage_effect}",
    "two_can": "{checked} induction head(s) passing the causal check; top-1 {difference} over 1 layer (McNemar p {p})",
    "reliably": "both rows above in {held} of {seeds} seeds",
    "switch": "top-1 by depth {rates}: 1→2 layers {rise}, after 2 {later}",
    "phase_loss": "loss fall per 1,000 steps over steps {start}–{end}: {fall_at} (before {fall_before}, after {fall_after})",
    "phase_loss_seeds": "loss fall per 1,000 steps over the phase change: {fall_at} (before {fall_before}, after {fall_after})",
    "gpt2": "",
}


def criteria(t: Thresholds = THRESHOLDS) -> dict[str, str]:
    """Each claim's criterion in a few words, with its thresholds."""
    e, pe = f"{100 * t.induction_effect:g} pts", f"{t.passage_effect:g} nats"
    return {
        "exam": "2 layers rank the target 1st, 1 layer does not",
        "one_cannot": f"no induction head; neither order effect ≥ its floor ({e}; {pe}) with its interval above 0",
        "two_can": f"an induction head passing its causal check; top-1 above 1 layer, p < {t.chance_alpha:g}, ≥ {e}",
        "reliably": f"both rows in every seed, {t.min_seeds}+ seeds",
        "switch": f"1→2-layer rise ≥ {e} and larger than the changes after 2 layers together",
        "phase_loss": "the loss falls faster over the phase change than just before and after it",
        "gpt2": "—",
    }


def ours(c: ClaimOverSeeds, template: str) -> str:
    """The claim's numbers through its template ('' when not measured)."""
    if c.mark == Mark.NOT_MEASURED:
        return ""
    fields = {name: show(c, name) for v in c.verdicts for name in (n.name for n in v.numbers)}
    if template == "phase_loss" and len(c.seeds) > 1:  # each seed's steps differ: not listed
        template = "phase_loss_seeds"
    if template == "switch":
        rates = [k for k in fields if k.startswith("top1_")]
        fields["rates"] = ", ".join(f"{k[5:]}L {fields[k]}" for k in rates)
    return TEMPLATES[template].format(**fields)


MARK_SIGN = {
    Mark.REPRODUCED: "✓",
    Mark.NOT_REPRODUCED: "✗",
    Mark.PARTLY: "◐",
    Mark.NOT_MEASURED: "–",
}


def mark_words(c: ClaimOverSeeds) -> str:
    """'✓ reproduced', '◐ in 3 of 5 seeds', '– not measured: why'."""
    sign = MARK_SIGN[c.mark]
    if c.mark == Mark.PARTLY:
        return f"{sign} in {len(c.held)} of {len(c.seeds)} seeds"
    if c.mark == Mark.NOT_MEASURED:
        return f"{sign} not measured: {c.why}"
    words = f"{sign} {c.mark.value}"
    if len(c.seeds) > 1 and c.key != "reliably":
        words += f" ({len(c.held)} of {len(c.seeds)} seeds)"
    return words


def claims_table(
    settings: Sequence[tuple[str, Sequence[ClaimOverSeeds]]], t: Thresholds = THRESHOLDS
) -> str:
    """The claims table (HTML): one row per claim, the post's number, ours per setting (mark and
    numbers), the criterion. ``settings``: (title, that setting's claims over its seeds)."""
    words = criteria(t)
    head = "".join(f"<th>{html.escape(title)}</th>" for title, _ in settings)
    rows = []
    for claim in CLAIMS:
        cells = []
        for _, claims in settings:
            c = next(x for x in claims if x.key == claim.key)
            mark = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(mark_words(c)))
            cls = c.mark.name.lower().replace("_", "-")
            text = ours(c, claim.template)
            detail = f'<div class="ours">{html.escape(text)}</div>' if text else ""
            cells.append(f'<td class="mark {cls}"><b>{mark}</b>{detail}</td>')
        rows.append(
            f"<tr><th scope=row>{html.escape(claim.statement)}</th>"
            f"<td class=post>{html.escape(claim.post)}</td>{''.join(cells)}"
            f"<td class=criterion>{html.escape(words[claim.template])}</td></tr>"
        )
    return (
        '<table class="claims"><thead><tr><th>the post says</th><th>its number</th>'
        f"{head}<th>reproduced when</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def first_seed(c: ClaimOverSeeds) -> ClaimOverSeeds:
    """The claim in the first seed alone ("reliably" stays the verdict over all seeds)."""
    if c.key == "reliably" or len(c.seeds) == 1:
        return c
    return ClaimOverSeeds(c.key, c.seeds[:1], c.verdicts[:1])


def claims_markdown(
    settings: Sequence[tuple[str, Sequence[ClaimOverSeeds]]], t: Thresholds = THRESHOLDS
) -> str:
    """The claims table as Markdown (the study's ``claims.md``, the README's table): per setting
    its first seed's mark and numbers and, over several seeds, the mark and the medians and
    ranges over them."""
    words = criteria(t)
    head, cols = ["the post says", "its number"], []
    for title, claims in settings:
        seeds = claims[0].seeds
        head.append(f"{title}, seed {seeds[0]}")
        cols.append((claims, first_seed))
        if len(seeds) > 1:
            head.append(f"{title}, {len(seeds)} seeds: median (range)")
            cols.append((claims, lambda c: c))
    head.append("reproduced when")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for claim in CLAIMS:
        cells = [claim.statement, claim.post]
        for claims, view in cols:
            c = view(next(x for x in claims if x.key == claim.key))
            text = ours(c, claim.template)
            cells.append(f"**{mark_words(c)}**" + (f": {text}" if text else ""))
        cells.append(words[claim.template])
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def claims_json(claims: Sequence[ClaimOverSeeds]) -> dict[str, dict[str, object]]:
    """study.json's claims of one setting: each claim's mark, the seeds it held in, the numbers
    of each seed, and why it was not measured."""
    return {
        c.key: {
            "mark": c.mark.value,
            "held": list(c.held),
            "seeds": list(c.seeds),
            "why": c.why,
            "numbers": [{n.name: n.value for n in v.numbers} for v in c.verdicts],
        }
        for c in claims
    }


def claim_lines(title: str, claims: Sequence[ClaimOverSeeds]) -> list[str]:
    """The claims of one setting as lines for a terminal: claim, mark, our numbers."""
    out = []
    for claim in CLAIMS:
        c = next(x for x in claims if x.key == claim.key)
        words = ours(c, claim.template)
        out.append(
            f"{title}: {claim.statement}: {mark_words(c)}" + (f" — {words}" if words else "")
        )
    return out
