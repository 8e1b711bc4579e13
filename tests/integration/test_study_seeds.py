"""`reproduce --seeds 2` on a tiny budget: the second seed is a whole study of its own in
seed-1/, and the first seed's page and study.json give every measure over both seeds, each
value the one that seed's own study measured."""

from __future__ import annotations

import dataclasses
import json

from interp_toolkit.exams.verdict import exam_verdict
from interp_toolkit.study.reproduce import StudyConfig, reproduce


def test_two_seeds_each_a_study_and_their_spread_on_the_page(tmp_path):
    out = tmp_path / "s"
    cfg = StudyConfig(out=out, preset="cpu", layers=(1, 2), steps=6, sample_tokens=4, seeds=2)
    result = reproduce(cfg)
    study = json.loads((out / "study.json").read_text())
    other = json.loads((out / "seed-1" / "study.json").read_text())
    assert study["seeds"] == [0, 1] and other["seed"] == 1 and other["status"] == "done"
    assert (out / "seed-1" / "cpu-2l" / "report.html").is_file()
    (over,) = study["over_seeds"]
    assert over["preset"] == "cpu" and over["seeds"] == [0, 1]
    runs = {r["name"]: r for r in over["runs"]}
    assert list(runs) == ["cpu-1l", "cpu-2l"]
    # each seed's value is the one its own study measured (seed 1's study, run again, reuses
    # its runs and measures them the same)
    again = reproduce(dataclasses.replace(cfg, out=out / "seed-1", seed=1, seeds=1))
    for seed, depths in ((0, result.depths), (1, again.depths)):
        for d in depths:
            run = runs[d.name]
            assert (
                run["exams_passing"]["by_seed"][str(seed)] == exam_verdict(d.period_exams).n_passing
            )
            assert run["val_loss"]["by_seed"][str(seed)] == d.val_loss
            assert run["steps"]["by_seed"][str(seed)] == 6
    assert runs["cpu-2l"]["val_loss"]["by_seed"] != {"0": None, "1": None}
    # 6 steps grow no induction: "2 layers can" held in no seed, "reliably" needs 3 seeds, the
    # 2-layer model is a reliable copier in no seed; the page and the terminal say so
    assert over["claims"]["two_can"]["mark"] == "not reproduced"
    assert over["claims"]["two_can"]["held"] == [] and over["claims"]["two_can"]["measured"] == [
        0,
        1,
    ]
    assert over["claims"]["reliably"]["mark"] == "not measured"
    assert over["reliable_copier"] == {"held": 0, "of": 2, "seeds": []}
    html = result.index.read_text()
    assert "Over 2 seeds" in html and "✗ not reproduced (0 of 2 seeds)" in html
    assert any(
        line.startswith("Curriculum: 2 layers can: ✗ not reproduced") for line in result.findings
    )
