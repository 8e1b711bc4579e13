"""What the CLI prints is rendered from typed results (``reports/terminal.py``): the renderer
reads the dataclass, so a misread field fails here on hand-made results."""

from __future__ import annotations

import io

from rich.console import Console

from interp_toolkit.exams.periods import Chance, PeriodExam
from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.reports.terminal import exams_view, period_exams_view


def _text(shown) -> str:
    buf = io.StringIO()
    out = Console(width=300, file=buf)
    for item in shown:
        out.print(item, soft_wrap=isinstance(item, str))
    return buf.getvalue()


def test_period_exams_render_each_rows_pass_and_chance():
    """Period 2 passes (100 of 100: Wilson's lower bound is past the 0.9 floor), period 3 does
    not (91 of 100: a rate past 0.9 whose interval's lower bound is not); each row's chance
    model and its p-value are shown beside it."""
    chance = (Chance("untrained", 3, 100, 1e-30),)
    rows = [
        PeriodExam(2, "random", 100, 100, 0.0, offsets=(0, 9), positions=10, chance=chance),
        PeriodExam(3, "random", 100, 91, 0.0, offsets=(1, 8), positions=8, chance=chance),
    ]
    text = _text(period_exams_view("m", rows, exam_verdict(rows)))
    assert "(1 of 2 pass;" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert "100.0%" in lines[0] and " yes " in lines[0] and "0..9 of 10" in lines[0]
    assert "91.0%" in lines[1] and " no " in lines[1]
    assert all("3.0% (1e-30)" in ln for ln in lines)


def test_an_exam_marks_its_target_among_the_top_tokens():
    from interp_toolkit.exams.single import ExamResult

    r = ExamResult(
        " A B A", " B", 7, 1, 0.25, [(" C", 0.5), (" B", 0.25)], name="x", top_ids=[3, 7]
    )
    (table,) = exams_view("m", [r])
    assert table.title.endswith("rank 1, p = 0.250 (fail)")
    assert table.rows[1].style == "bold green" and table.rows[0].style is None
