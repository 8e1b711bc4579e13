"""The sentences about induction on text, as pure functions of metrics.jsonl rows.

Every number comes from the rows the run logged (the keys of
:meth:`~interp_toolkit.exams.text_measures.TextInduction.metrics`); rows without the text
measures (runs logged before them) are skipped, and no rows give no sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _ci(row: dict[str, Any], key: str, ci: str) -> str:
    lo, hi = row[ci]
    return f"{row[key]:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def icl_positions_phrase(row: dict[str, Any]) -> str:
    """'mean loss on tokens 30-31 minus tokens 2-3 of 32-token windows', from ``icl_tokens``."""
    a, b, c, d, n = row["icl_tokens"]
    return f"mean loss on tokens {c}-{d - 1} minus tokens {a}-{b - 1} of {n}-token windows"


def steepest_fall(rows: Sequence[dict[str, Any]], key: str) -> tuple[float, int, int] | None:
    """The largest fall of ``key`` between two consecutive scorings: (fall, from step, to step);
    None with fewer than two scorings or no fall."""
    pairs = [(a[key] - b[key], a["step"], b["step"]) for a, b in zip(rows, rows[1:], strict=False)]
    best = max(pairs, default=None)
    return best if best is not None and best[0] > 0 else None


def text_sentences(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What the run report says about induction on text (rows: metrics.jsonl)."""
    rows = [r for r in rows if "icl_score" in r and "step" in r]
    if not rows:
        return []
    first, last = rows[0], rows[-1]
    n = last.get("text_windows")
    windows = f"{n} held-out windows" if n else "held-out windows"
    out = [
        f"In-context-learning score at step {last['step']}: {_ci(last, 'icl_score', 'icl_ci')} "
        f"nats ({icl_positions_phrase(last)}, Olsson et al.'s token 500 minus token 50 of 512 "
        f"scaled to this context; 95% interval over {windows}); at step {first['step']} it was "
        f"{_ci(first, 'icl_score', 'icl_ci')}."
    ]
    fall = steepest_fall(rows, "icl_score")
    if fall is not None:
        out.append(
            f"Its steepest fall between two scorings: {fall[0]:.3f} nats, from step {fall[1]} "
            f"to step {fall[2]}."
        )
    if "passage_drop" in last:
        a, b = last["passage_loss"]
        out.append(
            f"A held-out passage of {last.get('passage_tokens', '?')} tokens followed by itself "
            f"({last.get('passage_rows', '?')} windows): the loss on the second copy is "
            f"{_ci(last, 'passage_drop', 'passage_ci')} nats lower than on the first "
            f"({a:.3f} -> {b:.3f}) at step {last['step']}; "
            f"{_ci(first, 'passage_drop', 'passage_ci')} at step {first['step']}."
        )
    if last.get("text_induction_best") is not None:
        was = first.get("text_induction_best")
        out.append(
            f"Best induction score on natural text (layers >= 1, any layer for 1 layer): head "
            f"{last['text_induction_head']} {last['text_induction_best']:.3f} at step "
            f"{last['step']}"
            + (f"; {was:.3f} at step {first['step']}." if was is not None else ".")
        )
    return out
