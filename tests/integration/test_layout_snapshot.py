"""Behaviour did not change with the layout move: a small study (layers 1 and 2, 12 steps, the
curriculum) gives exactly the study.json it gave before the move (tests/snapshots/
small_study.json, taken on the old layout), less the wall-clock fields (CLOCK)."""

from __future__ import annotations

import json
from pathlib import Path

from interp_toolkit.study.reproduce import StudyConfig, reproduce

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "small_study.json"


#: Wall-clock fields: they differ between any two runs.
CLOCK = {"elapsed_s", "seconds", "train_minutes", "induction_minutes"}


def _comparable(x):
    if isinstance(x, dict):
        return {k: _comparable(v) for k, v in sorted(x.items()) if k not in CLOCK}
    if isinstance(x, list):
        return [_comparable(v) for v in x]
    return x


def test_small_study_json_is_unchanged(tmp_path):
    cfg = StudyConfig(
        out=tmp_path / "s", preset="cpu", layers=(1, 2), steps=12, sample_tokens=8, workers=1
    )
    reproduce(cfg)
    got = _comparable(json.loads((tmp_path / "s" / "study.json").read_text()))
    want = _comparable(json.loads(SNAPSHOT.read_text()))
    assert got == want
