"""The study over seeds on the page: :func:`seeds_section`, one row per registry measure
(:data:`~interp_toolkit.measures.registry.MEASURES`), one column per run, each cell the median and
range over the seeds (or the seeds a yes/no held in, or each category's count). The measures and
their aggregation are :mod:`interp_toolkit.measures.seeds`'."""

from __future__ import annotations

from interp_toolkit.measures.registry import MEASURES
from interp_toolkit.measures.seeds import SettingOverSeeds
from interp_toolkit.views.page import Section, table


def seeds_section(s: SettingOverSeeds) -> Section:
    """A table: one row per measure, one column per run, median (range) over the seeds."""
    runs = s.runs
    rows = []
    for m in MEASURES:
        cells = [r[m.name].words(m.fmt) for r in runs]
        label = f"{m.label} (seeds)" if m.kind == "held" else m.label
        if m.name == "exams_passing":
            cells = [f"{c} of {r.n_exams}" for c, r in zip(cells, runs, strict=True)]
        rows.append([label, *cells])
    intro = (
        f"Seeds {', '.join(map(str, s.seeds)) or 'none'}: each seed sets the model's initialisation, the data order and "
        "the analysis prompts. A cell is the median over the seeds and (in brackets) the lowest "
        "and highest; a count says in how many seeds it held. Each seed's own study is in "
        "seed-S/ (the first seed's is this page's other sections)."
    )
    return Section(
        f"Over {len(s.seeds)} seeds",
        [table(["measure", *(r.name for r in runs)], rows)],
        intro=intro,
    )
