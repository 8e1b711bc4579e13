"""metrics.jsonl: what training logs, and "the first step with an induction head".

One JSON line per logged step: ``step``, ``tokens``, ``loss``, ``elapsed_s``, ``tokens_per_s``,
``lr``; every ``score_every`` steps also each head's :data:`LOGGED_SCORES` as ``[layer][head]``
grids (rounded to 4 decimals) on repeated random tokens, ``val_loss`` (held-out), and the text
measures of :func:`text_metrics` (the keys of
:meth:`~interp_toolkit.exams.text_measures.TextInduction.metrics`; runs logged before them lack
these keys, and every reader treats them as optional). Score keys are the registry's
``Score.logged_as`` (the previous-token score is ``prev_token`` in this file). Which head is "the
induction head" and when induction formed: :mod:`interp_toolkit.heads.induction`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

import torch
from jaxtyping import Int
from transformer_lens import TransformerBridge

from interp_toolkit.exams.text_measures import text_induction
from interp_toolkit.files.io import write_text
from interp_toolkit.heads.induction import INDUCTION_SCORE
from interp_toolkit.heads.registry import SCORE
from interp_toolkit.heads.repeats import RepeatedTokens
from interp_toolkit.heads.scorer import head_scores
from interp_toolkit.runs.folder import RunPaths, read_metrics, stamp

#: The scores training logs every ``score_every`` steps, in the order they are written (the
#: score deciding the induction role, read by the stop rule, last).
LOGGED_SCORES = ("induction", "previous_token", INDUCTION_SCORE)
#: The held-out text windows the text measures read, the first of them the val-loss windows
#: (64, as before the text measures), and how many are repeated as passages.
TEXT_WINDOWS, VAL_WINDOWS, PASSAGE_ROWS = 256, 64, 16


def text_metrics(
    model: TransformerBridge,
    windows: Int[torch.Tensor, "window pos"],
    *,
    unk_id: int | None = None,
    groups: Sequence[int] | None = None,
) -> dict[str, Any]:
    """``val_loss`` (the first :data:`VAL_WINDOWS` windows) and the text measures on held-out
    ``windows`` (the first :data:`TEXT_WINDOWS`): the in-context score, the repeated-passage
    drop (first :data:`PASSAGE_ROWS`) and every head's induction score on the text
    (:func:`~interp_toolkit.exams.text_measures.text_induction`); only ``val_loss`` when
    there are fewer than 2 windows or they are shorter than 8 tokens. ``unk_id``: the
    vocabulary's ``<unk>``, never read as a repeat. ``groups``: the document each window comes
    from (the in-context score's interval resamples documents; training passes
    :meth:`~interp_toolkit.text.store.TokenWindows.spread`'s)."""
    windows = windows[:TEXT_WINDOWS]
    groups = None if groups is None else list(groups)[:TEXT_WINDOWS]
    device = next(model.parameters()).device
    if len(windows) < 2 or windows.shape[1] < 8:
        val = windows[:VAL_WINDOWS].to(device)
        return {"val_loss": round(float(model(val, return_type="loss")), 5)}
    measured = text_induction(
        model,
        windows,
        passage_rows=PASSAGE_ROWS,
        val_rows=VAL_WINDOWS,
        unk_id=unk_id,
        groups=groups,
    )
    return {"val_loss": round(measured.val_loss, 5), **measured.metrics()}


def score_grids(model: TransformerBridge, batch: RepeatedTokens) -> dict[str, list[list[float]]]:
    """Each head's :data:`LOGGED_SCORES` (rounded), keyed as in metrics.jsonl."""
    with torch.no_grad():
        s = head_scores(model, batch)
    return {
        SCORE[name].logged_as: [[round(float(v), 4) for v in row] for row in s.get(name)]
        for name in LOGGED_SCORES
    }


class MetricsLog:
    """metrics.jsonl of a run, open for appending one line per logged step."""

    def __init__(self, paths: RunPaths) -> None:
        self._stamp = stamp(paths.root)  # the run the rows belong to (checked on read)
        self._file: TextIO = paths.metrics.open("a", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        try:
            self._file.write(json.dumps({**row, **self._stamp}) + "\n")
            self._file.flush()
        except OSError as exc:  # a full disk: say which file
            exc.filename = exc.filename or self._file.name
            raise

    def close(self) -> None:
        self._file.close()


def truncate_metrics(paths: RunPaths, step: int) -> None:
    """Drop the lines after ``step`` (a resumed run logs them again)."""
    rows = [r for r in read_metrics(paths.root) if int(r.get("step", 0)) <= step]
    write_text(paths.metrics, "".join(json.dumps(r) + "\n" for r in rows))
