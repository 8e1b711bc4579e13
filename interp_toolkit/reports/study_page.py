"""The study page (data in, HTML out): the first screen answers the original post's claims (the
claims table, :mod:`.claims`, beside the "how good a copier" figure), then each setting's details
fold below it (runs side by side, the heads table, the depths' measures from the registry, exams,
routes, circuits, probes, stages, the seeds).

The first screen fits 1400 x 900 px in a browser (``tests/integration/test_browser.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.measures.claims import POST_EXAMS, ClaimOverSeeds
from interp_toolkit.measures.depth import DepthMeasurement
from interp_toolkit.measures.registry import percent
from interp_toolkit.measures.run import RunSummary
from interp_toolkit.measures.seeds import Held
from interp_toolkit.reports.claims import claims_table
from interp_toolkit.reports.findings import interval_pct
from interp_toolkit.stats.thresholds import THRESHOLDS, Thresholds
from interp_toolkit.views.induction_plots import copier_figure
from interp_toolkit.views.page import Row, Section, render_report, table, text

#: How the page names the study it reproduces (and its claim, quoted).
POST_NAME = "the blog post “Mechanistic Interpretability”"
POST_CLAIM = "1 layer cannot do induction, 2 layers can, reliably; a switch, not a ramp"


@dataclass(frozen=True)
class SettingPage:
    """One setting of the study as the page shows it: its title, its seed-0 depths, its claims
    over its seeds, the seeds in which its 2-layer model was a reliable copier, and its detail
    sections (folded under the first screen)."""

    title: str
    depths: tuple[DepthMeasurement, ...]
    claims: tuple[ClaimOverSeeds, ...]
    copier: Held
    sections: tuple[Section, ...]


def copier_words(s: SettingPage, t: Thresholds = THRESHOLDS) -> str:
    """The strict rule as a named, secondary finding: is the 2-layer model a reliable copier at
    every period exam (Wilson lower bound ≥ 90% at each)? With its lowest exam."""
    two = next((d for d in s.depths if d.n_layers == 2 and d.period_exams), None)
    if two is None:
        return f"{s.title}: no 2-layer model sat the period exams."
    v = exam_verdict(two.period_exams, t)
    low = v.lowest
    answer = "yes" if v.all_pass else "no"
    out = (
        f"{s.title}: {answer} ({two.name} passes {v.n_passing} of {v.n_exams}; lowest "
        f"{percent(low.pass_rate)} at period {low.period}, {low.kind})"
    )
    if len(s.copier.seeds) > 1:
        out += f"; over seeds: {s.copier.words()}"
    return out + "."


def first_screen(settings: Sequence[SettingPage], t: Thresholds = THRESHOLDS) -> Section:
    """The claims table beside the copier figure, and the strict rule under them."""
    tables = claims_table([(s.title, s.claims) for s in settings], t)
    panels = {
        s.title: {
            d.name: (d.n_layers, d.period_exams)
            for d in s.depths
            if d.n_layers <= 2 and d.period_exams
        }
        for s in settings
    }
    post = [
        (p, v, f"the post's {n}-layer model, {exam}: p(target) {percent(v)}")
        for exam, p, n, v in POST_EXAMS
    ]
    figure = copier_figure({k: v for k, v in panels.items() if v}, post)
    strict = (
        "A reliable copier at every period (a stricter rule than the post's, deciding no mark: "
        f"every period exam's Wilson 95% lower bound ≥ {percent(t.exam_lower_bound)}): "
        + " ".join(copier_words(s, t) for s in settings)
    )
    return Section(
        "The post's claims, checked",
        [Row([tables, figure], cls="first"), text(strict, "p", "note")],
        anchor="claims",
    )


def heads_table(depths: Sequence[DepthMeasurement], summaries: Sequence[RunSummary]) -> str:
    """Every head with a role, one row each: its deciding score, its causal check (what ablating
    it removes, with the interval, and whether that passes), and for an induction head its route
    by path (the input that carries it and the head feeding it)."""
    by_name = {x.name: x for x in summaries}
    rows = []
    for d in depths:
        if (s := by_name.get(d.name)) is None:
            continue
        checks = {(str(c.head), c.role): c for c in (d.role_checks.checks if d.role_checks else ())}
        routes = {str(h.head): h for h in d.route.heads}
        for role, heads in s.heads.items():
            kind = s.decides.get(role)
            for h in heads:
                layer, head = (int(x) for x in h.split("."))
                score = s.scores[kind][layer][head] if kind in s.scores else None
                c = checks.get((h, role))
                if c is None:
                    check = "—"
                elif c.removed is None:
                    check = f"untestable ({c.why})"
                else:
                    check = f"{interval_pct(c.removed)} {'pass' if c.passed else 'flagged'}"
                route = routes.get(h) if role == "induction" else None
                way = (
                    "—"
                    if route is None
                    else route.name.value + (f" from {route.feeder}" if route.feeder else "")
                )
                rows.append([d.name, h, role, "—" if score is None else f"{score:.3f}", check, way])
    header = [
        "run",
        "head",
        "role",
        "deciding score",
        "causal check: share removed [95%]",
        "route by path",
    ]
    return table(header, rows)


def study_page(
    settings: Sequence[SettingPage], *, title: str, lede: str, t: Thresholds = THRESHOLDS
) -> str:
    """The whole page: a header naming the post and its claim, the first screen, then each
    setting's details, folded."""
    sections = [first_screen(settings, t)]
    for s in settings:
        sections += [
            Section(f"{s.title}: {sec.title}", sec.items, sec.intro, folded=True)
            for sec in s.sections
        ]
    return render_report(sections, title=title, subtitle=lede, nav=False)


def lede(seeds: Sequence[int], machine: str, minutes: float) -> str:
    """The header's line: what is reproduced, its claim, and where these numbers hold."""
    which = f"seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"
    return (
        f"Reproduces {POST_NAME} (attention-only transformers of 1, 2, 3 and 8 layers; the post "
        f"says: “{POST_CLAIM}”). Random {which}; {machine}; this page took {minutes:.1f} min. "
        "Exact values depend on the CPU's kernels and thread count."
    )
