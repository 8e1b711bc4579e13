"""Behaviour did not change with the layout move: a small study (layers 1 and 2, 12 steps, the
curriculum) gives exactly the study.json it gave before the move (tests/snapshots/
small_study.json, taken on the old layout), less the wall-clock fields."""

from __future__ import annotations

import json
from pathlib import Path

from interp_toolkit.study.reproduce import StudyConfig, reproduce

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "small_study.json"


def _comparable(study: dict) -> dict:
    study = dict(study)
    study.pop("elapsed_s", None)
    for depth in study.get("depths", []):
        if depth.get("circuit"):
            depth["circuit"].pop("seconds", None)
    return json.loads(json.dumps(study, sort_keys=True))


def test_small_study_json_is_unchanged(tmp_path):
    cfg = StudyConfig(out=tmp_path / "s", layers=(1, 2), steps=12, sample_tokens=8, workers=1)
    reproduce(cfg)
    got = _comparable(json.loads((tmp_path / "s" / "study.json").read_text()))
    want = json.loads(SNAPSHOT.read_text())
    assert got == want
